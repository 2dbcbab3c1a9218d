//! Text and HTML renderings of reports. Raw seconds and bytes stay in the data; units are chosen here.

pub mod advice;
pub mod cells;
pub mod lab;
pub mod plot;
pub mod process;
pub mod state;
pub mod units;

pub use state::State;

use crate::report::{ShareReport, TensorReport, Verdict};

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The style every gpushare table carries, scoped by class so notebooks' own styles stay intact.
pub const STYLE: &str = "<style>.gpushare{border-collapse:collapse;font-size:12px}\
.gpushare th,.gpushare td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd;font-family:monospace}\
.gpushare .num{text-align:right}.gpushare .shared{color:#1a7f37;font-weight:bold}\
.gpushare .copied{color:#b35900;font-weight:bold}.gpushare .failed{color:#cf222e;font-weight:bold}\
.gpushare .na{color:#6e7781}\
.gpushare .best{background:#dafbe1}.gpushare caption{text-align:left;font-weight:bold}\
.gpushare-note{font-size:11px;color:#555}</style>";

/// An SVG as an `<img>` with a `data:` URI. JupyterLab sanitises the HTML of an untrusted notebook
/// (any notebook opened from disk that this browser did not run): inline `<svg>` elements are
/// dropped and their text runs together, and an `image/svg+xml` output is refused, but an `<img>`
/// keeps its `src` (the sanitiser checks schemes of `href` and `cite` only). An image also cannot
/// run script, whoever opens it.
pub fn svg_img(svg: &str, alt: &str, width: Option<f64>) -> String {
    let width = width.map(|w| format!(" width=\"{w}\"")).unwrap_or_default();
    format!(
        "<img class=\"gpushare-plot\" alt=\"{}\"{width} src=\"data:image/svg+xml;base64,{}\"/>",
        escape(alt),
        base64(svg.as_bytes())
    )
}

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The fastest row's highlight, inline.
pub const BEST_STYLE: &str = "background:#dafbe1";

/// Inline styles repeat what [`STYLE`] says, because JupyterLab drops `<style>` blocks from the outputs
/// of untrusted notebooks (every notebook a runner wrote) but keeps inline colours and alignment.
pub fn verdict_style(v: Verdict) -> &'static str {
    State::of(v, true).style()
}

fn shape_text(shape: &[i64]) -> String {
    let inner: Vec<String> = shape.iter().map(i64::to_string).collect();
    if shape.len() == 1 { format!("({},)", inner[0]) } else { format!("({})", inner.join(", ")) }
}

/// CUDA context of a tensor as the driver reported it, or "n/a".
pub fn context_text(t: &TensorReport) -> String {
    let Some(cuda) = &t.cuda else { return "n/a".into() };
    match cuda.get("context").and_then(serde_json::Value::as_u64) {
        Some(0) => "none (pool/VMM)".into(),
        Some(ctx) => {
            let primary = match cuda.get("context_is_primary").and_then(serde_json::Value::as_bool) {
                Some(true) => " primary",
                Some(false) => " NOT primary",
                None => "",
            };
            format!("{ctx:#x}{primary}")
        }
        None => "n/a".into(),
    }
}

fn verdict_text(r: &ShareReport) -> String {
    // The one vocabulary (state.rs): a copy is an answer, not an error, so it carries no cross.
    let mut text = State::of(r.verdict, true).word().to_string();
    if r.shares_origin == Some(false) && r.verdict == Verdict::Shared {
        text.push_str(" (not origin)");
    }
    if r.unexpected() {
        text.push_str(match r.verdict {
            Verdict::Shared => " UNEXPECTED share",
            Verdict::Copied => " UNEXPECTED copy",
            Verdict::Failed => " UNEXPECTED failure",
        });
    }
    text
}

fn why(r: &ShareReport) -> String {
    let mut parts: Vec<String> = r.reason.iter().cloned().collect();
    if let Some(p) = r.predicted.as_ref().filter(|_| r.unexpected()) {
        parts.push(format!(
            "predicted {}{}",
            p.verdict.as_str(),
            p.reason.as_ref().map(|why| format!(" ({why})")).unwrap_or_default()
        ));
    }
    parts.extend(r.notes.iter().cloned());
    parts.join("; ")
}

/// The ledger's one-line summary (`driver +64 MiB; torch allocated +64 MiB`), or empty.
fn memory_text(r: &ShareReport) -> String {
    r.memory.as_ref().map(|m| m.summary.clone()).unwrap_or_default()
}

