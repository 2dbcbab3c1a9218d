//! JSON Schemas of the `application/vnd.gpushare+json` payloads, generated from the Rust types that
//! serialise them, so a schema cannot drift from what gpushare writes.
//!
//! One schema per result kind, each describing the envelope `{"schema": "gpushare.<kind>/<N>",
//! "data": …}` (`report::envelope`). The generated files are committed under
//! `python/gpushare/schemas/` (shipped in the wheel and the sdist); a cargo test fails when they
//! differ from what the types generate, and `GPUSHARE_WRITE_SCHEMAS=1 cargo test --lib schema`
//! rewrites them.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::render::lab::{BenchmarkReport, ComparisonReport};
use crate::report::{ShareReport, TensorReport};

/// Every result kind that carries the envelope, in the order the docs list them.
pub const KINDS: [&str; 6] = ["tensor", "share", "shares", "comparison", "benchmark", "advice"];

/// Where the published schemas live, relative to the repository root.
pub const DIRECTORY: &str = "python/gpushare/schemas";

pub use crate::report::schema_id;

/// The file name of a kind's schema: `share.schema.json`.
pub fn file_name(kind: &str) -> String {
    format!("{kind}.schema.json")
}

fn describe(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "tensor" => "What one array is, as its framework and its DLPack export describe it (TensorInfo).",
        "share" => "One handoff of an array to a target framework, within this process or to a worker process (ShareResult; a handoff to a worker has its `worker` part: gpushare.share(x, to, across=…), Worker.share).",
        "shares" => "The handoffs of one magic or chain, in order (ShareResults, %%share tables).",
        "comparison" => "Every transfer path tried on one array, within this process or to a worker process (gpushare.compare, %share --path all, gpushare.compare(x, to, across=…)).",
        "benchmark" => "A sweep over sizes × transfer paths, within this process or to a worker process (gpushare.bench, %sharebench, gpushare bench --json, gpushare.bench(src, dst, across=\"processes\")).",
        "advice" => "Every applicable path's predicted verdict and time for one array, and the one to take (gpushare.advise, %share --advise).",
        _ => return None,
    })
}

/// The JSON Schema (draft 2020-12) of a kind's envelope, or `None` for an unknown kind.
pub fn schema_for(kind: &str) -> Option<Value> {
    let description = describe(kind)?;
    // Serialisation contract: the schema says what gpushare writes (fields with a serde default
    // are still always written, so they are required here).
    let mut generator = SchemaSettings::draft2020_12().for_serialize().into_generator();
    let data = match kind {
        "tensor" => generator.subschema_for::<TensorReport>(),
        "share" => generator.subschema_for::<ShareReport>(),
        "shares" => generator.subschema_for::<Vec<ShareReport>>(),
        "comparison" => generator.subschema_for::<ComparisonReport>(),
        "benchmark" => generator.subschema_for::<BenchmarkReport>(),
        "advice" => generator.subschema_for::<crate::advice::advise::Advice>(),
        _ => return None,
    };
    let definitions = generator.take_definitions(true);
    let id = schema_id(kind);
    Some(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": id,
        "description": format!(
            "{description} The payload of application/vnd.gpushare+json and of to_json(); \
             to_dict() is `data` with the `schema` key added."
        ),
        "type": "object",
        "required": ["schema", "data"],
        "additionalProperties": false,
        "properties": {
            "schema": { "const": id, "description": "gpushare.<kind>/<version>: the version changes with any incompatible change" },
            "data": data.to_value(),
        },
        "$defs": Value::Object(definitions),
    }))
}

/// A schema as it is written to its file: pretty, with a final newline.
pub fn schema_text(kind: &str) -> Option<String> {
    schema_for(kind).map(|mut s| {
        // Keys in sorted order, so the published files do not change with the order the generator
        // happens to insert them in.
        s.sort_all_objects();
        format!("{}\n", serde_json::to_string_pretty(&s).expect("a Value always serialises"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn schema_files_match_the_rust_types() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(DIRECTORY);
        let write = std::env::var_os("GPUSHARE_WRITE_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for kind in KINDS {
            let text = schema_text(kind).unwrap();
            let path = dir.join(file_name(kind));
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        assert!(stale.is_empty(), "out of date (GPUSHARE_WRITE_SCHEMAS=1 cargo test --lib schema rewrites them): {stale:?}");
    }

    #[test]
    fn every_kind_names_its_version_and_resolves_its_references() {
        for kind in KINDS {
            let schema = schema_for(kind).unwrap();
            let version = if kind.starts_with("process-") { 2 } else { 1 };
            assert_eq!(schema["properties"]["schema"]["const"], format!("gpushare.{kind}/{version}"));
            let text = schema.to_string();
            // Every "#/$defs/X" points at a definition that is there.
            for piece in text.split("\"#/$defs/").skip(1) {
                let name = &piece[..piece.find('"').unwrap()];
                assert!(schema["$defs"].get(name).is_some(), "{kind}: dangling reference to {name}");
            }
        }
        assert!(schema_for("bogus").is_none());
    }

    #[test]
    fn the_share_schema_requires_the_contract_fields() {
        let schema = schema_for("share").unwrap();
        let required = schema["$defs"]["ShareReport"]["required"].as_array().unwrap();
        for field in ["path", "source", "target", "verdict", "reason", "timing"] {
            assert!(required.iter().any(|r| r == field), "{field} not required");
        }
        let verdicts = &schema["$defs"]["Verdict"];
        assert_eq!(verdicts["enum"], json!(["shared", "copied", "failed"]), "{verdicts}");
    }
}
