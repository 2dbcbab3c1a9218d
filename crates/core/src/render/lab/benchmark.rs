//! Benchmark: a sweep over sizes × paths (`gpushare.bench`, `%sharebench`).

use serde::Serialize;

use super::columns::{dash, gbps, size_label, text_table};
use super::rows::{PathRow, PathRun, mark_fastest};
use crate::render::{BEST_STYLE, STYLE, cells, escape, units};
use crate::report::Verdict;
use crate::report::envelope;

/// One measured point of a sweep: the run's fields and its `size`, side by side in one object.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// Payload bytes of the source array.
    pub size: u64,
    pub run: PathRun,
}

/// What the lab measured for `bench`.
#[derive(Debug, Clone)]
pub struct BenchInput {
    pub source_framework: String,
    pub target_framework: String,
    pub dtype: String,
    pub device: String,
    pub sizes: Vec<u64>,
    pub paths: Vec<String>,
    pub points: Vec<BenchRun>,
    pub interrupted: bool,
    pub repeat: u64,
    pub warmup: u64,
}

/// One point of a sweep as reported.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BenchPoint {
    pub size: u64,
    #[serde(flatten)]
    pub row: PathRow,
}

/// A sweep over sizes × paths (payload of `gpushare.benchmark/1`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BenchmarkReport {
    pub source_framework: String,
    pub target_framework: String,
    pub dtype: String,
    pub device: String,
    pub sizes: Vec<u64>,
    pub paths: Vec<String>,
    pub points: Vec<BenchPoint>,
    /// Ctrl-C stopped the sweep: the points are what was measured before.
    pub interrupted: bool,
    pub repeat: u64,
    pub warmup: u64,
}

impl BenchmarkReport {
    pub fn from_input(input: BenchInput) -> BenchmarkReport {
        let points: Vec<BenchPoint> =
            input.points.into_iter().map(|p| BenchPoint { size: p.size, row: PathRow::from_run(p.run) }).collect();
        BenchmarkReport {
            source_framework: input.source_framework,
            target_framework: input.target_framework,
            dtype: input.dtype,
            device: input.device,
            sizes: input.sizes,
            paths: input.paths,
            points,
            interrupted: input.interrupted,
            repeat: input.repeat,
            warmup: input.warmup,
        }
        .marked()
    }

    /// The sweep with the fastest path at each size (or the tied ones) marked: every sweep, within
    /// this process or to a worker (whose points come as rows from the core's process loop).
    pub fn marked(mut self) -> BenchmarkReport {
        for &size in &self.sizes {
            let mut at_size: Vec<&mut PathRow> = self.points.iter_mut().filter(|p| p.size == size).map(|p| &mut p.row).collect();
            mark_fastest(&mut at_size);
        }
        self
    }

    pub fn to_json(&self) -> serde_json::Value {
        envelope("benchmark", serde_json::to_value(self).unwrap_or_default())
    }

    pub fn point(&self, size: u64, path: &str) -> Option<&PathRow> {
        self.points.iter().find(|p| p.size == size && p.row.path == path).map(|p| &p.row)
    }

    /// Sizes that have at least one point (an interrupted sweep may stop early).
    pub fn measured_sizes(&self) -> Vec<u64> {
        self.sizes.iter().copied().filter(|s| self.points.iter().any(|p| p.size == *s)).collect()
    }

