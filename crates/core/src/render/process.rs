//! Text and HTML of the handoffs to another process: one handoff or a comparison (one block, or
//! one table row, per path) and a sweep over sizes × paths.

use super::cells::{breakable, detail_row, td_num, td_text, th_num, th_text, TABLE_STYLE};
use super::escape;
use super::units::size_label;
use crate::render::lab::PathRow;
use crate::report::process::{MemoryIdentity, WorkerHandoff};

/// The columns of a process row, in text order.
const COLUMNS: [&str; 9] =
    ["path", "mechanism", "verdict", "bytes moved", "time", "GB/s", "first call", "parent side", "worker side"];

/// The short columns of the HTML row; the long ones go on the detail line under it, so the table
/// fits a notebook.
const HTML_COLUMNS: [&str; 6] = ["path", "verdict", "bytes moved", "time", "GB/s", "first call"];

const NONE: &str = "—";

/// `value` with three significant figures, as `%.3g` writes it (`12.3`, `0.0456`, `1.23e+04`).
pub fn g3(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".into();
    }
    if value == 0.0 {
        return "0".into();
    }
    let scientific = format!("{value:.2e}"); // the exponent after rounding to three figures
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..3).contains(&exponent) {
        let mantissa = trim_zeros(mantissa);
        return format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    let decimals = (2 - exponent).max(0) as usize;
    trim_zeros(&format!("{value:.decimals$}")).to_string()
}

fn trim_zeros(text: &str) -> &str {
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { text }
}

