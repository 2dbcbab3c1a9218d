//! Comparison: every path for one array (`gpushare.compare`, `%share x ->jax --path all`).

use serde::Serialize;

use super::columns::{byte_unit_for, bytes_in, dash, gbps, text_table, time_unit};
use super::rows::{PathRow, PathRun, mark_fastest};
use crate::render::{BEST_STYLE, STYLE, cells, escape, units};
use crate::report::{TensorReport, Verdict, envelope};
use crate::stats::Timing;

/// What the lab measured for `compare`.
#[derive(Debug, Clone)]
pub struct ComparisonInput {
    pub source: TensorReport,
    pub target_framework: String,
    pub runs: Vec<PathRun>,
    pub repeat: u64,
    pub warmup: u64,
}

/// A comparison of transfer paths for one array (payload of `gpushare.comparison/1`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ComparisonReport {
    pub source: TensorReport,
    pub target_framework: String,
    pub rows: Vec<PathRow>,
    /// The fastest path that worked, if any did.
    pub fastest: Option<String>,
    /// The path `auto` picks for this pair.
    pub auto_path: Option<String>,
    pub repeat: u64,
    pub warmup: u64,
}

impl ComparisonReport {
    pub fn from_input(input: ComparisonInput) -> ComparisonReport {
        let rows: Vec<PathRow> = input.runs.into_iter().map(PathRow::from_run).collect();
        ComparisonReport::of_rows(input.source, input.target_framework, rows, input.repeat, input.warmup)
    }

    /// Every path tried on one array, as rows (a handoff to a worker comes as its row from the
    /// core's process loop): the fastest row (or the rows tied within their spread) marked, and
    /// the row `auto` took named, as in any comparison.
    pub fn of_rows(source: TensorReport, target_framework: String, mut rows: Vec<PathRow>, repeat: u64, warmup: u64) -> ComparisonReport {
        let best = {
            let mut refs: Vec<&mut PathRow> = rows.iter_mut().collect();
            mark_fastest(&mut refs)
        };
        let fastest = best.map(|i| rows[i].path.clone());
        let auto_path = rows.iter().find(|r| r.auto).map(|r| r.path.clone());
        ComparisonReport { source, target_framework, rows, fastest, auto_path, repeat, warmup }
    }

    /// Whether the paths handed the array to a worker process (each row's `worker` set).
    pub fn to_worker(&self) -> bool {
        self.rows.iter().any(|r| r.worker.is_some())
    }

    pub fn to_json(&self) -> serde_json::Value {
        envelope("comparison", serde_json::to_value(self).unwrap_or_default())
    }

    fn caption(&self) -> String {
        let s = &self.source;
        let shape: Vec<String> = s.shape.iter().map(i64::to_string).collect();
        let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
        format!(
            "{} · {} {} on {} · {}",
            crate::route::label(&s.framework, &self.target_framework),
            s.dtype,
            shape,
            s.dlpack_device_name,
            // The array's bytes, not the span of a strided one's extent.
            units::bytes(s.payload_bytes())
        )
    }

    /// Every timed row is one call timed once (`-n1 -r1`): no median, minimum or spread to show.
    fn all_single(&self) -> bool {
        let timed: Vec<&Timing> = self.rows.iter().filter(|r| r.worked()).filter_map(|r| r.timing.as_ref()).collect();
        !timed.is_empty() && timed.iter().all(|t| t.is_single())
    }

