//! Reading and writing `.ipynb` files, and recording kernel output into them.
//!
//! A notebook is kept as a `serde_json::Value` and edited in place: only `outputs`,
//! `execution_count` and a few metadata keys change, so metadata, unknown top-level and
//! cell-level fields and the cells we do not run survive untouched. Writing follows
//! `nbformat.write` (multi-line strings split into lines, keys sorted, one-space indent,
//! trailing newline), so a notebook round-trips to the same bytes Python would produce.
//! Numbers are kept as written (serde_json's `arbitrary_precision`): a float keeps every digit
//! and an int of any size stays an int.
//!
//! The parts live beside it: [`nbformat_json`](super::nbformat_json) writes the text,
//! [`output_recorder`](super::output_recorder) records kernel output into cells and
//! [`output_message`](super::output_message) turns an output message into an nbformat output;
//! their public names are re-exported here.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::KernelError;
use super::nbformat_json::split_notebook_lines;
pub use super::nbformat_json::{split_lines, to_nbformat_json};
pub use super::output_message::output_from_msg;
pub use super::output_recorder::{DEFAULT_OUTPUT_LIMIT, OutputRecorder};

/// One notebook, as JSON.
#[derive(Clone, Debug)]
pub struct Notebook {
    pub value: Value,
}

impl Notebook {
    /// Read and check a notebook file (nbformat 4).
    pub fn read(path: &Path) -> Result<Self, KernelError> {
        let text = fs::read_to_string(path).map_err(|source| KernelError::io(path, source))?;
        Self::parse(&text).map_err(|detail| KernelError::InvalidNotebook {
            path: path.to_path_buf(),
            detail,
        })
    }

    /// Parse notebook JSON; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match value.get("nbformat").and_then(Value::as_u64) {
            Some(4) => {}
            Some(v) => {
                return Err(format!(
                    "nbformat {v} is not supported; convert it with `jupyter nbconvert --to notebook` first"
                ));
            }
            None => return Err("no `nbformat` field: not a notebook".into()),
        }
        let cells = value
            .get("cells")
            .and_then(Value::as_array)
            .ok_or("no `cells` list")?;
        if cells
            .iter()
            .any(|c| !c.is_object() || c.get("cell_type").and_then(Value::as_str).is_none())
        {
            return Err("a cell is not an object with a `cell_type`".into());
        }
        // A source that is not text would run as an empty cell and be written back as it was,
        // into a notebook nbformat rejects.
        for (i, cell) in cells.iter().enumerate() {
            let text = match cell.get("source") {
                None | Some(Value::String(_)) => true,
                Some(Value::Array(lines)) => lines.iter().all(Value::is_string),
                Some(_) => false,
            };
            if !text {
                return Err(format!(
                    "cell {}: `source` is {}, where nbformat wants a string or a list of strings",
                    i + 1,
                    json_kind(&cell["source"])
                ));
            }
        }
        Ok(Self { value })
    }

    /// Give each cell an id nbformat accepts (from 4.5 on: 1 to 64 of `[a-zA-Z0-9-_]`, unique),
    /// as nbformat repairs missing and duplicate ids: a cell whose id is missing, malformed
    /// (`a b:c`) or taken by an earlier cell gets a new one. Returns one note per change, for
    /// the user to be told; the notebook written is then valid.
    pub fn repair_cell_ids(&mut self) -> Vec<String> {
        if self.minor() < 5 {
            return Vec::new();
        }
        let mut notes = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, cell) in self.cells_mut().iter_mut().enumerate() {
            let id = cell.get("id").and_then(Value::as_str).map(String::from);
            if let Some(id) = &id
                && is_valid_cell_id(id)
                && seen.insert(id.clone())
            {
                continue;
            }
            let new = loop {
                let candidate = new_cell_id();
                if seen.insert(candidate.clone()) {
                    break candidate;
                }
            };
            let why = match &cell.get("id") {
                None => "had no id".to_string(),
                Some(Value::String(old)) if is_valid_cell_id(old) => format!("repeated the id `{old}`"),
                Some(Value::String(old)) => format!(
                    "had the id {old:?}, which nbformat rejects (1 to 64 letters, digits, `-` and `_`)"
                ),
                Some(other) => format!("had an id that is {}", json_kind(other)),
            };
            notes.push(format!("cell {} {why}; it is written with the id `{new}`", i + 1));
            cell["id"] = Value::String(new);
        }
        notes
    }

    pub fn cells(&self) -> &[Value] {
        self.value["cells"].as_array().map_or(&[], Vec::as_slice)
    }

    pub(crate) fn cells_mut(&mut self) -> &mut Vec<Value> {
        // `parse` checked that `cells` is a list.
        match self.value.get_mut("cells") {
            Some(Value::Array(cells)) => cells,
            _ => unreachable!("Notebook::parse checks that `cells` is a list"),
        }
    }

    /// nbformat minor version (cell ids are required from 4.5 on).
    pub fn minor(&self) -> u64 {
        self.value
            .get("nbformat_minor")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Metadata object, created if absent.
    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        object_field(&mut self.value, "metadata")
    }

    /// `metadata.kernelspec.name`, the kernel the notebook asks for.
    pub fn kernel_name(&self) -> Option<&str> {
        self.value
            .pointer("/metadata/kernelspec/name")
            .and_then(Value::as_str)
    }

    /// Remove outputs and execution counts from every code cell, so what the run writes is
    /// never mixed with stale results of an earlier run (cells after a failure stay empty).
    pub fn clear_outputs(&mut self) {
        for cell in self.cells_mut() {
            if cell_type(cell) == Some("code") {
                cell["outputs"] = Value::Array(Vec::new());
                cell["execution_count"] = Value::Null;
            }
        }
    }

    /// nbformat text of this notebook.
    pub fn to_json_string(&self) -> String {
        let mut value = self.value.clone();
        split_notebook_lines(&mut value);
        to_nbformat_json(&value)
    }

    /// Write the notebook to `path` (see [`write_output_file`](super::output_file::write_output_file):
    /// a file is replaced whole, a device or pipe written into, and every failure reported).
    pub fn write(&self, path: &Path) -> Result<(), KernelError> {
        super::output_file::write_output_file(path, self.to_json_string().as_bytes())
            .map_err(|source| KernelError::io(path, source))
    }
}

