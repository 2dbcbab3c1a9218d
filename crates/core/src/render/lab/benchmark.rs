//! Benchmark: a sweep over sizes × paths (`gpushare.bench`, `%sharebench`).

use serde::Serialize;

use super::columns::{dash, gbps, size_label, text_table};
use super::rows::{PathRow, PathRun, mark_fastest};
use crate::render::{BEST_STYLE, STYLE, cells, escape, units, verdict_style};
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
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
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
        let mut points: Vec<BenchPoint> =
            input.points.into_iter().map(|p| BenchPoint { size: p.size, row: PathRow::from_run(p.run) }).collect();
        for &size in &input.sizes {
            let mut at_size: Vec<&mut PathRow> =
                points.iter_mut().filter(|p| p.size == size).map(|p| &mut p.row).collect();
            mark_fastest(&mut at_size);
        }
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

    /// One verdict word per path over the sweep: "shared", "copied", "shared/copied", "n/a", "failed".
    pub fn path_verdict(&self, path: &str) -> String {
        let mut seen: Vec<&'static str> = Vec::new();
        for p in self.points.iter().filter(|p| p.row.path == path) {
            let word = if !p.row.applicable { "n/a" } else { p.row.verdict.as_str() };
            if !seen.contains(&word) {
                seen.push(word);
            }
        }
        if seen.is_empty() { "-".into() } else { seen.join("/") }
    }

    /// Why a path failed or did not apply (its first reason in the sweep).
    fn path_reason(&self, path: &str) -> Option<String> {
        self.points
            .iter()
            .filter(|p| p.row.path == path && !p.row.worked())
            .find_map(|p| p.row.reason.clone())
    }

    pub fn caption(&self) -> String {
        // "1 size × 1 path", not "1 sizes".
        let count = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
        format!(
            "{} → {} · {} on {} · {} × {}",
            self.source_framework,
            self.target_framework,
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

    fn footer(&self) -> String {
        let warmups = format!("{} warm-up run{}", self.warmup, if self.warmup == 1 { "" } else { "s" });
        let mut parts = vec![if self.all_single() {
            format!(
                "Time per handoff: 1 sample (one call, timed once) after {warmups}; one unit per column; \
                 no ★: one sample has no spread to rank by; bandwidth = bytes copied / time (zero-copy paths move nothing)."
            )
        } else {
            format!(
                "Median time per handoff of {} repeat{} after {warmups}; one unit per column; ★ fastest at each size beyond the measured spread; \
                 bandwidth = bytes copied / median (zero-copy paths move nothing).",
                self.repeat,
                if self.repeat == 1 { "" } else { "s" },
            )
        }];
        if self.interrupted {
            parts.push("Interrupted: partial results.".into());
        }
        let noisy: Vec<String> = self
            .points
            .iter()
            .filter(|p| p.row.warning.is_some())
            .map(|p| format!("{} at {}", p.row.path, size_label(p.size)))
            .collect();
        if !noisy.is_empty() {
            parts.push(format!("⚠ noisy (IQR > 25% of the median): {}.", noisy.join(", ")));
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
        parts.join(" ")
    }

    /// A pivot of one quantity: rows = sizes, columns = paths, each column in its own unit.
    /// Returns (header, cells, fastest flags).
    fn pivot(&self, quantity: Quantity) -> (Vec<String>, Vec<Vec<String>>, Vec<Vec<bool>>) {
        let sizes = self.measured_sizes();
        let paths: Vec<&str> = match quantity {
            Quantity::Time => self.paths.iter().map(String::as_str).collect(),
            Quantity::Predicted => self
                .paths
                .iter()
                .map(String::as_str)
                .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.predicted.is_some()))
                .collect(),
            Quantity::Bandwidth => self
                .paths
                .iter()
                .map(String::as_str)
                .filter(|p| self.points.iter().any(|pt| pt.row.path == *p && pt.row.bandwidth.is_some()))
                .collect(),
        };
        let mut header = vec!["size".to_string()];
        let mut columns: Vec<Vec<String>> = Vec::new();
        let mut flags: Vec<Vec<bool>> = vec![Vec::new(); sizes.len()];
        for path in &paths {
            let rows: Vec<Option<&PathRow>> = sizes.iter().map(|s| self.point(*s, path)).collect();
            match quantity {
                Quantity::Time => {
                    let worked: Vec<&PathRow> = rows.iter().flatten().copied().filter(|r| r.worked()).collect();
                    if worked.is_empty() {
                        header.push(path.to_string());
                    } else {
                        let tu = units::time_unit_for(&worked.iter().filter_map(|r| r.median()).collect::<Vec<_>>());
                        header.push(format!("{path} ({})", tu.suffix));
                    }
                    let tu = units::time_unit_for(&worked.iter().filter_map(|r| r.median()).collect::<Vec<_>>());
                    columns.push(
                        rows.iter()
                            .map(|r| match r {
                                Some(r) if r.worked() => units::time_in(r.median().unwrap_or(f64::NAN), tu),
                                Some(r) if !r.applicable => "n/a".into(),
                                Some(_) => "failed".into(),
                                None => dash(),
                            })
                            .collect(),
                    );
                }
                Quantity::Predicted => {
                    let predicted: Vec<f64> = rows.iter().flatten().filter_map(|r| r.predicted.as_ref().map(|p| p.seconds)).collect();
                    let tu = units::time_unit_for(&predicted);
                    header.push(format!("{path} ({})", tu.suffix));
                    columns.push(
                        rows.iter()
                            .map(|r| match r.and_then(|r| r.predicted.as_ref().map(|p| (p, r.misses_prediction))) {
                                Some((p, _)) if p.unpredictable.is_some() => crate::advice::model::UNPREDICTABLE_CELL.to_string(),
                                Some((p, miss)) => format!("{}{}", units::time_in(p.seconds, tu), if miss { " ⚠" } else { "" }),
                                None => dash(),
                            })
                            .collect(),
                    );
                }
                Quantity::Bandwidth => {
                    header.push(format!("{path} (GB/s)"));
                    columns.push(rows.iter().map(|r| r.and_then(|r| r.bandwidth).map_or_else(dash, gbps)).collect());
                }
            }
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
        (header, cells, flags)
    }

    fn reasons(&self) -> Vec<(String, String)> {
        self.paths.iter().filter_map(|p| self.path_reason(p).map(|r| (p.clone(), r))).collect()
    }

    pub fn text(&self) -> String {
        let mut out = self.caption();
        for (title, quantity) in [
            (self.time_title(), Quantity::Time),
            (PREDICTED_TITLE, Quantity::Predicted),
            ("bandwidth", Quantity::Bandwidth),
        ] {
            let (header, cells, flags) = self.pivot(quantity);
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
            out.push_str(&format!("\n{title}\n{}", text_table(&header, &body, &right)));
        }
        let verdicts: Vec<String> = self.paths.iter().map(|p| format!("{p} {}", self.path_verdict(p))).collect();
        out.push_str(&format!("\nverdicts: {}", verdicts.join(" · ")));
        for (path, reason) in self.reasons() {
            out.push_str(&format!("\n{path}: {reason}"));
        }
        out.push('\n');
        out.push_str(&self.footer());
        out
    }

    fn html_pivot(&self, title: &str, quantity: Quantity) -> String {
        let (header, cells, flags) = self.pivot(quantity);
        if header.len() < 2 || cells.is_empty() {
            return String::new();
        }
        let mut h = format!("<table class=\"gpushare gpushare-bench\" data-quantity=\"{}\" style=\"{}\"><caption style=\"text-align:left\">{}</caption><thead><tr>",
            match quantity { Quantity::Time => "time", Quantity::Predicted => "predicted", Quantity::Bandwidth => "bandwidth" }, cells::TABLE_STYLE, escape(title));
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
                } else {
                    h.push_str(&cells::td_num(&escape(cell), ""));
                }
            }
            h.push_str("</tr>");
        }
        if matches!(quantity, Quantity::Time) {
            h.push_str(&format!("<tr><th style=\"{}\">verdict</th>", cells::TEXT_STYLE));
            for path in &self.paths {
                let v = self.path_verdict(path);
                let verdict = if v == "shared" {
                    Verdict::Shared
                } else if v.contains("copied") {
                    Verdict::Copied
                } else {
                    Verdict::Failed
                };
                h.push_str(&format!(
                    "<td class=\"{}\" style=\"{};{}\">{}</td>",
                    verdict.as_str(),
                    cells::TEXT_STYLE,
                    verdict_style(verdict),
                    escape(&v)
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
        h.push_str(&self.html_pivot(&format!("{} — {}", self.caption(), self.time_title()), Quantity::Time));
        h.push_str(&self.html_pivot(PREDICTED_TITLE, Quantity::Predicted));
        h.push_str(&self.html_pivot("bandwidth", Quantity::Bandwidth));
        let alt = format!("{}: time and bandwidth against size", self.caption());
        h.push_str(&crate::render::svg_img(&crate::render::plot::benchmark_svg(self), &alt, None));
        let reasons = self.reasons();
        if !reasons.is_empty() {
            h.push_str("<ul class=\"gpushare-note\">");
            for (path, reason) in reasons {
                h.push_str(&format!("<li><b>{}</b>: {}</li>", escape(&path), escape(&reason)));
            }
            h.push_str("</ul>");
        }
        h.push_str(&format!("<div class=\"gpushare-note\">{}</div></div>", escape(&self.footer())));
        h
    }
}

/// The title of the predictions' table (shown only where the machine is calibrated).
const PREDICTED_TITLE: &str = "predicted before it ran (cost model; ⚠ measured beyond its stated error)";

#[derive(Debug, Clone, Copy)]
enum Quantity {
    Time,
    /// The cost model's prediction, made before the point ran (where the machine is calibrated).
    Predicted,
    Bandwidth,
}
