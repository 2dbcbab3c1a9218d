//! Recording a kernel's iopub output into a notebook's cells as nbclient does, within a
//! per-cell output limit.

use std::collections::HashMap;

use serde_json::Value;

use super::client::Message;
use super::notebook::multiline_text;
use super::output_message::output_from_msg;
use super::widgets::Widgets;

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
        "\n[gpushare] Output limit reached: this cell's output passed {}, and the rest of it \
         was not recorded (raise the limit with `gpushare run --output-limit MIB`).\n",
        crate::render::units::size_label(limit as u64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
