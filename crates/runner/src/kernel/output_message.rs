//! Turning an iopub output message into an nbformat output (`nbformat.v4.output_from_msg`),
//! checked against what nbformat's schema accepts, so a notebook we write is always valid.

use serde_json::{Map, Value};

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
