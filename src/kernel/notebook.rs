//! Reading and writing `.ipynb` files, and recording kernel output into them.
//!
//! A notebook is kept as a `serde_json::Value` and edited in place: only `outputs`,
//! `execution_count` and a few metadata keys change, so metadata, unknown top-level and
//! cell-level fields and the cells we do not run survive untouched. Writing follows
//! `nbformat.write` (multi-line strings split into lines, keys sorted, one-space indent,
//! trailing newline), so a notebook round-trips to the same bytes Python would produce.
//! Numbers are kept as written (serde_json's `arbitrary_precision`): a float keeps every digit
//! and an int of any size stays an int.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::KernelError;
use super::client::Message;
use super::widgets::Widgets;

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

/// Python's `str.splitlines(keepends=True)`, which nbformat uses: it also breaks at `\r`,
/// `\x0b`, `\x0c`, `\x1c`-`\x1e`, `\x85`, U+2028 and U+2029, not just `\n`.
pub fn split_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.peek() {
                Some(&(j, '\n')) => {
                    chars.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(text[start..end].to_string());
        start = end;
    }
    if start < text.len() {
        lines.push(text[start..].to_string());
    }
    lines
}

fn split_value(value: &mut Value) {
    if value.is_string()
        || value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
    {
        let text = multiline_text(value);
        *value = Value::Array(split_lines(&text).into_iter().map(Value::String).collect());
    }
}

/// The MIME types nbformat stores as lists of lines (`nbformat.v4.rwbase._split_mimebundle`).
fn is_split_mime(mime: &str) -> bool {
    let json =
        mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"));
    !json
        && (mime.starts_with("text/")
            || mime == "application/javascript"
            || mime == "image/svg+xml")
}

fn split_mimebundle(bundle: &mut Value) {
    if let Some(bundle) = bundle.as_object_mut() {
        for (mime, data) in bundle.iter_mut() {
            if is_split_mime(mime) {
                split_value(data);
            }
        }
    }
}

/// `nbformat.v4.rwbase.split_lines`, applied to a whole notebook.
fn split_notebook_lines(nb: &mut Value) {
    let Some(cells) = nb.get_mut("cells").and_then(Value::as_array_mut) else {
        return;
    };
    for cell in cells {
        if let Some(source) = cell.get_mut("source") {
            split_value(source);
        }
        if let Some(attachments) = cell.get_mut("attachments").and_then(Value::as_object_mut) {
            attachments.values_mut().for_each(split_mimebundle);
        }
        let Some(outputs) = cell.get_mut("outputs").and_then(Value::as_array_mut) else {
            continue;
        };
        for output in outputs {
            match output.get("output_type").and_then(Value::as_str) {
                Some("execute_result" | "display_data") => {
                    if let Some(data) = output.get_mut("data") {
                        split_mimebundle(data);
                    }
                }
                Some("stream") => {
                    if let Some(text) = output.get_mut("text") {
                        split_value(text);
                    }
                }
                _ => {}
            }
        }
    }
}

/// JSON the way `json.dumps(sort_keys=True, indent=1, ensure_ascii=False)` writes it, plus a
/// trailing newline. Keys are sorted explicitly: serde_json's `preserve_order` feature is
/// unified across the build, so another crate could turn insertion order on under us.
pub fn to_nbformat_json(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        serde_json::ser::PrettyFormatter::with_indent(b" "),
    );
    // Serialising a `Value` into a Vec cannot fail: every key is a string and there is no I/O.
    value
        .serialize(&mut ser)
        .expect("serialising a serde_json::Value into memory");
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

/// Where a display with a `display_id` landed, so `update_display_data` can find it again.
type DisplaySlot = (usize, usize);

/// How much output one cell may hold by default: beyond it, output is dropped and the notebook
/// says so. Front ends cap output too (the Jupyter server's IOPub rate limit, VS Code's and
/// Colab's truncation); without a cap, `while True: print(...)` fills memory and writes a
/// notebook of gigabytes.
pub const DEFAULT_OUTPUT_LIMIT: usize = 32 << 20;

