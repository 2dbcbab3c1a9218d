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
        Ok(Self { value })
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
pub fn default_output_path(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map_or_else(|| "notebook".into(), |s| s.to_string_lossy().into_owned());
    input.with_file_name(format!("{stem}.executed.ipynb"))
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
    }

    #[test]
    fn default_output_sits_beside_the_input() {
        assert_eq!(
            default_output_path(Path::new("dir/a.ipynb")),
            PathBuf::from("dir/a.executed.ipynb")
        );
    }
}
