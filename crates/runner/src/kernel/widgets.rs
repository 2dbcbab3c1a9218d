//! Jupyter widgets, the way nbclient handles them: every widget's state is recorded from its
//! comm messages into `metadata.widgets`, and `ipywidgets.Output` is mimicked like a front end
//! does it (nbclient's `output_widget.py`): while `with out:` is active, the outputs and
//! `clear_output` of the cell go to the widget, not to the cell.

use std::collections::{BTreeMap, HashMap};

use gpushare_core::render::base64; // the one base64 (what Python's `base64.b64encode` writes)
use serde_json::{Map, Value, json};

use super::client::Message;

/// The comm target of ipywidgets.
const WIDGET_TARGET: &str = "jupyter.widget";
/// Where `metadata.widgets` keeps the state (`@jupyter-widgets/schema`).
pub const WIDGET_STATE_MIME: &str = "application/vnd.jupyter.widget-state+json";

/// A front-end stand-in for one `ipywidgets.Output`.
#[derive(Debug, Default)]
pub struct OutputWidget {
    pub outputs: Vec<Value>,
    clear_pending: bool,
    /// The execute request whose output this widget captures (`with out:` sets it).
    msg_id: Option<String>,
    /// Bytes held in `outputs`, against the same limit as a cell's.
    pub bytes: usize,
    pub capped: bool,
    /// Changed here since the kernel last said what its outputs are.
    changed: bool,
}

impl OutputWidget {
    /// `clear_output` while the widget captures.
    pub fn clear(&mut self, wait: bool) {
        if wait {
            self.clear_pending = true;
        } else {
            self.reset();
        }
    }

    /// Apply a pending `clear_output(wait=True)` before the next output.
    pub fn flush_clear(&mut self) {
        if std::mem::take(&mut self.clear_pending) {
            self.reset();
        }
    }

    fn reset(&mut self) {
        self.outputs.clear();
        self.bytes = 0;
        self.capped = false;
        self.changed = true;
    }

    /// Append an output, merging consecutive stream text of the same name as nbclient does.
    pub fn push(&mut self, output: Value, size: usize) {
        self.bytes += size;
        self.changed = true;
        if let Some(last) = self.outputs.last_mut()
            && output["output_type"] == "stream"
            && last["output_type"] == "stream"
            && last["name"] == output["name"]
            && let (Value::String(text), Some(more)) = (&mut last["text"], output["text"].as_str())
        {
            text.push_str(more);
            return;
        }
        self.outputs.push(output);
    }
}

/// Widget state and output widgets of one run.
#[derive(Debug, Default)]
pub struct Widgets {
    /// comm id → the widget's state, merged from every message that carried some.
    state: BTreeMap<String, Map<String, Value>>,
    /// comm id → binary buffers by path, base64-encoded, in arrival order.
    buffers: HashMap<String, Vec<Value>>,
    output_widgets: HashMap<String, OutputWidget>,
    /// execute request id → output widgets capturing it, innermost last (`with` can nest).
    hooks: HashMap<String, Vec<String>>,
}

