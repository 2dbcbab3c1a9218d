//! `advise`'s answer and the calibrated model, as text and HTML tables.

use crate::advice::advise::{Advice, AdviceRow};
use crate::advice::model::{CostKey, CostModel};
use crate::advice::producer::Producer;
use crate::render::lab::columns::text_table;
use crate::render::state::{self, State};
use crate::render::{BEST_STYLE, STYLE, cells, escape, units};

/// A row's state: a path the rules say cannot run is not applicable here (nothing was called).
fn state_of(r: &AdviceRow) -> State {
    State::predicted(r.verdict)
}

/// The path table's words where the row's path copies by design.
fn design(r: &AdviceRow) -> Option<&'static str> {
    crate::paths::copied_by_design(r.kind, &r.path)
        .filter(|_| state_of(r) == State::Copied)
}

fn verdict_text(r: &AdviceRow) -> String {
    if design(r).is_some() { "copied (by design)".into() } else { state_of(r).word().into() }
}

/// What a table says under the row, as `compare` says it for the same path (state.rs): the
/// reason, and the ordering where the array lies in device memory; whether the host waits for
/// the producer's queue only where there is a queue.
fn why(a: &Advice, r: &AdviceRow) -> String {
    let mut parts = vec![state::reason_words(design(r), r.reason.as_deref(), None)];
    parts.extend(state::ordering_words(&r.ordering));
    if a.place.starts_with("cuda") && r.waits {
        parts.push("the host waits for the producer's queue".into());
    }
    parts.retain(|p| !p.is_empty());
    parts.join("; ")
}

/// The rows a table shows: every path that applies (the others are one footnote).
fn shown(a: &Advice) -> Vec<&AdviceRow> {
    a.rows.iter().filter(|r| state_of(r) != State::NotApplicable).collect()
}

/// The footnote of the paths that cannot run here, each with its short reason.
fn not_applicable_note(a: &Advice) -> Option<String> {
    let na: Vec<String> = a
        .rows
        .iter()
        .filter(|r| state_of(r) == State::NotApplicable)
        .map(|r| {
            let reason = r.reason.as_deref().unwrap_or("the rules say it cannot run");
            let short = reason.find(" (").filter(|i| *i > 0).map_or(reason, |i| &reason[..i]);
            format!("{} ({short})", r.path)
        })
        .collect();
    (!na.is_empty()).then(|| format!("{} (not run): {}.", crate::render::lab::NOT_APPLICABLE_LEAD, na.join("; ")))
}

fn predicted(r: &AdviceRow) -> String {
    match &r.prediction {
        None => "not calibrated".into(),
        // Its stated error reaches 100 %: no number to hold the path to (the footer says why).
        Some(p) if p.unpredictable.is_some() => crate::advice::model::UNPREDICTABLE_CELL.into(),
        Some(p) => units::time(p.seconds),
    }
}

/// A row's predicted time as the table shows it: a path that waits on the host for a busy
/// producer's queued work of unknown amount costs at least its prediction plus that work.
fn predicted_in(a: &Advice, r: &AdviceRow) -> String {
    match &r.prediction {
        Some(p) if r.waits && a.producer == Producer::Busy && p.waits_for_queue <= 0.0 => {
            format!("≥ {} + queue", units::time(p.seconds))
        }
        _ => predicted(r),
    }
}

fn error(r: &AdviceRow) -> String {
    r.prediction.as_ref().map_or_else(String::new, |p| match p.extrapolated_from {
        // Past the sweep every line is only carried on: the table says from where.
        Some(from) => format!("±{:.0}% (from {})", p.tolerance * 100.0, units::bytes(from)),
        None => format!("±{:.0}%", p.tolerance * 100.0),
    })
}