/// Consumer stream and the ordering the producer did, or empty on CPU.
fn streams_text(r: &ShareReport) -> String {
    let Some(s) = &r.streams else { return String::new() };
    match s.consumer_stream {
        Some(v) => format!("consumer stream {v}; {}", s.wait),
        None => s.wait.clone(),
    }
}

fn hop(r: &ShareReport) -> String {
    format!("{}→{}", r.source.framework, r.target.framework)
}

fn device_words(t: &TensorReport) -> String {
    let name = t
        .cuda
        .as_ref()
        .and_then(|c| c.get("device_name"))
        .and_then(serde_json::Value::as_str)
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    // The framework's words, then DLPack's (and the driver's device name) where they add something.
    let same = t.device == t.dlpack_device_name || (t.dlpack_device.0 == 1 && t.device.to_lowercase().contains("cpu"));
    if same && name.is_empty() { t.device.clone() } else { format!("{} [{}{}]", t.device, t.dlpack_device_name, name) }
}

/// The time column's heading: a median only where some row has more than one sample.
fn time_heading(rows: &[ShareReport], suffix: &str) -> String {
    if rows.iter().all(|r| r.timing.is_single()) { format!("time ({suffix})") } else { format!("median ({suffix})") }
}

/// A row's minimum, or a dash for one sample (which has no minimum to speak of).
fn min_cell(r: &ShareReport, unit: units::TimeUnit) -> String {
    if r.timing.is_single() { "—".into() } else { units::time_in(r.timing.min, unit) }
}

/// How many samples the figures come from: `1 sample`, or `7 × 1000 calls`.
pub fn samples_text(t: &crate::stats::Timing) -> String {
    match (t.repeats(), t.loops) {
        (1, 1) => "1 sample".into(),
        (n, 1) => format!("{n} samples"),
        (n, loops) => format!("{n} × {loops} calls"),
    }
}

/// The widest a text table may be: a 100-column terminal (and a notebook's text output, which
/// JupyterLab shows in about 100 monospace columns at 1024 px with the file browser open).
pub const TEXT_WIDTH: usize = 100;

/// `text` wrapped at word boundaries into lines of at most `width` characters, the first starting
/// with `first` and the rest with `rest`; a word longer than a line is split, never dropped.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let gap = usize::from(!empty);
            if used + gap + word.len() <= width {
                if !empty {
                    line.push(' ');
                }
                line.extend(word.iter());
                empty = false;
                break;
            }
            if empty {
                // Longer than a whole line: split it where the line ends.
                let room = width.saturating_sub(used).max(1);
                line.extend(word.drain(..room.min(word.len())));
                if word.is_empty() {
                    empty = false;
                    break;
                }
            }
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Plain-text table of handoffs, for terminals and `__repr__`, never wider than [`TEXT_WIDTH`].
///
/// One line per handoff with what identifies it and what it cost; below it, indented, what can be
/// long (devices in the frameworks' words: TensorFlow's alone is 44 characters, pointers,
/// contexts, memory, streams and why), wrapped rather than cut off.
pub fn share_table_text(rows: &[ShareReport]) -> String {
    let unit = units::time_unit_for(&rows.iter().map(|r| r.timing.median).collect::<Vec<_>>());
    let time_header = time_heading(rows, unit.suffix);
    let min_header = format!("min ({})", unit.suffix);
    let header = ["name", "hop", "path", "shape", "dtype", "verdict", time_header.as_str(), min_header.as_str(), "samples"];
    let right = [false, false, false, false, false, false, true, true, false];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.clone().unwrap_or_else(|| "-".into()),
                hop(r),
                r.path.clone(),
                shape_text(&r.source.shape),
                if r.source.dtype == r.target.dtype { r.source.dtype.clone() } else { format!("{}→{}", r.source.dtype, r.target.dtype) },
                verdict_text(r),
                units::time_in(r.timing.median, unit),
                min_cell(r, unit),
                samples_text(&r.timing),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| body.iter().map(|row| row[c].chars().count()).chain([header[c].chars().count()]).max().unwrap_or(0))
        .collect();
    let table_width = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let line = |cells: &[&str]| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(c, s)| if right[c] { format!("{s:>w$}", w = widths[c]) } else { format!("{s:<w$}", w = widths[c]) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let show_ctx = rows.iter().any(|r| r.source.cuda.is_some() || r.target.cuda.is_some());
    let mut out: Vec<String> = Vec::new();
    if table_width <= TEXT_WIDTH {
        out.push(line(&header));
    }
    for (r, cells) in rows.iter().zip(&body) {
        if table_width <= TEXT_WIDTH {
            out.push(line(&cells.iter().map(String::as_str).collect::<Vec<_>>()));
        } else {
            // Too wide even for the short columns (a long name, an unexpected verdict): the row
            // as `heading value` pairs, wrapped.
            let pairs: Vec<String> = header.iter().zip(cells).map(|(h, v)| format!("{h}: {v}")).collect();
            out.extend(wrap(&pairs.join(" · "), TEXT_WIDTH, "", "    "));
        }
        let mut details = vec![
            ("devices", format!("{} → {}", device_words(&r.source), device_words(&r.target))),
            ("pointers", pointers_text(r)),
        ];
        if show_ctx {
            details.push(("contexts", format!("{} → {}", context_text(&r.source), context_text(&r.target))));
        }
        details.push(("memory", memory_text(r)));
        details.push(("streams", streams_text(r)));
        details.push(("why", why(r)));
        for (label, text) in details.into_iter().filter(|(_, t)| !t.is_empty()) {
            out.extend(wrap(&text, TEXT_WIDTH, &format!("  {label:<9} "), &" ".repeat(12)));
        }
    }
    for note in share_notes(rows) {
        out.extend(wrap(&note, TEXT_WIDTH, "", "  "));
    }
    out.join("\n")
}