/// Records kernel output messages into a notebook's cells, with the semantics of
/// nbclient/JupyterLab: `clear_output(wait=True)` clears just before the next output,
/// `update_display_data` rewrites every output that shares its `display_id` (in any cell run
/// so far), consecutive stream output of the same name is merged into one output, and
/// `ipywidgets.Output` captures output as a front end's does.
///
/// What it records is always valid nbformat: an output that nbformat would reject is left out
/// and reported ([`Self::take_invalid`]), as nbclient fails the cell with a
/// `NotebookValidationError`. Each cell (and output widget) holds at most `limit` bytes.
#[derive(Debug)]
pub struct OutputRecorder {
    display_ids: HashMap<String, Vec<DisplaySlot>>,
    clear_pending: bool,
    limit: usize,
    /// Bytes held in the current cell's outputs.
    cell_bytes: usize,
    /// The current cell reached the limit and says so; further output is dropped.
    capped: bool,
    /// Why the first output the current cell could not record was invalid.
    invalid: Option<String>,
    pub widgets: Widgets,
}

impl Default for OutputRecorder {
    fn default() -> Self {
        Self::with_limit(DEFAULT_OUTPUT_LIMIT)
    }
}

impl OutputRecorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder that keeps at most `limit` bytes of output per cell.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            display_ids: HashMap::new(),
            clear_pending: false,
            limit,
            cell_bytes: 0,
            capped: false,
            invalid: None,
            widgets: Widgets::default(),
        }
    }

    /// Start recording a new cell (a pending `clear_output(wait=True)` does not carry over).
    pub fn start_cell(&mut self) {
        self.clear_pending = false;
        self.cell_bytes = 0;
        self.capped = false;
        self.invalid = None;
    }

    /// Why the current cell sent an output that nbformat rejects (it was not recorded).
    pub fn take_invalid(&mut self) -> Option<String> {
        self.invalid.take()
    }

    /// Record one iopub message of the cell at index `cell`: comm messages feed the widgets, and
    /// output captured by an `ipywidgets.Output` goes to the widget instead of the cell.
    pub fn record(&mut self, cells: &mut [Value], cell: usize, m: &Message) {
        match m.msg_type.as_str() {
            "comm_open" | "comm_msg" | "comm_close" => self.widgets.handle_comm(m),
            "clear_output" | "stream" | "display_data" | "execute_result" | "error" => {
                let limit = self.limit;
                let Some(widget) = self.widgets.capturing(m.parent_id.as_deref()) else {
                    self.apply(cells, cell, &m.msg_type, &m.content);
                    return;
                };
                if m.msg_type == "clear_output" {
                    widget.clear(wait_flag(&m.content));
                    return;
                }
                match output_from_msg(&m.msg_type, &m.content) {
                    Ok(output) => {
                        // nbclient updates the cells' outputs with this display id even when
                        // the display itself goes to a widget.
                        if let Some(id) = display_id(&m.content) {
                            update_display(&self.display_ids, cells, id, &output);
                        }
                        widget.flush_clear();
                        let size = output_size(&output);
                        if widget.capped {
                            return;
                        }
                        if widget.bytes + size > limit && m.msg_type != "error" {
                            widget.capped = true;
                            if let Some(head) = stream_head(&output, limit - widget.bytes) {
                                widget.push(head, 0);
                            }
                            widget.push(limit_notice(limit), 0);
                            return;
                        }
                        widget.push(output, size);
                    }
                    Err(why) => {
                        self.invalid.get_or_insert(why);
                    }
                }
            }
            _ => {
                self.apply(cells, cell, &m.msg_type, &m.content);
            }
        }
    }

    /// Apply one iopub message (`msg_type`, `content`) to cell `cell` of `cells`.
    /// Returns the execution count when the message carries one (`execute_input`).
    pub fn apply(
        &mut self,
        cells: &mut [Value],
        cell: usize,
        msg_type: &str,
        content: &Value,
    ) -> Option<i64> {
        match msg_type {
            "execute_input" => return content.get("execution_count").and_then(Value::as_i64),
            "clear_output" => {
                if wait_flag(content) {
                    self.clear_pending = true;
                } else {
                    self.clear(cells, cell);
                }
            }
            "stream" | "display_data" | "execute_result" | "error" => {
                let output = match output_from_msg(msg_type, content) {
                    Ok(output) => output,
                    Err(why) => {
                        self.invalid.get_or_insert(why);
                        return None;
                    }
                };
                // As nbclient (and JupyterLab): showing a display id again updates every
                // output already showing it, besides adding this one.
                if let Some(id) = display_id(content) {
                    update_display(&self.display_ids, cells, id, &output);
                }
                self.flush_clear(cells, cell);
                if self.capped {
                    return None;
                }
                let size = output_size(&output);
                // A traceback is kept past the limit: it says why the cell stopped.
                if self.cell_bytes + size > self.limit && msg_type != "error" {
                    self.capped = true;
                    let outputs = outputs_mut(&mut cells[cell]);
                    // The kernel batches prints into large stream messages: keep what fits.
                    if let Some(head) = stream_head(&output, self.limit - self.cell_bytes) {
                        push_stream_or_output(outputs, head);
                    }
                    push_stream_or_output(outputs, limit_notice(self.limit));
                    return None;
                }
                self.cell_bytes += size;
                let outputs = outputs_mut(&mut cells[cell]);
                if msg_type == "stream" {
                    push_stream_or_output(outputs, output);
                } else {
                    outputs.push(output);
                    if let Some(id) = display_id(content) {
                        self.display_ids
                            .entry(id.to_string())
                            .or_default()
                            .push((cell, outputs.len() - 1));
                    }
                }
            }
            "update_display_data" => {
                let id = display_id(content)?;
                let updated = match output_from_msg("display_data", content) {
                    Ok(output) => output,
                    Err(why) => {
                        self.invalid.get_or_insert(why);
                        return None;
                    }
                };
                update_display(&self.display_ids, cells, id, &updated);
            }
            _ => {}
        }
        None
    }

    fn flush_clear(&mut self, cells: &mut [Value], cell: usize) {
        if std::mem::take(&mut self.clear_pending) {
            self.clear(cells, cell);
        }
    }

    fn clear(&mut self, cells: &mut [Value], cell: usize) {
        outputs_mut(&mut cells[cell]).clear();
        self.cell_bytes = 0;
        self.capped = false;
        // Displays that lived in this cell are gone; updates must not resurrect them.
        for slots in self.display_ids.values_mut() {
            slots.retain(|&(c, _)| c != cell);
        }
    }
}