fn bound(r: &AdviceRow, nbytes: u64) -> String {
    match &r.prediction {
        None => String::new(),
        // The rate this array is predicted to move at (bytes over the predicted time, less any
        // queued work it waits for), as a measured table's bandwidth is: the line's per-byte term
        // alone is a parameter that can read above anything the hardware does.
        Some(p) => match p.bandwidth {
            Some(_) if p.bound == "bandwidth" => format!("bandwidth {}", units::bandwidth(nbytes, p.seconds - p.waits_for_queue)),
            _ => format!("fixed {}", units::time(p.fixed)),
        },
    }
}

fn caption(a: &Advice) -> String {
    let state = match a.producer {
        Producer::Busy if a.queued > 0.0 => format!(", producer busy ({} queued)", units::time(a.queued)),
        Producer::Busy => ", producer busy (amount queued unknown)".to_string(),
        Producer::Unknown => ", producer state unknown (predicted as idle)".to_string(),
        Producer::Idle if a.place.starts_with("cuda") => ", producer idle".to_string(),
        Producer::Idle => String::new(),
    };
    format!(
        "advise: {}, {} at {}{state} (predicted, nothing converted)",
        crate::route::label(&a.source, &a.target),
        units::bytes(a.nbytes),
        a.place
    )
}

fn footer(a: &Advice) -> String {
    let mut lines = vec![match &a.recommended {
        Some(path) => format!("take {path}: {}", a.why),
        None => a.why.clone(),
    }];
    if let Some(unordered) = a.faster_unordered() {
        lines.push(format!(
            "{} is predicted faster ({}) but is not taken: it is ordered by {}",
            unordered.path,
            predicted(unordered),
            unordered.ordering
        ));
    }
    if let Some(copy) = a.faster_copy() {
        lines.push(format!(
            "{} is predicted faster ({}) but copies: a copy is taken only when no path shares",
            copy.path,
            predicted(copy)
        ));
    }
    // Rows whose time the model cannot promise within 2x: why, instead of the number.
    for r in &a.rows {
        if let Some(words) = r.prediction.as_ref().and_then(|p| p.unpredictable.as_ref()) {
            let rests = if a.recommended.as_deref() == Some(r.path.as_str()) { " (the recommendation rests on it)" } else { "" };
            lines.push(format!("{}: {words}{rests}", r.path));
        }
    }
    if a.place.starts_with("cuda") {
        lines.push(format!("assumed: {}", a.producer.describe(a.queued)));
    }
    if a.auto_by_size.len() > 1 {
        // Neighbours that differ only in their close second read as one range of the path.
        let mut joined: Vec<crate::advice::advise::SizeRange> = Vec::new();
        for r in &a.auto_by_size {
            match joined.last_mut() {
                Some(last) if last.path == r.path => last.below = r.below,
                _ => joined.push(r.clone()),
            }
        }
        let ranges: Vec<String> = joined.iter().map(|r| r.words()).collect();
        lines.push(format!("auto by size for this pair: {}", ranges.join(", ")));
        let ties = crate::advice::advise::tie_words(&a.auto_by_size);
        if !ties.is_empty() {
            lines.push(format!(
                "predicted within the model's error of each other, a tie it cannot break (the ranges there may change with the next calibration): {}",
                ties.join("; ")
            ));
        }
    }
    if let (Some(path), Some(code)) = (&a.recommended, &a.code) {
        lines.push(format!("{path} without gpushare: {}  ({})", code.call, code.ordered_by));
    }
    if let Some(note) = &a.model_note {
        lines.push(note.clone());
    }
    lines.extend(not_applicable_note(a));
    lines.join("\n")
}

const HEADER: [&str; 5] = ["path", "verdict", "predicted", "error", "bound by"];

fn cells_of(a: &Advice, r: &AdviceRow) -> [String; 5] {
    let star = if a.recommended.as_deref() == Some(r.path.as_str()) { "★ " } else { "" };
    [format!("{star}{}", r.path), verdict_text(r), predicted_in(a, r), error(r), bound(r, a.nbytes)]
}