impl Widgets {
    /// A `comm_open` / `comm_msg` from the kernel (nbclient's `handle_comm_msg`).
    pub fn handle_comm(&mut self, m: &Message) {
        let Some(comm_id) = m.content.get("comm_id").and_then(Value::as_str) else {
            return;
        };
        let data = m.content.get("data").and_then(Value::as_object);
        let state = data.and_then(|d| d.get("state")).and_then(Value::as_object);
        if let Some(state) = state {
            let entry = self.state.entry(comm_id.to_string()).or_default();
            for (key, value) in state {
                entry.insert(key.clone(), value.clone());
            }
            if state.contains_key("outputs")
                && let Some(widget) = self.output_widgets.get_mut(comm_id)
            {
                // The kernel's word on the outputs is newer than ours.
                widget.changed = false;
            }
            let paths = data
                .and_then(|d| d.get("buffer_paths"))
                .and_then(Value::as_array);
            if let Some(paths) = paths.filter(|p| !p.is_empty()) {
                let stored = self.buffers.entry(comm_id.to_string()).or_default();
                for (path, buffer) in paths.iter().zip(&m.buffers) {
                    let encoded =
                        json!({"data": base64(buffer), "encoding": "base64", "path": path});
                    match stored.iter_mut().find(|b| b["path"] == *path) {
                        Some(old) => *old = encoded,
                        None => stored.push(encoded),
                    }
                }
            }
        }
        match m.msg_type.as_str() {
            "comm_open" => {
                let target = m.content.get("target_name").and_then(Value::as_str);
                let is_output = state.is_some_and(|s| {
                    s.get("_model_module").and_then(Value::as_str)
                        == Some("@jupyter-widgets/output")
                        && s.get("_model_name").and_then(Value::as_str) == Some("OutputModel")
                });
                if target == Some(WIDGET_TARGET) && is_output {
                    let outputs = state
                        .and_then(|s| s.get("outputs"))
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let widget = OutputWidget {
                        outputs,
                        ..OutputWidget::default()
                    };
                    self.output_widgets.insert(comm_id.to_string(), widget);
                }
            }
            "comm_msg" => {
                let Some(msg_id) = state.and_then(|s| s.get("msg_id")) else {
                    return;
                };
                let Some(widget) = self.output_widgets.get_mut(comm_id) else {
                    return;
                };
                match msg_id.as_str().filter(|id| !id.is_empty()) {
                    // `with out:` entered: capture that request's output.
                    Some(id) => {
                        self.hooks
                            .entry(id.to_string())
                            .or_default()
                            .push(comm_id.to_string());
                        widget.msg_id = Some(id.to_string());
                    }
                    // ... and left.
                    None => {
                        if let Some(old) = widget.msg_id.take()
                            && let Some(stack) = self.hooks.get_mut(&old)
                            && let Some(i) = stack.iter().rposition(|c| c == comm_id)
                        {
                            stack.remove(i);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The output widget capturing the output of request `parent`, if any.
    pub fn capturing(&mut self, parent: Option<&str>) -> Option<&mut OutputWidget> {
        let comm_id = self.hooks.get(parent?)?.last()?;
        self.output_widgets.get_mut(comm_id)
    }

    /// `comm_msg` contents that tell the kernel what its output widgets now hold, as a front end
    /// does (so `out.outputs` is right in the kernel). Once per widget that changed.
    pub fn take_updates(&mut self) -> Vec<(String, Map<String, Value>)> {
        let mut updates = Vec::new();
        for (comm_id, widget) in &mut self.output_widgets {
            if std::mem::take(&mut widget.changed) {
                let outputs = Value::Array(widget.outputs.clone());
                if let Some(state) = self.state.get_mut(comm_id) {
                    state.insert("outputs".into(), outputs.clone());
                }
                let data =
                    json!({"method": "update", "state": {"outputs": outputs}, "buffer_paths": []});
                if let Value::Object(data) = data {
                    updates.push((comm_id.clone(), data));
                }
            }
        }
        updates.sort_by(|a, b| a.0.cmp(&b.0));
        updates
    }

    /// `metadata.widgets` as nbclient writes it (`set_widgets_metadata`), or `None` when no
    /// widget was created.
    pub fn metadata(&mut self) -> Option<Value> {
        // Outputs captured since the last update belong in the state too.
        drop(self.take_updates());
        if self.state.is_empty() {
            return None;
        }
        let mut states = Map::new();
        for (comm_id, state) in &self.state {
            if !state.contains_key("_model_name") {
                continue;
            }
            let mut entry = json!({
                "model_name": state.get("_model_name"),
                "model_module": state.get("_model_module"),
                "model_module_version": state.get("_model_module_version"),
                "state": state,
            });
            if let Some(buffers) = self.buffers.get(comm_id).filter(|b| !b.is_empty()) {
                entry["buffers"] = Value::Array(buffers.clone());
            }
            states.insert(comm_id.clone(), entry);
        }
        Some(json!({WIDGET_STATE_MIME: {"state": states, "version_major": 2, "version_minor": 0}}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(msg_type: &str, content: Value) -> Message {
        Message {
            msg_type: msg_type.into(),
            parent_id: Some("req".into()),
            content,
            buffers: vec![b"hi!".to_vec()],
            size: 0,
            date: None,
        }
    }

    #[test]
    fn base64_matches_python() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn an_output_widget_captures_between_enter_and_exit() {
        let mut w = Widgets::default();
        w.handle_comm(&message(
            "comm_open",
            json!({"comm_id": "c", "target_name": "jupyter.widget", "data": {"state": {
                "_model_module": "@jupyter-widgets/output", "_model_name": "OutputModel", "outputs": []},
                "buffer_paths": []}}),
        ));
        assert!(w.capturing(Some("req")).is_none());
        w.handle_comm(&message(
            "comm_msg",
            json!({"comm_id": "c", "data": {"method": "update", "state": {"msg_id": "req"}}}),
        ));
        let widget = w.capturing(Some("req")).expect("captures while entered");
        widget.push(
            json!({"output_type": "stream", "name": "stdout", "text": "a"}),
            1,
        );
        widget.push(
            json!({"output_type": "stream", "name": "stdout", "text": "b"}),
            1,
        );
        assert_eq!(widget.outputs.len(), 1);
        assert!(w.capturing(Some("other")).is_none());
        w.handle_comm(&message(
            "comm_msg",
            json!({"comm_id": "c", "data": {"method": "update", "state": {"msg_id": ""}}}),
        ));
        assert!(w.capturing(Some("req")).is_none());
        let updates = w.take_updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].1["state"]["outputs"][0]["text"], "ab");
        let meta = w.metadata().unwrap();
        let state = &meta[WIDGET_STATE_MIME]["state"]["c"];
        assert_eq!(state["model_name"], "OutputModel");
        assert_eq!(state["state"]["outputs"][0]["text"], "ab");
        assert_eq!(state["state"]["msg_id"], "");
    }

    #[test]
    fn buffers_are_kept_base64_by_path() {
        let mut w = Widgets::default();
        w.handle_comm(&message(
            "comm_open",
            json!({"comm_id": "i", "target_name": "jupyter.widget", "data": {"state": {
                "_model_name": "ImageModel", "value": {}}, "buffer_paths": [["value"]]}}),
        ));
        let meta = w.metadata().unwrap();
        assert_eq!(
            meta[WIDGET_STATE_MIME]["state"]["i"]["buffers"],
            json!([{"data": "aGkh", "encoding": "base64", "path": ["value"]}])
        );
        assert!(Widgets::default().metadata().is_none());
    }
}