/// Show `output`'s data and metadata in every output recorded under display id `id`.
fn update_display(
    display_ids: &HashMap<String, Vec<DisplaySlot>>,
    cells: &mut [Value],
    id: &str,
    output: &Value,
) {
    for &(c, o) in display_ids.get(id).map_or(&[][..], Vec::as_slice) {
        if let Some(shown) = cells
            .get_mut(c)
            .and_then(|c| c.get_mut("outputs"))
            .and_then(|outputs| outputs.get_mut(o))
        {
            shown["data"] = output["data"].clone();
            shown["metadata"] = output["metadata"].clone();
        }
    }
}

fn wait_flag(content: &Value) -> bool {
    content
        .get("wait")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Append stream text to the last output when it is a stream of the same name, in place (a
/// flood of small prints must not copy the whole text each time); otherwise add the output.
fn push_stream_or_output(outputs: &mut Vec<Value>, output: Value) {
    if let Some(last) = outputs.last_mut()
        && output["output_type"] == "stream"
        && last.get("output_type").and_then(Value::as_str) == Some("stream")
        && last.get("name") == output.get("name")
        && let Some(more) = output["text"].as_str()
    {
        match &mut last["text"] {
            Value::String(text) => text.push_str(more),
            other => *other = Value::String(multiline_text(other) + more),
        }
        return;
    }
    outputs.push(output);
}

/// The stream output that says a cell's output was cut.
fn limit_notice(limit: usize) -> Value {
    let text = format!(
        "\n[gpushare] Output limit reached: this cell's output passed {} MiB, and the rest of it \
         was not recorded (raise the limit with `gpushare run --output-limit MIB`).\n",
        limit as f64 / f64::from(1 << 20)
    );
    serde_json::json!({"output_type": "stream", "name": "stderr", "text": text})
}

/// The first `room` bytes of a stream output's text (cut at a character boundary), if it is a
/// stream and any of it fits.
fn stream_head(output: &Value, room: usize) -> Option<Value> {
    let text = output.get("text").and_then(Value::as_str)?;
    if output["output_type"] != "stream" {
        return None;
    }
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (end > 0).then(|| {
        let mut head = output.clone();
        head["text"] = Value::String(text[..end].to_string());
        head
    })
}

/// Roughly the bytes an output takes in the notebook: a stream's text, or the strings and keys
/// of a display.
fn output_size(value: &Value) -> usize {
    if value.get("output_type").and_then(Value::as_str) == Some("stream") {
        return value
            .get("text")
            .and_then(Value::as_str)
            .map_or(0, str::len);
    }
    json_size(value)
}

fn json_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(json_size).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + json_size(v)).sum(),
        _ => 8,
    }
}