/// An id nbformat 4.5's schema accepts: `^[a-zA-Z0-9-_]+$`, 1 to 64 characters.
pub fn is_valid_cell_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A fresh cell id as nbformat makes them: the first 8 hex digits of a uuid4.
pub fn new_cell_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// What kind of JSON value this is, for messages: "a number", "an object".
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list holding something other than strings",
        Value::Object(_) => "an object",
    }
}

pub fn cell_type(cell: &Value) -> Option<&str> {
    cell.get("cell_type").and_then(Value::as_str)
}

/// A cell's source as one string (nbformat allows a string or a list of lines).
pub fn cell_source(cell: &Value) -> String {
    multiline_text(cell.get("source").unwrap_or(&Value::Null))
}

/// `metadata.tags` of a cell.
pub fn cell_tags(cell: &Value) -> Vec<&str> {
    cell.pointer("/metadata/tags")
        .and_then(Value::as_array)
        .map(|tags| tags.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A string or a list of strings, joined.
pub fn multiline_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn object_field<'a>(value: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !value[key].is_object() {
        value[key] = Value::Object(Map::new());
    }
    match value.get_mut(key) {
        Some(Value::Object(map)) => map,
        _ => unreachable!("just made `{key}` an object"),
    }
}

/// The output path for `input` when no `-o` is given: `NAME.executed.ipynb` beside it.
/// The stem is kept as bytes: a name that is not UTF-8 keeps its name, not a lossy copy.
pub fn default_output_path(input: &Path) -> PathBuf {
    let mut name = input
        .file_stem()
        .map_or_else(|| "notebook".into(), std::ffi::OsStr::to_os_string);
    name.push(".executed.ipynb");
    input.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_like_nbformat() {
        let nb = Notebook::parse(
            r#"{"nbformat": 4, "nbformat_minor": 5, "metadata": {"z": 1, "a": "é"},
               "cells": [{"cell_type": "code", "id": "x", "source": "a = 1\nb = 2", "metadata": {},
                          "execution_count": 1,
                          "outputs": [{"output_type": "display_data", "metadata": {},
                                       "data": {"text/plain": "1\n2", "image/png": "AAA\nBBB", "application/json": {"k": "v\nw"}}}]}]}"#,
        )
        .unwrap();
        let text = nb.to_json_string();
        let expected = r#"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "x",
   "metadata": {},
   "outputs": [
    {
     "data": {
      "application/json": {
       "k": "v\nw"
      },
      "image/png": "AAA\nBBB",
      "text/plain": [
       "1\n",
       "2"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "a = 1\n",
    "b = 2"
   ]
  }
 ],
 "metadata": {
  "a": "é",
  "z": 1
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn round_trip_keeps_unknown_fields_and_is_stable() {
        let original = json!({
            "nbformat": 4, "nbformat_minor": 4, "x-top": {"keep": [1, 2]},
            "metadata": {"custom": {"deep": true}},
            "cells": [{"cell_type": "markdown", "source": ["# T\n", "text"], "metadata": {"m": 1}, "x-cell": "kept",
                       "attachments": {"a.png": {"image/png": "AAAA", "text/plain": ["x\n", "y"]}}},
                      {"cell_type": "raw", "source": "raw", "metadata": {}}]
        });
        let nb = Notebook::parse(&original.to_string()).unwrap();
        let once = nb.to_json_string();
        let again = Notebook::parse(&once).unwrap().to_json_string();
        assert_eq!(once, again);
        let back: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(back["x-top"], original["x-top"]);
        assert_eq!(back["cells"][0]["x-cell"], "kept");
        assert_eq!(back["metadata"]["custom"]["deep"], true);
        assert_eq!(
            back["cells"][0]["attachments"]["a.png"]["text/plain"],
            json!(["x\n", "y"])
        );
    }

    #[test]
    fn rejects_what_is_not_a_v4_notebook() {
        assert!(Notebook::parse("[]").is_err());
        assert!(
            Notebook::parse(r#"{"nbformat": 3, "worksheets": []}"#)
                .unwrap_err()
                .contains("nbformat 3")
        );
        assert!(Notebook::parse(r#"{"nbformat": 4, "cells": [1]}"#).is_err());
        assert!(Notebook::parse("{").unwrap_err().starts_with("not JSON"));
        // A source that is not text cannot be run or written back as nbformat wants.
        let e = Notebook::parse(r#"{"nbformat": 4, "cells": [{"cell_type": "code", "source": "x"}, {"cell_type": "code", "source": 5}]}"#)
            .unwrap_err();
        assert!(e.contains("cell 2") && e.contains("a number"), "{e}");
        assert!(Notebook::parse(r#"{"nbformat": 4, "cells": [{"cell_type": "raw", "source": ["a", 1]}]}"#).is_err());
    }

    #[test]
    fn cell_ids_nbformat_rejects_are_replaced_and_said() {
        let mut nb = Notebook::parse(
            &json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
                {"cell_type": "code", "id": "a b:c", "source": "", "metadata": {}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "id": "ok-1", "source": "", "metadata": {}, "outputs": [], "execution_count": null},
                {"cell_type": "markdown", "id": "ok-1", "source": "", "metadata": {}},
                {"cell_type": "markdown", "source": "", "metadata": {}},
                {"cell_type": "raw", "id": 7, "source": "", "metadata": {}},
                {"cell_type": "raw", "id": "x".repeat(65), "source": "", "metadata": {}},
            ]})
            .to_string(),
        )
        .unwrap();
        let notes = nb.repair_cell_ids();
        assert_eq!(notes.len(), 5, "{notes:?}");
        assert!(notes[0].starts_with("cell 1 had the id \"a b:c\""), "{notes:?}");
        assert!(notes[1].starts_with("cell 3 repeated the id `ok-1`"), "{notes:?}");
        let ids: Vec<&str> = nb.cells().iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(ids[1], "ok-1");
        assert!(ids.iter().all(|id| is_valid_cell_id(id)), "{ids:?}");
        assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), ids.len());
        assert!(nb.repair_cell_ids().is_empty(), "a second pass has nothing to do");
        // Before 4.5 cells have no ids, and none are added.
        let mut old = Notebook::parse(r#"{"nbformat": 4, "nbformat_minor": 4, "cells": [{"cell_type": "code", "source": ""}]}"#).unwrap();
        assert!(old.repair_cell_ids().is_empty() && old.cells()[0].get("id").is_none());
    }

    #[test]
    fn default_output_sits_beside_the_input() {
        assert_eq!(
            default_output_path(Path::new("dir/a.ipynb")),
            PathBuf::from("dir/a.executed.ipynb")
        );
    }
}