/// The two addresses; a handoff to a worker names each one's process: they are in two address
/// spaces, and its verdict is judged by the identity of the memory instead.
fn pointers_text(r: &ShareReport) -> String {
    let (source, target) = (units::hex(r.source.data_ptr), units::hex(r.target.data_ptr));
    match &r.worker {
        Some(w) => {
            let pid = w.target.as_ref().and_then(|t| t.pid).map_or_else(|| "?".to_string(), |p| p.to_string());
            format!("{source} in pid {} → {target} in pid {pid}", w.source.pid)
        }
        None => format!("{source} → {target}"),
    }
}

/// What names a handoff in a note: its variable, or its hop and path.
fn row_label(r: &ShareReport) -> String {
    r.name.clone().unwrap_or_else(|| format!("{} by {}", hop(r), r.path))
}

/// The notes under a table of handoffs, each naming the rows it concerns: a noisy median, and a
/// time from one cold call (it pays what the first call pays: imports, allocation, caches, so it
/// can read several times a warm call's).
fn share_notes(rows: &[ShareReport]) -> Vec<String> {
    let mut notes = Vec::new();
    for r in rows {
        if let Some(w) = r.timing.noise_warning() {
            notes.push(format!("⚠ {}: {w}", row_label(r)));
        }
    }
    let single: Vec<String> = rows.iter().filter(|r| r.timing.is_single()).map(row_label).collect();
    if !single.is_empty() {
        notes.push(format!(
            "1 sample ({}): one call, timed once; without a warm-up it also pays one-time costs \
             (imports, allocation, caches); for a median of warm calls pass repeat=7, warmup=1 (-r 7 in the magics).",
            single.join(", ")
        ));
    }
    notes
}

/// A reason's first clause (what happened, before `: ` or `; ` explains it), and whether that
/// left something out: the table's row shows the clause, its detail line the whole.
fn short_why(full: &str) -> (String, bool) {
    match [": ", "; ", ". "].iter().filter_map(|sep| full.find(sep)).min() {
        Some(i) if i > 0 => (full[..i].to_string(), true),
        _ => (full.to_string(), false),
    }
}