    /// Paths that worked at one size at least, in the order asked for.
    pub fn working_paths(&self) -> Vec<&str> {
        self.paths
            .iter()
            .map(String::as_str)
            .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.worked()))
            .collect()
    }

    /// One verdict word per path over the sweep, in the one vocabulary (short form: the
    /// footnote says the rest): "shared", "copied", "shared / copied", "n/a", "failed".
    pub fn path_verdict(&self, path: &str) -> String {
        let mut seen: Vec<&'static str> = Vec::new();
        for p in self.points.iter().filter(|p| p.row.path == path) {
            let word = p.row.state().short();
            if !seen.contains(&word) {
                seen.push(word);
            }
        }
        if seen.is_empty() { "-".into() } else { seen.join(" / ") }
    }

    /// The state a path's verdict cell is coloured by: its single state, or copied where it
    /// shared at some sizes and copied at others, failed where any call failed.
    fn path_state(&self, path: &str) -> crate::render::State {
        use crate::render::State;
        let states: Vec<State> = self.points.iter().filter(|p| p.row.path == path).map(|p| p.row.state()).collect();
        if states.contains(&State::Failed) {
            State::Failed
        } else if states.contains(&State::Copied) {
            State::Copied
        } else if states.contains(&State::Shared) {
            State::Shared
        } else {
            State::NotApplicable
        }
    }

    /// Paths that applied at one size at least: the others are one footnote, not columns.
    fn applicable_paths(&self) -> Vec<&str> {
        self.paths
            .iter()
            .map(String::as_str)
            .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.applicable))
            .collect()
    }

    /// Why a path failed (its first reason in the sweep); the paths that do not apply are in the
    /// footnote instead.
    fn path_reason(&self, path: &str) -> Option<String> {
        self.points
            .iter()
            .filter(|p| p.row.path == path && p.row.applicable && !p.row.worked())
            .find_map(|p| p.row.reason.clone())
    }

    pub fn caption(&self) -> String {
        // "1 size × 1 path", not "1 sizes".
        let count = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
        format!(
            "{} · {} on {} · {} × {}",
            crate::route::label(&self.source_framework, &self.target_framework),
            self.dtype,
            self.device,
            count(self.sizes.len(), "size"),
            count(self.paths.len(), "path")
        )
    }

    /// Every timed point is one call timed once (`-n1 -r1`): the tables show times, not medians.
    pub fn all_single(&self) -> bool {
        let timed: Vec<&crate::stats::Timing> =
            self.points.iter().filter(|p| p.row.worked()).filter_map(|p| p.row.timing.as_ref()).collect();
        !timed.is_empty() && timed.iter().all(|t| t.is_single())
    }

    /// The time table's title: a median only where there is more than one sample.
    fn time_title(&self) -> &'static str {
        if self.all_single() { "time per handoff (1 sample)" } else { "median time per handoff" }
    }

    /// The notes under the tables, one per line: how it was timed, then every surprise.
    fn footer(&self) -> Vec<String> {
        let warmups = format!("{} warm-up run{}", self.warmup, if self.warmup == 1 { "" } else { "s" });
        let mut parts = vec![if self.all_single() {
            format!(
                "Time per handoff: 1 sample (one call, timed once) after {warmups}; \
                 no ★: one sample has no spread to rank by; bandwidth = bytes copied / time (zero-copy paths move nothing)."
            )
        } else {
            format!(
                "Median time per handoff of {} repeat{} after {warmups}; ★ fastest at each size beyond the measured spread; \
                 bandwidth = bytes copied / median (zero-copy paths move nothing).",
                self.repeat,
                if self.repeat == 1 { "" } else { "s" },
            )
        }];
        if self.interrupted {
            let measured = self.measured_sizes();
            let partial: Vec<String> = measured
                .iter()
                .filter(|s| self.paths.iter().any(|p| self.point(**s, p).is_none()))
                .map(|s| size_label(*s))
                .collect();
            parts.push(if partial.is_empty() {
                "Interrupted: partial results (the sizes not shown were not measured).".into()
            } else {
                format!(
                    "Interrupted: partial results; at {} not every path was measured (a dash), so no ★ goes to a path measured alone.",
                    partial.join(", ")
                )
            });
        }
        for &size in &self.measured_sizes() {
            // Only where a path shared at that size, so that a copy was starred over a share, and
            // within a process (`auto`'s rule across processes differs: it leaves a private tensor
            // where it is).
            let a_share = self.points.iter().any(|p| p.size == size && p.row.verdict == Verdict::Shared && p.row.worker.is_none());
            if let Some(p) = self.points.iter().find(|p| a_share && p.size == size && p.row.fastest && p.row.verdict == Verdict::Copied) {
                parts.push(super::rows::starred_copy_note(&p.row.path, &size_label(size)));
            }
        }
        let noisy: Vec<String> = self
            .points
            .iter()
            .filter(|p| p.row.warning.is_some())
            .map(|p| format!("{} at {}", p.row.path, size_label(p.size)))
            .collect();
        if !noisy.is_empty() {
            parts.push(format!("⚠ noisy (IQR > 25% of the median; the cell carries ⚠): {}.", noisy.join(", ")));
        }
        let mut ties: Vec<String> = Vec::new();
        for &size in &self.measured_sizes() {
            let tied: Vec<&str> =
                self.points.iter().filter(|p| p.size == size && p.row.tied).map(|p| p.row.path.as_str()).collect();
            if !tied.is_empty() {
                ties.push(format!("{} ({})", size_label(size), tied.join(" ≈ ")));
            }
        }
        if !ties.is_empty() && !self.all_single() {
            parts.push(format!("No ★ where the fastest paths are within each other's spread: {}.", ties.join(", ")));
        }
        let apart: Vec<&str> = self.paths.iter().map(String::as_str).filter(|p| {
            self.points.iter().any(|pt| pt.row.path == *p && !pt.row.comparable)
        }).collect();
        if !apart.is_empty() {
            parts.push(format!("{} starts from its own source (a SharedBuffer), so it is not ranked.", apart.join(", ")));
        }
        let na: Vec<&PathRow> = self
            .paths
            .iter()
            .filter(|p| !self.applicable_paths().contains(&p.as_str()))
            .filter_map(|p| self.points.iter().find(|pt| pt.row.path == *p).map(|pt| &pt.row))
            .collect();
        if !na.is_empty() {
            parts.push(super::rows::not_applicable_note(&na));
        }
        let mut mechanisms: Vec<(&str, &str)> = Vec::new();
        for p in self.points.iter().filter(|p| p.row.applicable) {
            if let Some(worker) = &p.row.worker
                && !mechanisms.iter().any(|(path, _)| *path == p.row.path)
            {
                mechanisms.push((&p.row.path, &worker.mechanism));
            }
        }
        if !mechanisms.is_empty() {
            let each: Vec<String> = mechanisms.iter().map(|(path, how)| format!("{path}: {how}")).collect();
            parts.push(format!("To the worker process: {}.", each.join("; ")));
        }
        parts
    }

    /// A pivot of one quantity: rows = sizes, columns = the paths that apply, headed by the path's
    /// name alone; one unit for the whole table, returned for its title (said once, not per column).
    /// Returns (unit, header, cells, fastest flags).
    fn pivot(&self, quantity: Quantity) -> (String, Vec<String>, Vec<Vec<String>>, Vec<Vec<bool>>) {
        let sizes = self.measured_sizes();
        let applicable = self.applicable_paths();
        let paths: Vec<&str> = match quantity {
            Quantity::Time => applicable,
            Quantity::Predicted => applicable
                .into_iter()
                .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.predicted.is_some()))
                .collect(),
            Quantity::Bandwidth => applicable
                .into_iter()
                .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.bandwidth.is_some()))
                .collect(),
            Quantity::FirstCall => applicable
                .into_iter()
                .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.first_call().is_some()))
                .collect(),
        };
        let of_paths = |f: &dyn Fn(&PathRow) -> Option<f64>| -> Vec<f64> {
            self.points.iter().filter(|p| paths.contains(&p.row.path.as_str())).filter_map(|p| f(&p.row)).collect()
        };
        let tu = match quantity {
            Quantity::Time => units::time_unit_for(&of_paths(&|r| r.worked().then(|| r.median()).flatten())),
            // From the numbers the table shows: a prediction given as words has none.
            Quantity::Predicted => {
                units::time_unit_for(&of_paths(&|r| r.predicted.as_ref().filter(|p| p.unpredictable.is_none()).map(|p| p.seconds)))
            }
            Quantity::Bandwidth => units::TimeUnit { suffix: "GB/s", seconds: 1.0 },
            Quantity::FirstCall => units::time_unit_for(&of_paths(&PathRow::first_call)),
        };
        let mut header = vec!["size".to_string()];
        let mut columns: Vec<Vec<String>> = Vec::new();
        let mut flags: Vec<Vec<bool>> = vec![Vec::new(); sizes.len()];
        for path in &paths {
            header.push(path.to_string());
            let rows: Vec<Option<&PathRow>> = sizes.iter().map(|s| self.point(*s, path)).collect();
            columns.push(
                rows.iter()
                    .map(|r| match (quantity, r) {
                        (Quantity::Time, Some(r)) if r.worked() => format!(
                            "{}{}",
                            units::time_in(r.median().unwrap_or(f64::NAN), tu),
                            if r.warning.is_some() { " ⚠" } else { "" }
                        ),
                        (Quantity::Time, Some(r)) => r.state().short().into(),
                        (Quantity::Predicted, Some(r)) => match &r.predicted {
                            Some(p) if p.unpredictable.is_some() => crate::advice::model::UNPREDICTABLE_CELL.to_string(),
                            Some(p) => format!("{}{}", units::time_in(p.seconds, tu), if r.misses_prediction { " ⚠" } else { "" }),
                            None => dash(),
                        },
                        (Quantity::Bandwidth, Some(r)) => r.bandwidth.map_or_else(dash, gbps),
                        (Quantity::FirstCall, Some(r)) => r.first_call().map_or_else(dash, |s| units::time_in(s, tu)),
                        (_, None) => dash(),
                    })
                    .collect(),
            );
            for (i, r) in rows.iter().enumerate() {
                flags[i].push(matches!(quantity, Quantity::Time) && r.is_some_and(|r| r.fastest));
            }
        }
        let cells: Vec<Vec<String>> = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut row = vec![size_label(*s)];
                row.extend(columns.iter().map(|c| c[i].clone()));
                row
            })
            .collect();
        (tu.suffix.to_string(), header, cells, flags)
    }

    /// A table's title with its unit, and the ⚠ clause only where a cell carries ⚠.
    fn title(&self, quantity: Quantity, unit: &str, cells: &[Vec<String>]) -> String {
        let warned = cells.iter().flatten().any(|c| c.ends_with('⚠'));
        match quantity {
            Quantity::Time => format!("{} ({unit}){}", self.time_title(), if warned { "; ⚠ noisy" } else { "" }),
            Quantity::Predicted => format!(
                "predicted before it ran, cost model ({unit}){}",
                if warned { "; ⚠ measured beyond its stated error" } else { "" }
            ),
            // Not the plot's own axis label, "bandwidth (GB/s)": a reader (and the browser test)
            // tells the table's words from the image's.
            Quantity::Bandwidth => format!("bandwidth of the copies, in {unit}"),
            Quantity::FirstCall => format!("first call, with the path's one-off set-up ({unit})"),
        }
    }

    fn reasons(&self) -> Vec<(String, String)> {
        self.paths.iter().filter_map(|p| self.path_reason(p).map(|r| (p.clone(), r))).collect()
    }

    /// Plain text within [`crate::render::TEXT_WIDTH`] columns: a table per quantity, the
    /// verdicts, the reasons of failures and the notes, wrapped at word boundaries.
    pub fn text(&self) -> String {
        let width = crate::render::TEXT_WIDTH;
        let mut lines = crate::render::wrap(&self.caption(), width, "", "  ");
        for quantity in QUANTITIES {
            let (unit, header, cells, flags) = self.pivot(quantity);
            if header.len() < 2 || cells.is_empty() {
                continue;
            }
            let body: Vec<Vec<String>> = cells
                .iter()
                .zip(&flags)
                .map(|(row, f)| {
                    row.iter()
                        .enumerate()
                        .map(|(c, s)| if c > 0 && f[c - 1] { format!("★ {s}") } else { s.clone() })
                        .collect()
                })
                .collect();
            let right: Vec<bool> = (0..header.len()).map(|c| c > 0).collect();
            lines.push(self.title(quantity, &unit, &cells));
            lines.extend(text_table(&header, &body, &right).lines().map(str::to_string));
        }
        let verdicts: Vec<String> =
            self.applicable_paths().iter().map(|p| format!("{p} {}", self.path_verdict(p))).collect();
        if !verdicts.is_empty() {
            lines.extend(crate::render::wrap(&format!("verdicts: {}", verdicts.join(" · ")), width, "", "  "));
        }
        for (path, reason) in self.reasons() {
            lines.extend(crate::render::wrap(&format!("{path} failed: {reason}"), width, "", "  "));
        }
        for note in self.footer() {
            lines.extend(crate::render::wrap(&note, width, "", "  "));
        }
        lines.join("\n")
    }

    fn html_pivot(&self, quantity: Quantity, caption: Option<&str>) -> String {
        let (unit, header, cells, flags) = self.pivot(quantity);
        if header.len() < 2 || cells.is_empty() {
            return String::new();
        }
        let title = match caption {
            Some(c) => format!("{c} — {}", self.title(quantity, &unit, &cells)),
            None => self.title(quantity, &unit, &cells),
        };
        let mut h = format!("<table class=\"gpushare gpushare-bench\" data-quantity=\"{}\" style=\"{}\"><caption style=\"text-align:left\">{}</caption><thead><tr>",
            match quantity {
                Quantity::Time => "time",
                Quantity::Predicted => "predicted",
                Quantity::Bandwidth => "bandwidth",
                Quantity::FirstCall => "first-call",
            },
            cells::TABLE_STYLE,
            escape(&title)
        );
        for (c, name) in header.iter().enumerate() {
            h.push_str(&if c > 0 { cells::th_num(name) } else { cells::th_text(name) });
        }
        h.push_str("</tr></thead><tbody>");
        for (row, f) in cells.iter().zip(&flags) {
            h.push_str("<tr>");
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    h.push_str(&format!("<th style=\"{}\">{}</th>", cells::TEXT_STYLE, escape(cell)));
                } else if f[c - 1] {
                    h.push_str(&format!(
                        "<td class=\"num best\" style=\"{};{BEST_STYLE}\"><b>★ {}</b></td>",
                        cells::NUM_STYLE,
                        escape(cell)
                    ));
                } else if cell == "n/a" {
                    h.push_str(&cells::td_num(&escape(cell), &format!("color:{}", crate::render::state::GREY)));
                } else {
                    h.push_str(&cells::td_num(&escape(cell), ""));
                }
            }
            h.push_str("</tr>");
        }
        if matches!(quantity, Quantity::Time) {
            h.push_str(&format!("<tr><th style=\"{}\">verdict</th>", cells::TEXT_STYLE));
            for path in self.applicable_paths() {
                let state = self.path_state(path);
                h.push_str(&format!(
                    "<td class=\"num {}\" style=\"{};{}\">{}</td>",
                    state.class(),
                    VERDICT_STYLE,
                    state.style(),
                    escape(&self.path_verdict(path))
                ));
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table>");
        h
    }

    /// Tables, the SVG plot and the notes, for notebooks.
    pub fn html(&self) -> String {
        let mut h = String::from(STYLE);
        h.push_str("<div class=\"gpushare-benchmark\">");
        for quantity in QUANTITIES {
            let caption = self.caption();
            h.push_str(&self.html_pivot(quantity, (quantity == Quantity::Time).then_some(caption.as_str())));
        }
        let alt = format!("{}: time and bandwidth against size", self.caption());
        h.push_str(&crate::render::svg_img(&crate::render::plot::benchmark_svg(self), &alt, None));
        let reasons = self.reasons();
        if !reasons.is_empty() {
            h.push_str("<ul class=\"gpushare-note\">");
            for (path, reason) in reasons {
                h.push_str(&format!("<li><b>{}</b> failed: {}</li>", escape(&path), escape(&reason)));
            }
            h.push_str("</ul>");
        }
        for note in self.footer() {
            let style = if note.starts_with(super::rows::NOT_APPLICABLE_LEAD) { format!(" style=\"color:{}\"", crate::render::state::GREY) } else { String::new() };
            h.push_str(&format!("<div class=\"gpushare-note\"{style}>{}</div>", escape(&note)));
        }
        h.push_str("</div>");
        h
    }
}

/// A sweep's verdict cell, in its column of numbers (right-aligned as they are): wraps at the spaces of "shared / copied" rather than widening its column.
const VERDICT_STYLE: &str = "text-align:right;vertical-align:top;white-space:normal;padding:2px 4px";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Quantity {
    Time,
    /// The cost model's prediction, made before the point ran (where the machine is calibrated).
    Predicted,
    Bandwidth,
    /// A handoff to a worker times its first call apart: it pays the path's one-off set-up (a
    /// process group, an IPC handle's first opening, a segment's copy).
    FirstCall,
}

/// The tables of a sweep, in order.
const QUANTITIES: [Quantity; 4] = [Quantity::Time, Quantity::FirstCall, Quantity::Predicted, Quantity::Bandwidth];