/// Whether nbformat stores `mime` as any JSON value (`^application/(.*\+)?json$`); every other
/// MIME type must be a string or a list of strings.
fn is_json_mime(mime: &str) -> bool {
    mime.strip_prefix("application/")
        .is_some_and(|rest| rest == "json" || rest.ends_with("+json"))
}

fn is_multiline_string(value: &Value) -> bool {
    value.is_string()
        || value
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
}

/// The nbformat output for an iopub output message (`nbformat.v4.output_from_msg`), or why
/// nbformat's schema would reject it.
pub fn output_from_msg(msg_type: &str, content: &Value) -> Result<Value, String> {
    let string = |key: &str| -> Result<Value, String> {
        match content.get(key) {
            Some(v @ Value::String(_)) => Ok(v.clone()),
            None => Ok(Value::String(String::new())),
            Some(other) => Err(format!(
                "the kernel sent a {msg_type} whose `{key}` is {other}, not a string"
            )),
        }
    };
    let mut output = Map::new();
    output.insert("output_type".into(), Value::String(msg_type.into()));
    match msg_type {
        "stream" => {
            let name = match content.get("name") {
                None => Value::String("stdout".into()),
                Some(_) => string("name")?,
            };
            output.insert("name".into(), name);
            output.insert("text".into(), string("text")?);
        }
        "display_data" | "execute_result" => {
            let data = match content.get("data") {
                None => Map::new(),
                Some(Value::Object(data)) => data.clone(),
                Some(other) => {
                    return Err(format!(
                        "the kernel sent a {msg_type} whose `data` is {}, not an object",
                        short(other)
                    ));
                }
            };
            if let Some((mime, value)) = data
                .iter()
                .find(|(mime, value)| !is_json_mime(mime) && !is_multiline_string(value))
            {
                return Err(format!(
                    "the kernel sent a {msg_type} whose `{mime}` is {}: nbformat requires a string \
                     or a list of strings for a MIME type that is not JSON",
                    short(value)
                ));
            }
            let metadata = match content.get("metadata") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(other) => {
                    return Err(format!(
                        "the kernel sent a {msg_type} whose `metadata` is {}, not an object",
                        short(other)
                    ));
                }
            };
            output.insert("data".into(), Value::Object(data));
            output.insert("metadata".into(), Value::Object(metadata));
            if msg_type == "execute_result" {
                let count = content
                    .get("execution_count")
                    .cloned()
                    .unwrap_or(Value::Null);
                if !(count.is_null() || count.is_i64() || count.is_u64()) {
                    return Err(format!(
                        "the kernel sent an execute_result whose `execution_count` is {}",
                        short(&count)
                    ));
                }
                output.insert("execution_count".into(), count);
            }
        }
        "error" => {
            output.insert("ename".into(), string("ename")?);
            output.insert("evalue".into(), string("evalue")?);
            let traceback = content
                .get("traceback")
                .cloned()
                .unwrap_or_else(|| Value::Array(Vec::new()));
            if !traceback
                .as_array()
                .is_some_and(|t| t.iter().all(Value::is_string))
            {
                return Err(format!(
                    "the kernel sent an error whose `traceback` is {}, not a list of strings",
                    short(&traceback)
                ));
            }
            output.insert("traceback".into(), traceback);
        }
        other => return Err(format!("`{other}` is not an output")),
    }
    Ok(Value::Object(output))
}

/// A value for an error message, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

fn outputs_mut(cell: &mut Value) -> &mut Vec<Value> {
    if !cell["outputs"].is_array() {
        cell["outputs"] = Value::Array(Vec::new());
    }
    match cell.get_mut("outputs") {
        Some(Value::Array(outputs)) => outputs,
        _ => unreachable!("just made `outputs` a list"),
    }
}