/// Plain text within [`crate::render::TEXT_WIDTH`] columns: each row's why on an indented line
/// under it (as `compare`'s), the notes wrapped at word boundaries.
pub fn advice_text(a: &Advice) -> String {
    let width = crate::render::TEXT_WIDTH;
    let header: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
    let rows = shown(a);
    let body: Vec<Vec<String>> = rows.iter().map(|r| cells_of(a, r).to_vec()).collect();
    let table = text_table(&header, &body, &[false, false, true, true, false]);
    let mut lines = crate::render::wrap(&caption(a), width, "", "  ");
    let mut table_lines = table.lines();
    lines.extend(table_lines.next().map(str::to_string));
    for (r, line) in rows.iter().zip(table_lines) {
        lines.push(line.to_string());
        let why = why(a, r);
        if !why.is_empty() {
            lines.extend(crate::render::wrap(&why, width, "    ", "    "));
        }
    }
    for note in footer(a).lines() {
        lines.extend(crate::render::wrap(note, width, "", "  "));
    }
    lines.join("\n")
}

pub fn advice_html(a: &Advice) -> String {
    let mut h = String::from(STYLE);
    h.push_str(&format!(
        "<table class=\"gpushare gpushare-advice\" style=\"{}\"><caption style=\"text-align:left\">{}</caption><thead><tr>",
        cells::TABLE_STYLE,
        escape(&caption(a))
    ));
    for (i, name) in HEADER.iter().enumerate() {
        h.push_str(&if (2..4).contains(&i) { cells::th_num(name) } else { cells::th_text(name) });
    }
    h.push_str("</tr></thead><tbody>");
    for r in shown(a) {
        let best = a.recommended.as_deref() == Some(r.path.as_str());
        let class = if best { format!(" class=\"best\" style=\"{BEST_STYLE}\"") } else { String::new() };
        h.push_str(&format!("<tr{class} data-path=\"{}\">", escape(&r.path)));
        for (i, cell) in cells_of(a, r).iter().enumerate() {
            let cell = escape(cell);
            h.push_str(&if (2..4).contains(&i) {
                cells::td_num(&cell, "")
            } else if i == 1 {
                let s = state_of(r);
                format!("<td class=\"{}\" style=\"{};{}\">{cell}</td>", s.class(), cells::TEXT_STYLE, s.style())
            } else {
                cells::td_text(&cell, "")
            });
        }
        h.push_str("</tr>");
        h.push_str(&cells::detail_row(HEADER.len(), &[("why", why(a, r))]));
    }
    h.push_str("</tbody></table>");
    for line in footer(a).lines() {
        let grey = line.starts_with(crate::render::lab::NOT_APPLICABLE_LEAD);
        let style = if grey { format!(" style=\"color:{}\"", state::GREY) } else { String::new() };
        h.push_str(&format!("<div class=\"gpushare-note\"{style}>{}</div>", escape(line)));
    }
    h
}

const MODEL_HEADER: [&str; 6] = ["pair", "path", "where", "fixed", "bandwidth", "error"];

fn model_rows(m: &CostModel) -> Vec<Vec<String>> {
    m.fits
        .iter()
        .map(|(label, fit)| {
            let key = CostKey::parse(label);
            let (pair, path, place) = match &key {
                Some(k) => (format!("{}→{}", k.source, k.target), format!("{} ({})", k.path, k.kind), k.place.clone()),
                None => (label.clone(), String::new(), String::new()),
            };
            // The rate reached at the largest size measured: the line's own per-byte term is no rate
            // any copy reached (crate::advice::model::Fit::bandwidth).
            let bandwidth = match (fit.largest_throughput(), fit.bandwidth()) {
                (Some((bytes, rate)), _) => format!("{} GB/s at {}", units::sig_figs(rate / 1e9, 3), units::bytes(bytes)),
                (None, Some(bw)) => format!("{} GB/s", units::sig_figs(bw / 1e9, 3)),
                (None, None) => "none (zero-copy)".into(),
            };
            // Two figures: a fit that missed by 0.3 % did not miss by "0%".
            vec![pair, path, place, units::time(fit.fixed), bandwidth, format!("{}%", units::sig_figs(fit.error * 100.0, 2))]
        })
        .collect()
}

