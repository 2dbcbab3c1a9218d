//! Writing notebook JSON the way `nbformat.write` does: multi-line strings split into lines
//! as Python's `str.splitlines(keepends=True)` splits them, keys sorted, one-space indent and a
//! trailing newline, so a notebook round-trips to the bytes Python would produce.

use serde::Serialize;
use serde_json::Value;

use super::notebook::multiline_text;

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
pub(super) fn split_notebook_lines(nb: &mut Value) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