    /// The notes under the table, one per line: how it was timed, then every surprise where it is.
    fn footer(&self) -> Vec<String> {
        let loops: Vec<u64> = self.rows.iter().filter_map(|r| r.timing.as_ref().map(|t| t.loops)).collect();
        let loops_text = match (loops.iter().min(), loops.iter().max()) {
            (Some(a), Some(b)) if a == b => format!("{a} loop{} each", if *a == 1 { "" } else { "s" }),
            (Some(a), Some(b)) => format!("{a}–{b} loops each"),
            _ => "no timings".into(),
        };
        let warmups = format!("{} warm-up run{}", self.warmup, if self.warmup == 1 { "" } else { "s" });
        let mut parts = vec![if self.all_single() {
            format!(
                "Times are per handoff: 1 sample each (one call, timed once), after {warmups}; GB/s = bytes moved / time."
            )
        } else {
            format!(
                "Times are per handoff: median and minimum of {} repeat{} × {loops_text}, after {warmups}, all in the median's unit; GB/s = bytes moved / median.",
                self.repeat,
                if self.repeat == 1 { "" } else { "s" },
            )
        }];
        if self.to_worker() {
            parts.push(
                "To a worker process: each path's first handoff is timed apart (first call, with the path's one-off set-up); \
                 the times are of the handoffs after it."
                    .into(),
            );
        }
        let single: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.worked() && r.timing.as_ref().is_some_and(Timing::is_single))
            .map(|r| r.path.as_str())
            .collect();
        if !single.is_empty() && !self.all_single() {
            parts.push(format!("1 sample (one call, timed once): {}.", single.join(", ")));
        }
        if let Some(f) = self.fastest.as_deref().and_then(|f| self.rows.iter().find(|r| r.path == f)) {
            parts.push(format!("★ fastest: {}, beyond the measured spread.", f.path));
            // auto's rule across processes differs (it leaves a private tensor where it is): the
            // note speaks of `auto` within a process only.
            if f.verdict == Verdict::Copied && !self.to_worker() && self.rows.iter().any(|r| r.verdict == Verdict::Shared) {
                parts.push(super::rows::starred_copy_note(&f.path, &units::bytes(self.source.payload_bytes())));
            }
        }
        let tied: Vec<&str> = self.rows.iter().filter(|r| r.tied).map(|r| r.path.as_str()).collect();
        if !tied.is_empty() && self.all_single() {
            parts.push("No ★: one sample per path has no spread to rank by.".into());
        } else if !tied.is_empty() {
            parts.push(format!("No ★: {} are within each other's spread (a tie).", tied.join(" ≈ ")));
        }
        let noisy: Vec<&str> = self.rows.iter().filter(|r| r.warning.is_some()).map(|r| r.path.as_str()).collect();
        if !noisy.is_empty() {
            parts.push(format!("⚠ noisy (IQR > 25% of the median) on the row of {}: raise -n/-r or quiet the machine.", noisy.join(", ")));
        }
        let na: Vec<&PathRow> = self.rows.iter().filter(|r| !r.applicable).collect();
        if !na.is_empty() {
            parts.push(super::rows::not_applicable_note(&na));
        }
        if let Some(a) = &self.auto_path {
            parts.push(match self.why_not_fastest(a) {
                Some(why) => format!("auto picks {a}: {why}."),
                None => format!("auto picks {a}."),
            });
        }
        parts
    }

    /// Why `auto` did not take the ★ row, where the two differ for a reason of correctness: the
    /// faster row copies where `auto`'s shares, or nothing the consumer honours orders its handoff
    /// (cai into JAX, a capsule into a consumer on its own stream). `None` where they agree, or
    /// where `auto` simply was not measured fastest.
    fn why_not_fastest(&self, auto: &str) -> Option<String> {
        let fastest = self.fastest.as_deref().filter(|f| *f != auto)?;
        let (f, a) = (self.rows.iter().find(|r| r.path == fastest)?, self.rows.iter().find(|r| r.path == auto)?);
        if f.verdict == Verdict::Copied && a.verdict == Verdict::Shared {
            Some(format!("{fastest} was faster but copies, and a copy is taken only when no path shares"))
        } else if f.ordering.as_deref() == Some(crate::advice::model::Ordering::Unordered.describe()) {
            Some(format!(
                "{fastest} was faster but nothing the consumer honours orders its handoff, so it could read values the producer has not finished"
            ))
        } else {
            None
        }
    }

    /// The rows a table shows: every path that applies here (the others are one footnote).
    fn shown(&self) -> Vec<&PathRow> {
        self.rows.iter().filter(|r| r.applicable).collect()
    }

    /// Columns shared by the text and HTML forms: (header, right-aligned, cells per shown row).
    /// The time columns share the median's unit, said once in its heading.
    fn columns(&self) -> Vec<(String, bool, Vec<String>)> {
        let shown = self.shown();
        let refs: Vec<&PathRow> = shown.clone();
        let tu = time_unit(&refs);
        let bu = byte_unit_for(&shown.iter().map(|r| r.bytes_moved).collect::<Vec<_>>());
        let time = |f: &dyn Fn(&Timing) -> f64| -> Vec<String> {
            shown
                .iter()
                .map(|r| r.timing.as_ref().filter(|_| r.worked()).map_or_else(dash, |t| units::time_in(f(t), tu)))
                .collect()
        };
        let spread_stat = |f: &dyn Fn(&Timing) -> f64| -> Vec<String> {
            shown
                .iter()
                .map(|r| match r.timing.as_ref().filter(|_| r.worked()) {
                    Some(t) if t.is_single() => "—".into(),
                    Some(t) => units::time_in(f(t), tu),
                    None => dash(),
                })
                .collect()
        };
        let mut cols = vec![
            ("path".to_string(), false, shown.iter().map(|r| r.path_text()).collect()),
            ("verdict".to_string(), false, shown.iter().map(|r| r.verdict_text()).collect()),
            (
                format!("moved ({})", bu.suffix),
                true,
                shown.iter().map(|r| if r.worked() { bytes_in(r.bytes_moved, bu) } else { dash() }).collect(),
            ),
            // One sample is a time, not a median; it has no minimum or spread (as in share()'s table).
            (
                format!("{} ({})", if self.all_single() { "time" } else { "median" }, tu.suffix),
                true,
                time(&|t| t.median),
            ),
            ("min".to_string(), true, spread_stat(&|t| t.min)),
            ("IQR".to_string(), true, spread_stat(&|t| t.iqr)),
            (
                "GB/s".to_string(),
                true,
                shown.iter().map(|r| r.bandwidth.map_or_else(dash, gbps)).collect(),
            ),
        ];
        if shown.iter().any(|r| r.predicted.is_some()) {
            // Beside the measured median: what the cost model said before the path ran.
            // One cell per shown row, as every column: a path that does not apply is not a row.
            let predicted = shown
                .iter()
                .map(|r| match &r.predicted {
                    // A prediction whose stated error reaches 100 % gives no number to hold the row to.
                    Some(p) if p.unpredictable.is_some() => crate::advice::model::UNPREDICTABLE_CELL.to_string(),
                    Some(p) => format!("{}{}", units::time_in(p.seconds, tu), if r.misses_prediction { " ⚠" } else { "" }),
                    None => dash(),
                })
                .collect();
            cols.insert(4, ("predicted".to_string(), true, predicted));
        }
        if shown.iter().any(|r| r.first_call().is_some()) {
            // A handoff to a worker times its first call apart: it pays the path's one-off set-up.
            cols.push((
                "first call".to_string(),
                true,
                shown.iter().map(|r| r.first_call().map_or_else(dash, |s| units::time_in(s, tu))).collect(),
            ));
        }
        if shown.iter().any(|r| r.device_timing.is_some()) {
            cols.push((
                "device".to_string(),
                true,
                shown
                    .iter()
                    .map(|r| r.device_timing.as_ref().map_or_else(dash, |t| units::time_in(t.median, tu)))
                    .collect(),
            ));
        }
        if shown.iter().any(|r| !r.why().is_empty()) {
            cols.push(("why".to_string(), false, shown.iter().map(|r| r.why()).collect()));
        }
        cols
    }

    /// Plain text within [`crate::render::TEXT_WIDTH`] columns: the short columns in the row, the
    /// why on an indented line under it, wrapped at word boundaries; the notes wrapped below.
    pub fn text(&self) -> String {
        let width = crate::render::TEXT_WIDTH;
        let shown = self.shown();
        let mut cols: Vec<(String, bool, Vec<String>)> = self.columns().into_iter().filter(|c| c.0 != "why").collect();
        // Columns a row can say on its sub-line instead, dropped from the table (last first) while
        // it is wider than the terminal: the device time, then the prediction.
        let mut folded: Vec<(String, Vec<String>)> = Vec::new();
        let table = loop {
            let mut header = vec![String::new()];
            header.extend(cols.iter().map(|c| c.0.clone()));
            let mut right = vec![false];
            right.extend(cols.iter().map(|c| c.1));
            let body: Vec<Vec<String>> = (0..shown.len())
                .map(|i| {
                    let mark = if shown[i].fastest { "★" } else if shown[i].tied { "≈" } else { "" };
                    let mut row = vec![mark.to_string()];
                    row.extend(cols.iter().map(|c| c.2[i].clone()));
                    row
                })
                .collect();
            let table = text_table(&header, &body, &right);
            let wide = table.lines().any(|l| l.chars().count() > width);
            match cols.iter().rposition(|c| c.0 == "device" || c.0 == "predicted" || c.0 == "first call") {
                Some(at) if wide => {
                    let (name, _, values) = cols.remove(at);
                    folded.insert(0, (name, values));
                }
                _ => break table,
            }
        };
        let unit = self.columns().iter().find(|c| c.0.starts_with("median") || c.0.starts_with("time")).and_then(|c| {
            c.0.split_once('(').map(|(_, u)| u.trim_end_matches(')').to_string())
        });
        let mut lines = crate::render::wrap(&self.caption(), width, "", "  ");
        let mut table_lines = table.lines();
        lines.extend(table_lines.next().map(str::to_string));
        for (i, (r, line)) in shown.iter().zip(table_lines).enumerate() {
            lines.push(line.to_string());
            let mut parts: Vec<String> = folded
                .iter()
                .filter(|(_, values)| values[i] != "-")
                .map(|(name, values)| format!("{name} {}", with_unit(&values[i], unit.as_deref().unwrap_or(""))))
                .collect();
            parts.push(r.why());
            let why = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("; ");
            if !why.is_empty() {
                lines.extend(crate::render::wrap(&why, width, "     ", "     "));
            }
        }
        for note in self.footer() {
            lines.extend(crate::render::wrap(&note, width, "", "  "));
        }
        lines.join("\n")
    }

    /// The HTML table: the short columns in the row (eight at most), the why on a detail line
    /// under it (as `%share`'s table does), alignment and widths inline (see [`cells`]); the paths
    /// that do not apply here in one grey footnote, not as rows.
    pub fn html(&self) -> String {
        let shown = self.shown();
        let cols: Vec<(String, bool, Vec<String>)> = self.columns().into_iter().filter(|c| c.0 != "why").collect();
        let mut h = String::with_capacity(2048 + self.rows.len() * 512);
        h.push_str(STYLE);
        h.push_str(&format!("<table class=\"gpushare gpushare-comparison\" style=\"{}\"><caption style=\"text-align:left\">", cells::TABLE_STYLE));
        h.push_str(&escape(&self.caption()));
        h.push_str("</caption><thead><tr>");
        for (name, right, _) in &cols {
            h.push_str(&if *right { cells::th_num(name) } else { cells::th_text(name) });
        }
        h.push_str("</tr></thead><tbody>");
        for (i, r) in shown.iter().enumerate() {
            let class = if r.fastest { format!(" class=\"best\" style=\"{BEST_STYLE}\"") } else { String::new() };
            h.push_str(&format!("<tr{class} data-path=\"{}\">", escape(&r.path)));
            for (c, (name, right, values)) in cols.iter().enumerate() {
                let mut cell = escape(&values[i]);
                if c == 0 && r.fastest {
                    cell = format!("<b>★ {cell}</b>");
                } else if c == 0 && r.tied {
                    // As the text marks it: tied with the fastest within the measured spread.
                    cell = format!("≈ {cell}");
                }
                h.push_str(&if name == "verdict" {
                    let state = r.state();
                    format!("<td class=\"{}\" style=\"{};{}\">{cell}</td>", state.class(), cells::TEXT_STYLE, state.style())
                } else if *right {
                    cells::td_num(&cell, "")
                } else {
                    cells::td_text(&cell, "")
                });
            }
            h.push_str("</tr>");
            h.push_str(&cells::detail_row(cols.len(), &[("why", r.why())]));
        }
        h.push_str("</tbody></table>");
        for note in self.footer() {
            let style = if note.starts_with(super::rows::NOT_APPLICABLE_LEAD) { format!(" style=\"color:{}\"", crate::render::state::GREY) } else { String::new() };
            h.push_str(&format!("<div class=\"gpushare-note\"{style}>{}</div>", escape(&note)));
        }
        h
    }
}

/// A folded cell with its column's unit: after the number and before a ⚠ (`20.0 µs ⚠`); a cell of
/// words (`not within 2x`) takes none.
pub(super) fn with_unit(cell: &str, unit: &str) -> String {
    let (number, flag) = match cell.strip_suffix(" ⚠") {
        Some(number) => (number, " ⚠"),
        None => (cell, ""),
    };
    if unit.is_empty() || number.parse::<f64>().is_err() {
        return cell.to_string();
    }
    format!("{number} {unit}{flag}")
}