fn model_caption(m: &CostModel) -> String {
    format!(
        "cost model of this machine: {} paths fitted, time = fixed + bytes / bandwidth per range of sizes; bandwidth: the rate reached at the largest size measured",
        m.fits.len()
    )
}

pub fn model_text(m: &CostModel) -> String {
    let header: Vec<String> = MODEL_HEADER.iter().map(|h| h.to_string()).collect();
    format!("{}\n{}", model_caption(m), text_table(&header, &model_rows(m), &[false, false, false, true, true, true]))
}

pub fn model_html(m: &CostModel) -> String {
    let mut h = String::from(STYLE);
    h.push_str(&format!(
        "<table class=\"gpushare gpushare-model\" style=\"{}\"><caption style=\"text-align:left\">{}</caption><thead><tr>",
        cells::TABLE_STYLE,
        escape(&model_caption(m))
    ));
    for (i, name) in MODEL_HEADER.iter().enumerate() {
        h.push_str(&if i >= 3 { cells::th_num(name) } else { cells::th_text(name) });
    }
    h.push_str("</tr></thead><tbody>");
    for row in model_rows(m) {
        h.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let cell = escape(cell);
            h.push_str(&if i >= 3 { cells::td_num(&cell, "") } else { cells::td_text(&cell, "") });
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advice::model::{Observation, Prediction};

    #[test]
    fn a_row_that_cannot_be_predicted_within_twice_gives_words_and_an_extrapolated_one_its_origin() {
        let p = Prediction { seconds: 9e-6, fixed: 9e-6, bound: "fixed cost".into(), tolerance: 0.3, ..Default::default() };
        let row = |path: &str, prediction: Prediction| AdviceRow {
            path: path.into(),
            kind: crate::paths::PathKind::Share,
            verdict: crate::report::Verdict::Shared,
            reason: None,
            ordering: "nothing: host memory has no queue to order against".into(),
            ordered: true,
            waits: false,
            prediction: Some(prediction),
            moves_source: false,
        };
        let wild = Prediction { seconds: 5e-6, tolerance: 1.9, unpredictable: Some("not predictable within 2x here: because".into()), ..p.clone() };
        let far = Prediction { extrapolated: true, extrapolated_from: Some(64 << 20), ..p.clone() };
        let a = Advice {
            source: "numba".into(),
            target: "cupy".into(),
            nbytes: 200 << 20,
            place: "cpu".into(),
            rows: vec![row("cai", wild), row("dlpack", far)],
            recommended: None,
            why: String::new(),
            queued: 0.0,
            producer: Producer::Idle,
            model_note: None,
            auto_by_size: Vec::new(),
            code: None,
        }
        .decide(None);
        let text = advice_text(&a);
        assert!(text.contains("not within 2x") && !text.contains("5.0 µs"), "{text}");
        assert!(text.contains("cai: not predictable within 2x here: because"), "{text}");
        assert!(text.contains("±30% (from 64 MiB)"), "{text}");
        // The pick rests on the row that has a number, not on the faster-looking one that has none.
        assert_eq!(a.recommended.as_deref(), Some("dlpack"), "{text}");
    }

    #[test]
    fn the_advice_table_stars_the_recommendation_and_names_a_faster_copy() {
        let p = |s: f64| Prediction { seconds: s, fixed: s, bandwidth: None, rate: None, bound: "fixed cost".into(), tolerance: 0.3, extrapolated: false, waits_for_queue: 0.0, host_slowdown: None, ..Default::default() };
        let row = |path: &str, verdict: &str, s: f64| AdviceRow {
            path: path.into(),
            kind: crate::paths::PathKind::Share,
            verdict: crate::report::Verdict::parse(verdict).expect("a verdict's word"),
            reason: (verdict != "shared").then(|| "copied by design".into()),
            ordering: "nothing: host memory has no queue to order against".into(),
            ordered: true,
            waits: false,
            prediction: Some(p(s)),
            moves_source: false,
        };
        let a = Advice {
            source: "torch".into(),
            target: "jax".into(),
            nbytes: 4096,
            place: "cpu".into(),
            rows: vec![row("dlpack", "shared", 20e-6), row("copy", "copied", 18e-6)],
            recommended: None,
            why: String::new(),
            queued: 0.0,
            producer: Producer::Idle,
            model_note: None,
            auto_by_size: Vec::new(),
            code: None,
        }
        .decide(Some("dlpack"));
        let text = advice_text(&a);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("★ dlpack") && text.contains("copy is predicted faster"), "{text}");
        let html = advice_html(&a);
        assert!(html.contains("class=\"best\"") && html.contains("data-path=\"copy\""), "{html}");
        // Host memory has no queue: its rows say nothing about ordering or waiting for one.
        for out in [&text, &html] {
            assert!(!out.contains("ordered by") && !out.contains("queue"), "{out}");
        }
        assert!(!text.contains("auto by size"), "one path at every size says nothing: {text}");
        // Where the model changes its mind with size, the footer says which path takes which sizes.
        let range = |from: u64, below: Option<u64>, path: &str| crate::advice::advise::SizeRange { from, below, path: path.into(), close: None };
        let sized = Advice { auto_by_size: vec![range(0, Some(24_000_000), "move"), range(24_000_000, None, "p2p")], ..a.clone() };
        let text = advice_text(&sized);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("auto by size for this pair: move below 22.9 MiB, p2p from 22.9 MiB up"), "{text}");
        assert!(!text.contains("tie"), "{text}");
        assert_eq!(range(10_000, Some(1 << 20), "copy").words(), "copy from 9.77 KiB to 1.00 MiB");
        // Notebook 08 on 2x H200: four ranges below 13.9 MiB, move and p2p within the
        // model's error in the first three; the footer says where the ranges are a tie.
        let tie = |from: u64, below: Option<u64>, path: &str, close: &str| crate::advice::advise::SizeRange { close: Some(close.into()), ..range(from, below, path) };
        let noisy = Advice {
            auto_by_size: vec![
                tie(0, Some(734_208), "move", "p2p"),
                tie(734_208, Some(6_050_284), "p2p", "move"),
                tie(6_050_284, Some(14_575_288), "move", "p2p"),
                range(14_575_288, None, "p2p"),
            ],
            ..a
        };
        let text = advice_text(&noisy);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("a tie it cannot break (the ranges there may change with the next calibration): move and p2p below 13.9 MiB"), "{text}");
        // A range split only by its close second reads as one.
        let split = Advice { auto_by_size: vec![tie(0, Some(1 << 20), "move", "p2p"), range(1 << 20, Some(2 << 20), "move"), range(2 << 20, None, "p2p")], ..noisy.clone() };
        let text = advice_text(&split);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("auto by size for this pair: move below 2.00 MiB, p2p from 2.00 MiB up"), "{text}");
        assert!(text.contains("cannot break (the ranges there may change with the next calibration): move and p2p below 1.00 MiB"), "{text}");
        let words = crate::advice::advise::tie_words(&[tie(0, Some(1 << 20), "dlpack", "cai"), range(1 << 20, Some(2 << 20), "copy"), tie(2 << 20, None, "copy", "pinned")]);
        assert_eq!(words, vec!["cai and dlpack below 1.00 MiB", "copy and pinned from 2.00 MiB up"]);
    }

    #[test]
    fn the_model_table_shows_fixed_cost_bandwidth_and_error() {
        let mut m = CostModel::new(serde_json::json!({}), 0.0);
        let key = CostKey { kind: crate::paths::PathKind::Share, path: "copy".into(), source: "torch".into(), target: "jax".into(), place: "cpu".into() };
        let pts = [4096u64, 1 << 20, 16 << 20].map(|n| Observation { bytes: n, seconds: 5e-6 + n as f64 / 10e9 });
        assert!(m.add(&key, pts.to_vec(), Some(false)));
        let text = model_text(&m);
        // 16 MiB in 5 µs + 1.68 ms: 9.97 GB/s, the rate reached at the largest size measured.
        assert!(text.contains("torch→jax") && text.contains("9.97 GB/s at 16 MiB") && text.contains("5.00 µs"), "{text}");
        assert!(model_html(&m).contains("<td"));
    }

    #[test]
    fn the_model_table_never_shows_the_lines_per_byte_term_as_a_rate() {
        // A copy within one GPU whose cost is mostly fixed and grows a little with size (2x H200:
        // its line's per-byte term read 7.7 TB/s while the copy reached 1.9 TB/s at 64 MiB).
        let mut m = CostModel::new(serde_json::json!({}), 0.0);
        let key = CostKey { kind: crate::paths::PathKind::Share, path: "copy".into(), source: "jax".into(), target: "torch".into(), place: "cuda:0".into() };
        let pts = [(4096u64, 10e-6), (1 << 20, 12e-6), (16 << 20, 14e-6), (64 << 20, 35e-6)].map(|(n, t)| Observation { bytes: n, seconds: t });
        assert!(m.add(&key, pts.to_vec(), Some(false)));
        let fit = m.fits.values().next().unwrap();
        let line = fit.bandwidth().unwrap();
        let (bytes, reached) = fit.largest_throughput().unwrap();
        assert_eq!(bytes, 64 << 20);
        assert!((reached - (64u64 << 20) as f64 / 35e-6).abs() < 1e3 && line > 1.5 * reached, "{line} {reached}");
        let text = model_text(&m);
        assert!(text.contains("1917 GB/s at 64 MiB"), "{text}");
        assert!(!text.contains(&format!("{} GB/s", units::sig_figs(line / 1e9, 3))), "{text}");
    }

    #[test]
    fn a_busy_producer_is_stated_and_a_waiting_path_costs_at_least_its_queue() {
        let p = Prediction { seconds: 8e-6, fixed: 8e-6, bandwidth: None, rate: None, bound: "fixed cost".into(), tolerance: 0.3, extrapolated: false, waits_for_queue: 0.0, host_slowdown: None, ..Default::default() };
        let row = |path: &str, waits: bool| AdviceRow {
            path: path.into(),
            kind: crate::paths::PathKind::Share,
            verdict: crate::report::Verdict::Shared,
            reason: None,
            ordering: "x".into(),
            ordered: true,
            waits,
            prediction: Some(Prediction { seconds: if waits { 8e-6 } else { 30e-6 }, ..p.clone() }),
            moves_source: false,
        };
        let a = Advice {
            source: "torch".into(),
            target: "jax".into(),
            nbytes: 4096,
            place: "cuda:0".into(),
            rows: vec![row("dlpack", true), row("cai", false)],
            recommended: None,
            why: String::new(),
            queued: 0.0,
            producer: Producer::Busy,
            model_note: None,
            auto_by_size: Vec::new(),
            code: None,
        }
        .decide(Some("dlpack"));
        let text = advice_text(&a);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("producer busy (amount queued unknown)"), "{text}");
        assert!(text.contains("≥ 8.00 µs + queue") && text.contains("★ cai"), "{text}");
        assert!(text.contains("assumed: producer busy"), "{text}");
        let idle = Advice { producer: Producer::Idle, ..a }.decide(Some("dlpack"));
        let text = advice_text(&idle);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("producer idle") && text.contains("★ dlpack") && !text.contains("+ queue"), "{text}");
    }
}
