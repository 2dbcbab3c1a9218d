//! The CLI checks `gpushare bench SRC->DST` before any kernel starts, so it needs the framework
//! names and aliases without Python. They are the adapters' own: this script reads them from the
//! registry (`python/gpushare/adapters/__init__.py`: the classes in `ADAPTERS`, in its order, and
//! the module each is imported from) and from each adapter's class (`name = "…"`,
//! `aliases = (…)`), and writes `FRAMEWORKS` for `src/cli/bench_args.rs`. Adding a framework then
//! touches its adapter alone; crates/runner/tests/cli.rs checks the result against the installed package.

use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn quoted(text: &str) -> Vec<String> {
    text.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// `name` and `aliases` of `class` in an adapter module's source.
fn declared(source: &str, class: &str) -> Option<(String, Vec<String>)> {
    let start = source.find(&format!("class {class}("))?;
    let body = &source[start..];
    let end = body[1..].find("\nclass ").map_or(body.len(), |i| i + 1);
    let body = &body[..end];
    let mut name = None;
    let mut aliases = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("    name = ") {
            name = quoted(rest).into_iter().next();
        } else if let Some(rest) = line.strip_prefix("    aliases = ") {
            aliases = quoted(rest);
        }
    }
    Some((name?, aliases))
}

fn main() {
    let adapters: PathBuf = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../python/gpushare/adapters");
    println!("cargo:rerun-if-changed={}", adapters.display());
    let registry = fs::read_to_string(adapters.join("__init__.py"))
        .unwrap_or_else(|e| panic!("the adapters' registry {}: {e}", adapters.display()));
    let mut module_of: HashMap<String, String> = HashMap::new();
    for line in registry.lines() {
        if let Some((module, names)) = line.strip_prefix("from gpushare.adapters.").and_then(|r| r.split_once(" import ")) {
            for class in names.split(',') {
                module_of.insert(class.trim().to_string(), module.to_string());
            }
        }
    }
    let block = &registry[registry.find("ADAPTERS: dict").expect("ADAPTERS in the registry")..];
    let block = &block[..block.find("\n}").expect("the end of ADAPTERS")];
    let mut entries = Vec::new();
    for token in block.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '(')) {
        let Some(class) = token.strip_suffix('(').filter(|c| c.ends_with("Adapter")) else { continue };
        let module = module_of.get(class).unwrap_or_else(|| panic!("{class} is not imported in the registry"));
        let path = adapters.join(format!("{module}.py"));
        let source = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (name, aliases) = declared(&source, class).unwrap_or_else(|| panic!("no `name = \"…\"` in {class} ({})", path.display()));
        let aliases: Vec<String> = aliases.iter().map(|a| format!("{a:?}")).collect();
        entries.push(format!("    ({name:?}, &[{}]),", aliases.join(", ")));
    }
    assert!(!entries.is_empty(), "no adapters found in {}", adapters.display());
    let out = Path::new(&env::var("OUT_DIR").unwrap()).join("frameworks.rs");
    let code = format!("&[\n{}\n]\n", entries.join("\n"));
    fs::write(&out, code).unwrap();
}