fn display_id(content: &Value) -> Option<&str> {
    content
        .pointer("/transient/display_id")
        .and_then(Value::as_str)
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
    fn split_lines_matches_python_splitlines_keepends() {
        assert_eq!(split_lines("a\nb"), ["a\n", "b"]);
        assert_eq!(split_lines("a\n"), ["a\n"]);
        assert_eq!(split_lines(""), Vec::<String>::new());
        assert_eq!(split_lines("a\r\nb\rc"), ["a\r\n", "b\r", "c"]);
        assert_eq!(
            split_lines("x\u{2028}y\u{85}z"),
            ["x\u{2028}", "y\u{85}", "z"]
        );
        assert_eq!(split_lines("\n\n"), ["\n", "\n"]);
    }

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

    fn code_cells(n: usize) -> Vec<Value> {
        (0..n)
            .map(|_| json!({"cell_type": "code", "source": "", "outputs": [], "metadata": {}}))
            .collect()
    }

    #[test]
    fn streams_merge_and_clear_wait_applies_at_the_next_output() {
        let mut cells = code_cells(1);
        let mut rec = OutputRecorder::new();
        rec.apply(
            &mut cells,
            0,
            "stream",
            &json!({"name": "stdout", "text": "a"}),
        );
        rec.apply(
            &mut cells,
            0,
            "stream",
            &json!({"name": "stdout", "text": "b\n"}),
        );
        rec.apply(
            &mut cells,
            0,
            "stream",
            &json!({"name": "stderr", "text": "e"}),
        );
        assert_eq!(cells[0]["outputs"].as_array().unwrap().len(), 2);
        assert_eq!(cells[0]["outputs"][0]["text"], "ab\n");
        rec.apply(&mut cells, 0, "clear_output", &json!({"wait": true}));
        assert_eq!(
            cells[0]["outputs"].as_array().unwrap().len(),
            2,
            "wait=True defers the clear"
        );
        rec.apply(
            &mut cells,
            0,
            "stream",
            &json!({"name": "stdout", "text": "c"}),
        );
        assert_eq!(
            cells[0]["outputs"],
            json!([{"output_type": "stream", "name": "stdout", "text": "c"}])
        );
        rec.apply(&mut cells, 0, "clear_output", &json!({"wait": false}));
        assert_eq!(cells[0]["outputs"], json!([]));
    }

    #[test]
    fn update_display_data_rewrites_every_output_with_the_id() {
        let mut cells = code_cells(2);
        let mut rec = OutputRecorder::new();
        let shown =
            json!({"data": {"text/plain": "0%"}, "metadata": {}, "transient": {"display_id": "p"}});
        rec.apply(&mut cells, 0, "display_data", &shown);
        rec.apply(&mut cells, 1, "display_data", &shown);
        rec.apply(&mut cells, 1, "update_display_data",
                  &json!({"data": {"text/plain": "100%"}, "metadata": {"m": 1}, "transient": {"display_id": "p"}}));
        for cell in &cells {
            assert_eq!(cell["outputs"][0]["data"]["text/plain"], "100%");
            assert_eq!(cell["outputs"][0]["metadata"]["m"], 1);
            assert!(
                cell["outputs"][0].get("transient").is_none(),
                "transient is never written"
            );
        }
    }

    #[test]
    fn showing_a_display_id_again_updates_the_earlier_outputs_as_in_nbclient() {
        let mut cells = code_cells(2);
        let mut rec = OutputRecorder::new();
        let shown = |text: &str| json!({"data": {"text/plain": text}, "metadata": {}, "transient": {"display_id": "p"}});
        rec.apply(&mut cells, 0, "display_data", &shown("first"));
        rec.apply(&mut cells, 1, "display_data", &shown("second"));
        assert_eq!(cells[0]["outputs"][0]["data"]["text/plain"], "second");
        assert_eq!(cells[1]["outputs"][0]["data"]["text/plain"], "second");
        assert_eq!(cells[1]["outputs"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn records_results_and_errors_with_their_fields() {
        let mut cells = code_cells(1);
        let mut rec = OutputRecorder::new();
        assert_eq!(
            rec.apply(
                &mut cells,
                0,
                "execute_input",
                &json!({"code": "1", "execution_count": 7})
            ),
            Some(7)
        );
        rec.apply(
            &mut cells,
            0,
            "execute_result",
            &json!({"execution_count": 7, "data": {"text/plain": "2"}, "metadata": {}}),
        );
        rec.apply(
            &mut cells,
            0,
            "error",
            &json!({"ename": "E", "evalue": "v", "traceback": ["t"]}),
        );
        assert_eq!(
            cells[0]["outputs"][0],
            json!({"output_type": "execute_result", "execution_count": 7, "data": {"text/plain": "2"}, "metadata": {}})
        );
        assert_eq!(
            cells[0]["outputs"][1],
            json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]})
        );
    }

    #[test]
    fn default_output_sits_beside_the_input() {
        assert_eq!(
            default_output_path(Path::new("dir/a.ipynb")),
            PathBuf::from("dir/a.executed.ipynb")
        );
    }
}