/// HTML table of handoffs for notebooks: seven columns at most in the main row (name, hop, path,
/// shape and dtype, verdict, time, the reason's first clause), and what can be long (devices in
/// the frameworks' words, pointers, contexts, samples, minimum, memory, streams, the whole why) on
/// a detail line under it, as the text form does. Alignment and widths are inline (see [`cells`]):
/// the table fits the output of a 1024-pixel window with JupyterLab's file browser open.
pub fn share_table_html(rows: &[ShareReport]) -> String {
    let unit = units::time_unit_for(&rows.iter().map(|r| r.timing.median).collect::<Vec<_>>());
    let show_ctx = rows.iter().any(|r| r.source.cuda.is_some() || r.target.cuda.is_some());
    let show_why = rows.iter().any(|r| r.reason.is_some() || !r.notes.is_empty() || r.unexpected());
    let columns = if show_why { 7 } else { 6 };
    let mut h = String::with_capacity(512 + rows.len() * 900);
    h.push_str(STYLE);
    h.push_str(&format!("<table class=\"gpushare\" style=\"{}\"><thead><tr>", cells::TABLE_STYLE));
    for label in ["name", "hop", "path", "shape and dtype", "verdict"] {
        h.push_str(&cells::th_text(label));
    }
    h.push_str(&cells::th_num(&time_heading(rows, unit.suffix)));
    if show_why {
        h.push_str(&format!("<th style=\"{}\">why</th>", cells::LONG_TEXT_STYLE));
    }
    h.push_str("</tr></thead><tbody>");
    for r in rows {
        let dtype = if r.source.dtype == r.target.dtype {
            escape(&r.source.dtype)
        } else {
            format!("{}→{}", escape(&r.source.dtype), escape(&r.target.dtype))
        };
        h.push_str("<tr>");
        h.push_str(&cells::td_text(&escape(r.name.as_deref().unwrap_or("-")), ""));
        h.push_str(&cells::td_text(&escape(&hop(r)), ""));
        h.push_str(&cells::td_text(&escape(&r.path), ""));
        h.push_str(&cells::td_text(&format!("{} {dtype}", shape_text(&r.source.shape)), ""));
        h.push_str(&format!(
            "<td class=\"{}\" style=\"{};{}\">{}</td>",
            r.verdict.as_str(),
            cells::TEXT_STYLE,
            verdict_style(r.verdict),
            escape(&verdict_text(r)),
        ));
        h.push_str(&cells::td_num(&units::time_in(r.timing.median, unit), ""));
        let full_why = why(r);
        let (first_clause, shortened) = short_why(&full_why);
        if show_why {
            h.push_str(&cells::td_long(&escape(&first_clause)));
        }
        h.push_str("</tr>");
        let mut details = vec![
            ("devices", format!("{} → {}", device_words(&r.source), device_words(&r.target))),
            ("pointers", pointers_text(r)),
        ];
        if show_ctx {
            details.push(("contexts", format!("{} → {}", context_text(&r.source), context_text(&r.target))));
        }
        details.push(("samples", samples_text(&r.timing)));
        if !r.timing.is_single() {
            details.push(("min", format!("{} {}", min_cell(r, unit), unit.suffix)));
        }
        details.push(("memory", memory_text(r)));
        details.push(("streams", streams_text(r)));
        if shortened {
            details.push(("why", full_why));
        }
        h.push_str(&cells::detail_row(columns, &details));
    }
    h.push_str("</tbody></table>");
    for note in share_notes(rows) {
        h.push_str(&format!("<div class=\"gpushare-note\">{}</div>", escape(&note)));
    }
    h
}

fn tensor_fields(t: &TensorReport) -> Vec<(&'static str, String)> {
    vec![
        ("framework", t.framework.clone()),
        ("dtype", t.dtype.clone()),
        ("shape", shape_text(&t.shape)),
        ("strides", format!("{:?} elements", t.strides)),
        ("device", t.device.clone()),
        ("dlpack_device", format!("({}, {}) {}", t.dlpack_device.0, t.dlpack_device.1, t.dlpack_device_name)),
        ("data_ptr", units::hex(t.data_ptr)),
        ("byte_offset", t.byte_offset.to_string()),
        ("nbytes", format!("{} ({})", t.nbytes, units::bytes(t.nbytes))),
        ("contiguous", t.contiguous.to_string()),
        ("alignment", format!("{} B", t.alignment)),
        ("readonly", t.readonly.to_string()),
        (
            "dlpack",
            t.dlpack_version.map_or("legacy capsule".to_string(), |(a, b)| format!("versioned {a}.{b}")),
        ),
        ("cuda", t.cuda.as_ref().map_or("n/a".to_string(), |c| c.to_string())),
    ]
}

/// `TensorInfo` as aligned `key: value` lines.
pub fn tensor_text(t: &TensorReport) -> String {
    let fields = tensor_fields(t);
    let mut out = String::from("TensorInfo");
    for (k, v) in fields {
        out.push_str(&format!("\n  {k:<13} {v}"));
    }
    out
}

/// `TensorInfo` as a two-column HTML table in gpushare's style, inline (an untrusted notebook
/// drops the `<style>` block, and JupyterLab's own rules would right-align the values).
pub fn tensor_html(t: &TensorReport) -> String {
    let mut h = String::from(STYLE);
    h.push_str(&format!(
        "<table class=\"gpushare gpushare-inspect\" style=\"{}\"><caption style=\"text-align:left;font-weight:bold\">TensorInfo</caption><tbody>",
        cells::TABLE_STYLE
    ));
    for (k, v) in tensor_fields(t) {
        h.push_str(&format!(
            "<tr><th style=\"{}\">{k}</th><td style=\"{}\">{}</td></tr>",
            cells::TEXT_STYLE,
            cells::LONG_TEXT_STYLE.replace("max-width:26em", "max-width:40em"),
            cells::breakable(&v)
        ));
    }
    h.push_str("</tbody></table>");
    h
}

#[cfg(test)]
mod tests;