/// A time with its own unit (`12.3 µs`), `—` when there is none.
pub fn time(seconds: Option<f64>) -> String {
    let Some(s) = seconds else { return NONE.into() };
    for (unit, f) in [("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)] {
        // The unit of the value as rounded to three figures: 999.6 µs reads 1 ms, not 1e+03 µs.
        if g3(s / f).parse::<f64>().is_ok_and(|v| v >= 1.0) {
            return format!("{} {unit}", g3(s / f));
        }
    }
    format!("{} ns", g3(s / 1e-9))
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_else(|| "None".into())
}

/// The memory one side's array lies in, in words.
pub fn identity(identity: Option<&MemoryIdentity>) -> String {
    match identity {
        None => "n/a".into(),
        Some(MemoryIdentity::Host(h)) => {
            if h.inode == 0 {
                return "anonymous private memory".into();
            }
            let unlinked = if h.unlinked { " (unlinked)" } else { "" };
            format!("{} + {}{unlinked}", h.file.as_deref().unwrap_or("None"), opt(h.offset))
        }
        Some(MemoryIdentity::Cuda(c)) => {
            let handle = c.opened_handle.as_ref().or(c.handle.as_ref());
            let h = match handle {
                Some(h) => format!("handle {}…", h.chars().take(16).collect::<String>()),
                None => "no IPC handle".into(),
            };
            // A fact the process could not read says so, never a made-up 0x0.
            let hex = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:#x}"));
            format!("{h} + {} (allocation {} B at {}, ctx {})", opt(c.offset), opt(c.size), hex(c.base), hex(c.context))
        }
    }
}

fn gbps(row: &PathRow) -> String {
    row.bandwidth.map(|b| g3(b / 1e9)).unwrap_or_else(|| NONE.into())
}

/// The row's mechanism, `—` for a row with no worker side.
fn mechanism(worker: Option<&WorkerHandoff>) -> String {
    worker.map_or_else(|| NONE.into(), |w| w.mechanism.clone())
}

/// The nine cells of a row, in [`COLUMNS`] order.
fn cells(row: &PathRow) -> [String; 9] {
    let timing = row.timing.as_ref();
    let worker = row.worker.as_ref();
    let time_cell = match timing {
        None => NONE.into(),
        Some(t) => {
            let samples = match t.repeats() {
                0 => String::new(),
                1 => " (1 sample)".into(),
                n => format!(" (median of {n})"),
            };
            format!("{}{samples}", time(Some(t.median)))
        }
    };
    // The tables' one vocabulary (super::state): a path that cannot run here is not a failure.
    let word = super::State::of(row.verdict, row.applicable).word();
    let verdict = match &row.reason {
        Some(r) if !r.is_empty() => format!("{word}: {r}"),
        _ => word.into(),
    };
    [
        // As in every comparison: ★ on the fastest beyond the measured spread, ≈ on rows tied with
        // it, and the path `auto` took named so.
        format!("{}{}", if row.fastest { "★ " } else if row.tied { "≈ " } else { "" }, row.path_text()),
        mechanism(worker),
        verdict,
        size_label(row.bytes_moved),
        time_cell,
        gbps(row),
        timing.and_then(|t| t.first_call).map(|first| time(Some(first))).unwrap_or_else(|| NONE.into()),
        match worker {
            Some(w) => format!("pid {}: {}", w.source.pid, identity(w.source.identity.as_ref())),
            None => NONE.into(),
        },
        match worker.and_then(|w| w.target.as_ref()) {
            Some(t) => format!("pid {}: {}", opt(t.pid), identity(t.identity.as_ref())),
            None => NONE.into(),
        },
    ]
}

/// What a row to a worker says under it in a comparison, after its reason and notes: how the path
/// hands the array over, each side's process and memory, and the link to another host.
pub fn worker_details(worker: &WorkerHandoff) -> Vec<String> {
    let mut details = vec![
        format!("mechanism: {}", worker.mechanism),
        format!("parent side: pid {}: {}", worker.source.pid, identity(worker.source.identity.as_ref())),
    ];
    if let Some(t) = &worker.target {
        details.push(format!("worker side: pid {}: {}", opt(t.pid), identity(t.identity.as_ref())));
    }
    if let Some(link) = &worker.link {
        details.push(format!("link: {}", link_cell(link)));
    }
    details
}

/// A remote handoff's link: the engine, what carried the bytes (a same-host shortcut said so), and
/// both ends, caller first.
fn link_cell(link: &crate::report::process::RemoteLink) -> String {
    let end = |e: &crate::report::process::LinkEnd| {
        [&e.host, &e.interface, &e.address].iter().filter_map(|v| v.as_deref()).collect::<Vec<_>>().join(" ")
    };
    let shortcut = if link.network { "" } else { " (a same-host shortcut, not the network)" };
    format!("{} over {}{shortcut}: {} → {}", link.engine, link.transport, end(&link.local), end(&link.remote))
}

/// What the cost model predicted for a row before it ran (`—` without one), with `⚠` where the
/// measurement lies beyond the model's stated error.
fn predicted_cell(row: &PathRow) -> String {
    match &row.predicted {
        None => NONE.into(),
        // A prediction whose stated error reaches 100 % gives no number, as in every table.
        Some(p) if p.unpredictable.is_some() => crate::advice::model::UNPREDICTABLE_CELL.into(),
        Some(p) => format!("{}{}", time(Some(p.seconds)), if row.misses_prediction { " ⚠" } else { "" }),
    }
}

/// The line that says a row missed its prediction, in the lab's words.
fn missed_prediction(row: &PathRow) -> Option<String> {
    let (Some(p), Some(median)) = (&row.predicted, row.timing.as_ref().map(|t| t.median)) else { return None };
    row.misses_prediction.then(|| {
        format!(
            "⚠ measured {} against {} predicted: {:.0} % off, beyond the model's stated ±{:.0} %",
            time(Some(median)),
            time(Some(p.seconds)),
            (median - p.seconds).abs() / median * 100.0,
            p.tolerance * 100.0
        )
    })
}

/// One block per path: the path and its verdict, then each column and note on a line of its own.
pub fn rows_text(rows: &[PathRow]) -> String {
    let mut out = Vec::new();
    for row in rows {
        let cells = cells(row);
        out.push(format!("{:<12} {}", cells[0], cells[2]));
        for (name, cell) in COLUMNS.iter().zip(&cells).skip(1) {
            if *name != "verdict" {
                out.push(format!("    {name:<12} {cell}"));
            }
            if *name == "time" && row.predicted.is_some() {
                out.push(format!("    {:<12} {}", "predicted", predicted_cell(row)));
            }
        }
        if let Some(link) = row.worker.as_ref().and_then(|w| w.link.as_ref()) {
            out.push(format!("    {:<12} {}", "link", link_cell(link)));
        }
        for note in row.notes.iter().cloned().chain(missed_prediction(row)) {
            out.push(format!("    note         {note}"));
        }
    }
    out.join("\n")
}

/// A table, one row per path: the short columns in the row, the mechanism, the reason, each
/// side's memory and the notes on a detail line under it.
pub fn rows_html(rows: &[PathRow]) -> String {
    // The predicted column stands beside the measured time where the machine is calibrated.
    let mut columns: Vec<&str> = HTML_COLUMNS.to_vec();
    if rows.iter().any(|r| r.predicted.is_some()) {
        columns.insert(4, "predicted");
    }
    let numeric = |c: &str| !matches!(c, "path" | "verdict");
    let head: String = columns.iter().map(|c| if numeric(c) { th_num(c) } else { th_text(c) }).collect();
    let mut body = String::new();
    for row in rows {
        let cells = cells(row);
        let cell = |name: &str| -> String {
            match name {
                "verdict" => super::State::of(row.verdict, row.applicable).word().into(),
                "predicted" => predicted_cell(row),
                _ => cells[COLUMNS.iter().position(|c| *c == name).unwrap_or(0)].clone(),
            }
        };
        body.push_str("<tr>");
        for name in &columns {
            body.push_str(&if numeric(name) {
                td_num(&escape(&cell(name)), "")
            } else if *name == "verdict" {
                let state = super::State::of(row.verdict, row.applicable);
                td_text(&breakable(&cell(name)), state.style())
            } else {
                td_text(&breakable(&cell(name)), "")
            });
        }
        body.push_str("</tr>");
        let mut details: Vec<(&str, String)> = vec![
            ("mechanism", cells[1].clone()),
            ("why", row.reason.clone().unwrap_or_default()),
            ("parent side", cells[7].clone()),
            ("worker side", cells[8].clone()),
        ];
        if let Some(link) = row.worker.as_ref().and_then(|w| w.link.as_ref()) {
            details.push(("link", link_cell(link)));
        }
        details.extend(row.notes.iter().cloned().chain(missed_prediction(row)).map(|n| ("note", n)));
        body.push_str(&detail_row(columns.len(), &details));
    }
    table(&head, &body)
}

fn table(head: &str, body: &str) -> String {
    format!(
        "<table class=\"gpushare gpushare-processes\" style=\"{TABLE_STYLE}\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_figures_as_python_writes_them() {
        assert_eq!(g3(12.345), "12.3");
        assert_eq!(g3(0.0456), "0.0456");
        assert_eq!(g3(1.5), "1.5");
        assert_eq!(g3(64.0), "64");
        assert_eq!(g3(999.6), "1e+03");
        assert_eq!(g3(12345.0), "1.23e+04");
        assert_eq!(g3(0.00001234), "1.23e-05");
        assert_eq!(time(Some(2.5e-5)), "25 µs");
        assert_eq!(time(None), "—");
        // The unit of the value as rounded: never "1e+03 µs".
        assert_eq!(time(Some(999.6e-6)), "1 ms");
        assert_eq!(time(Some(999.4e-6)), "999 µs");
        assert_eq!(time(Some(0.5e-3)), "500 µs");
        assert_eq!(size_label(65536), "64 KiB");
        assert_eq!(size_label(0), "0 B");
    }

    fn row(verdict: &str, timing: Option<crate::stats::Timing>) -> PathRow {
        let host = |address: u64| serde_json::from_value(serde_json::json!({"kind": "host", "file": "/dev/shm/psm_1",
            "unlinked": false, "mapping": "shared", "dev": "00:1b", "inode": 364, "offset": 0, "address": address})).unwrap();
        PathRow::of_worker(crate::report::process::WorkerRun {
            path: "gloo".into(),
            verdict: crate::report::Verdict::parse(verdict).unwrap(),
            reason: Some("copied by design: gloo sends the bytes over TCP into the worker's own tensor".into()),
            applicable: true,
            bytes_moved: 4096,
            timing,
            notes: vec!["a note".into()],
            predicted: None,
            worker: WorkerHandoff {
                mechanism: "gloo send/recv".into(),
                nbytes: 4096,
                bytes_per_handoff: 4096,
                source: crate::report::process::ProcessSource { pid: 7, framework: "torch".into(), identity: Some(host(4096)), context: None },
                target: Some(crate::report::process::ProcessTarget { pid: Some(8), framework: Some("torch".into()), identity: None, context: None }),
                segment: None,
                link: None,
            },
        })
    }

    /// `row` with a prediction, as the pipeline makes it (the miss judged with it).
    fn predicted_row(base: &PathRow, prediction: crate::advice::model::Prediction) -> PathRow {
        let mut r = base.clone();
        r.misses_prediction = prediction.misses(r.timing.as_ref().unwrap().median);
        r.predicted = Some(prediction);
        r
    }

    #[test]
    fn a_row_says_its_verdict_timing_bandwidth_and_each_side() {
        let r = row("copied", Some(crate::share::process::process_timing(0.002, vec![3e-5, 4e-5, 5e-5])));
        let text = rows_text(std::slice::from_ref(&r));
        assert!(text.starts_with("gloo         copied: copied by design: gloo sends"), "{text}");
        for part in ["time         40 µs (median of 3)", "GB/s         0.102", "first call   2 ms",
                     "parent side  pid 7: /dev/shm/psm_1 + 0", "worker side  pid 8: n/a", "note         a note"] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let html = rows_html(std::slice::from_ref(&r));
        assert!(html.contains("gpushare-processes") && html.contains("gpushare-detail") && html.contains("mechanism"));
        // The fastest row, the tied ones and `auto`'s read as in any comparison.
        let best = PathRow { fastest: true, auto: true, ..r.clone() };
        assert!(rows_text(&[best]).starts_with("★ gloo (auto) copied: "), "{}", rows_text(&[PathRow { fastest: true, auto: true, ..r.clone() }]));
        assert!(rows_text(&[PathRow { tied: true, ..r }]).starts_with("≈ gloo       copied: "));
        let failed = row("failed", None);
        assert!(rows_text(&[failed.clone()]).contains("time         —"));
        // A path that cannot run here reads "not applicable" in grey, never "failed" in red.
        let na = PathRow { applicable: false, ..failed };
        let (text, html) = (rows_text(std::slice::from_ref(&na)), rows_html(&[na]));
        assert!(text.starts_with("gloo         not applicable: ") && !text.contains("failed"), "{text}");
        assert!(html.contains("color:#6e7781\">not applicable</td>") && !html.contains("failed"), "{html}");
    }

    #[test]
    fn a_prediction_stands_beside_the_time_and_a_miss_is_flagged() {
        let plain = row("copied", Some(crate::share::process::process_timing(0.002, vec![3e-5, 4e-5, 5e-5])));
        assert!(!rows_text(std::slice::from_ref(&plain)).contains("predicted"));
        assert!(!rows_html(std::slice::from_ref(&plain)).contains("predicted"));
        let predicted = |seconds: f64| crate::advice::model::Prediction {
            seconds, fixed: seconds, bandwidth: None, rate: None, bound: "fixed cost".into(), tolerance: 0.2, extrapolated: false,
            waits_for_queue: 0.0, host_slowdown: None, ..Default::default()
        };
        let near = predicted_row(&plain, predicted(4.4e-5));
        let text = rows_text(std::slice::from_ref(&near));
        assert!(text.contains("    predicted    44 µs\n"), "{text}");
        assert!(!text.contains('⚠'), "{text}");
        let far = predicted_row(&plain, predicted(1e-5));
        let text = rows_text(std::slice::from_ref(&far));
        assert!(text.contains("predicted    10 µs ⚠") && text.contains("measured 40 µs against 10 µs predicted: 75 % off, beyond the model's stated ±20 %"), "{text}");
        // A prediction the model cannot hold to 2x gives words, as in every table, not its number.
        let unsure = predicted_row(&plain, crate::advice::model::Prediction {
            unpredictable: Some("its fit missed sizes it did not see".into()),
            ..predicted(5e-6)
        });
        let text = rows_text(std::slice::from_ref(&unsure));
        assert!(text.contains("    predicted    not within 2x\n") && !text.contains("5 µs"), "{text}");
        let html = rows_html(&[near.clone(), far.clone()]);
        assert!(html.contains(">predicted<") && html.contains("10 µs ⚠") && html.contains("beyond the model"), "{html}");
        let bench = crate::render::lab::BenchmarkReport {
            source_framework: "torch".into(), target_framework: "torch".into(), dtype: "float32".into(),
            device: "cpu".into(), sizes: vec![4096], paths: vec!["gloo".into()], interrupted: false, repeat: 3, warmup: 1,
            points: vec![crate::render::lab::BenchPoint { size: 4096, row: far }],
        }
        .marked();
        // A sweep to a worker reads as any sweep: its time, its first call, its prediction flagged.
        let text = bench.text();
        for part in ["median time per handoff (µs)", "4 KiB", "first call, with the path's one-off set-up (ms)",
                     "predicted before it ran, cost model (µs); ⚠ measured beyond its stated error", "10.0 ⚠",
                     "To the worker process: gloo: gloo send/recv."] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }
}
