//! The transfer-path laboratory: a comparison of every path for one array (`gpushare.compare`,
//! `%share x ->jax --path all`) and a sweep over sizes × paths (`gpushare.bench`, `%sharebench`).
//!
//! Python measures and hands over raw runs ([`PathRun`]: samples in seconds, bytes, verdicts); this
//! module computes the statistics, picks the fastest path, chooses one unit per column and renders
//! text, HTML and the JSON payload (`gpushare.comparison/1`, `gpushare.benchmark/1`). The plot of a
//! sweep is in [`super::plot`].

use serde::{Deserialize, Serialize};

use super::{STYLE, escape, units};
use crate::report::{TensorReport, Verdict, envelope};
use crate::stats::Timing;

fn yes() -> bool {
    true
}

fn one() -> u64 {
    1
}

/// One path tried on one array, as Python measured it.
#[derive(Debug, Clone, Deserialize)]
pub struct PathRun {
    pub path: String,
    /// `"shared"`, `"copied"` or `"failed"`.
    pub verdict: String,
    /// `false` when the path does not apply to the pair (then `verdict` is `"failed"`).
    #[serde(default = "yes")]
    pub applicable: bool,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub fix: Option<String>,
    /// Seconds per loop, one per repeat.
    #[serde(default)]
    pub samples: Vec<f64>,
    #[serde(default = "one")]
    pub loops: u64,
    /// Device seconds per loop by CUDA events on the source's stream, one per repeat.
    #[serde(default)]
    pub device_samples: Option<Vec<f64>>,
    /// Payload bytes the path copied (0 when it shared).
    #[serde(default)]
    pub bytes_moved: u64,
    #[serde(default)]
    pub target: Option<TensorReport>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// This is the path `auto` picks for the pair.
    #[serde(default)]
    pub auto: bool,
}

/// A measured path as tables show it and the JSON carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathRow {
    pub path: String,
    pub verdict: Verdict,
    pub applicable: bool,
    pub auto: bool,
    pub reason: Option<String>,
    pub fix: Option<String>,
    pub bytes_moved: u64,
    /// Host wall time per handoff.
    pub timing: Option<Timing>,
    /// Device time per handoff (CUDA events), where measured.
    pub device_timing: Option<Timing>,
    /// Bytes moved per second at the median time; `None` when nothing was copied or it failed.
    pub bandwidth: Option<f64>,
    /// The fastest path that worked (at this size, in a sweep).
    pub fastest: bool,
    /// Set when the spread makes the median untrustworthy.
    pub warning: Option<String>,
    pub notes: Vec<String>,
    pub target: Option<TensorReport>,
}

fn verdict_of(name: &str) -> Verdict {
    match name {
        "shared" => Verdict::Shared,
        "copied" => Verdict::Copied,
        _ => Verdict::Failed,
    }
}

impl PathRow {
    pub fn from_run(run: PathRun) -> PathRow {
        let verdict = verdict_of(&run.verdict);
        let worked = verdict != Verdict::Failed && !run.samples.is_empty();
        let timing = worked.then(|| Timing::from_samples(run.samples.clone(), run.loops));
        let device_timing = if worked {
            run.device_samples.filter(|d| !d.is_empty()).map(|d| Timing::from_samples(d, run.loops))
        } else {
            None
        };
        let timing = timing.map(|mut t| {
            t.device_median = device_timing.as_ref().map(|d| d.median);
            t
        });
        let bandwidth = timing
            .as_ref()
            .filter(|t| run.bytes_moved > 0 && t.median > 0.0)
            .map(|t| run.bytes_moved as f64 / t.median);
        let warning = timing.as_ref().and_then(Timing::noise_warning);
        PathRow {
            path: run.path,
            verdict,
            applicable: run.applicable,
            auto: run.auto,
            reason: run.reason,
            fix: run.fix,
            bytes_moved: if worked { run.bytes_moved } else { 0 },
            timing,
            device_timing,
            bandwidth,
            fastest: false,
            warning,
            notes: run.notes,
            target: run.target,
        }
    }

    pub fn worked(&self) -> bool {
        self.verdict != Verdict::Failed && self.timing.as_ref().is_some_and(|t| t.median.is_finite())
    }

    fn median(&self) -> Option<f64> {
        self.timing.as_ref().map(|t| t.median).filter(|m| m.is_finite())
    }

    /// "shared ✓", "copied ✗", "failed ✗", "not applicable".
    pub fn verdict_text(&self) -> String {
        let base = if !self.applicable {
            "not applicable"
        } else {
            match self.verdict {
                Verdict::Shared => "shared ✓",
                Verdict::Copied => "copied ✗",
                Verdict::Failed => "failed ✗",
            }
        };
        base.to_owned()
    }

    fn path_text(&self) -> String {
        if self.auto { format!("{} (auto)", self.path) } else { self.path.clone() }
    }

    fn why(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(r) = &self.reason {
            parts.push(r.clone());
        }
        if let Some(f) = &self.fix {
            parts.push(format!("fix: {f}"));
        }
        parts.extend(self.notes.iter().cloned());
        if let Some(w) = &self.warning {
            parts.push(format!("⚠ {w}"));
        }
        parts.join("; ")
    }
}

/// Marks the fastest row that worked; returns its index.
fn mark_fastest(rows: &mut [&mut PathRow]) -> Option<usize> {
    let best = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.median().filter(|_| r.worked()).map(|m| (i, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    if let Some(i) = best {
        rows[i].fastest = true;
    }
    best
}

// ---------------------------------------------------------------------------------------------
// Units of a column.

/// A byte unit for a column: the largest binary unit in which the smallest non-zero value is ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByteUnit {
    pub suffix: &'static str,
    pub bytes: f64,
}

const BYTE_UNITS: [ByteUnit; 5] = [
    ByteUnit { suffix: "B", bytes: 1.0 },
    ByteUnit { suffix: "KiB", bytes: 1024.0 },
    ByteUnit { suffix: "MiB", bytes: 1_048_576.0 },
    ByteUnit { suffix: "GiB", bytes: 1_073_741_824.0 },
    ByteUnit { suffix: "TiB", bytes: 1_099_511_627_776.0 },
];

pub fn byte_unit_for(values: &[u64]) -> ByteUnit {
    let smallest = values.iter().copied().filter(|v| *v > 0).min();
    match smallest {
        None => BYTE_UNITS[0],
        Some(s) => *BYTE_UNITS.iter().rev().find(|u| s as f64 >= u.bytes).unwrap_or(&BYTE_UNITS[0]),
    }
}

fn bytes_in(n: u64, unit: ByteUnit) -> String {
    if n == 0 {
        return "0".into();
    }
    let v = n as f64 / unit.bytes;
    if v.fract() == 0.0 && v < 1e6 { format!("{v:.0}") } else { units::sig_figs(v, 3) }
}

/// A size as a label: `4 KiB`, `1 MiB`, `1.5 GiB`, `512 B`.
pub fn size_label(bytes: u64) -> String {
    units::bytes(bytes).replace(".00 ", " ")
}

/// Bandwidth in GB/s (decimal, as hardware is quoted), three significant figures.
pub fn gbps(bytes_per_second: f64) -> String {
    units::sig_figs(bytes_per_second / 1e9, 3)
}

/// One time unit for a set of columns: chosen from the smallest value of all of them.
fn time_unit(rows: &[&PathRow]) -> units::TimeUnit {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.timing.as_ref())
        .flat_map(|t| [t.median, t.min])
        .chain(rows.iter().filter_map(|r| r.device_timing.as_ref()).map(|t| t.median))
        .collect();
    units::time_unit_for(&values)
}

fn dash() -> String {
    "-".into()
}

/// Aligned plain-text table: `right` marks the columns of numbers.
fn text_table(header: &[String], body: &[Vec<String>], right: &[bool]) -> String {
    let keep: Vec<bool> = (0..header.len())
        .map(|c| !header[c].is_empty() || body.iter().any(|row| !row[c].is_empty()))
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| body.iter().map(|row| row[c].chars().count()).chain([header[c].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .enumerate()
            .filter(|(c, _)| keep[*c])
            .map(|(c, s)| if right[c] { format!("{s:>w$}", w = widths[c]) } else { format!("{s:<w$}", w = widths[c]) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(header);
    for row in body {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Comparison: every path for one array.

/// What Python measured for `compare`.
#[derive(Debug, Clone, Deserialize)]
pub struct ComparisonInput {
    pub source: TensorReport,
    pub target_framework: String,
    pub runs: Vec<PathRun>,
    #[serde(default)]
    pub repeat: u64,
    #[serde(default)]
    pub warmup: u64,
}

/// A comparison of transfer paths for one array (payload of `gpushare.comparison/1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        let mut rows: Vec<PathRow> = input.runs.into_iter().map(PathRow::from_run).collect();
        let best = {
            let mut refs: Vec<&mut PathRow> = rows.iter_mut().collect();
            mark_fastest(&mut refs)
        };
        let fastest = best.map(|i| rows[i].path.clone());
        let auto_path = rows.iter().find(|r| r.auto).map(|r| r.path.clone());
        ComparisonReport {
            source: input.source,
            target_framework: input.target_framework,
            rows,
            fastest,
            auto_path,
            repeat: input.repeat,
            warmup: input.warmup,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        envelope("comparison", serde_json::to_value(self).unwrap_or_default())
    }

    fn caption(&self) -> String {
        let s = &self.source;
        let shape: Vec<String> = s.shape.iter().map(i64::to_string).collect();
        let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
        format!(
            "{} → {} · {} {} on {} · {}",
            s.framework,
            self.target_framework,
            s.dtype,
            shape,
            s.dlpack_device_name,
            units::bytes(s.nbytes)
        )
    }

    fn footer(&self) -> String {
        let loops: Vec<u64> = self.rows.iter().filter_map(|r| r.timing.as_ref().map(|t| t.loops)).collect();
        let loops_text = match (loops.iter().min(), loops.iter().max()) {
            (Some(a), Some(b)) if a == b => format!("{a} loop{} each", if *a == 1 { "" } else { "s" }),
            (Some(a), Some(b)) => format!("{a}–{b} loops each"),
            _ => "no timings".into(),
        };
        let mut parts = vec![format!(
            "Times are per handoff: median and minimum of {} repeat{} × {loops_text}, after {} warm-up run{}; bandwidth = bytes moved / median.",
            self.repeat,
            if self.repeat == 1 { "" } else { "s" },
            self.warmup,
            if self.warmup == 1 { "" } else { "s" }
        )];
        if let Some(f) = &self.fastest {
            parts.push(format!("★ fastest: {f}."));
        }
        if let Some(a) = &self.auto_path {
            parts.push(format!("auto picks {a}."));
        }
        parts.join(" ")
    }

    /// Columns shared by the text and HTML forms: (header, right-aligned, cells per row).
    fn columns(&self) -> Vec<(String, bool, Vec<String>)> {
        let refs: Vec<&PathRow> = self.rows.iter().collect();
        let tu = time_unit(&refs);
        let bu = byte_unit_for(&self.rows.iter().map(|r| r.bytes_moved).collect::<Vec<_>>());
        let time = |f: &dyn Fn(&Timing) -> f64| -> Vec<String> {
            self.rows
                .iter()
                .map(|r| r.timing.as_ref().filter(|_| r.worked()).map_or_else(dash, |t| units::time_in(f(t), tu)))
                .collect()
        };
        let mut cols = vec![
            ("path".to_string(), false, self.rows.iter().map(PathRow::path_text).collect()),
            ("verdict".to_string(), false, self.rows.iter().map(PathRow::verdict_text).collect()),
            (
                format!("bytes moved ({})", bu.suffix),
                true,
                self.rows.iter().map(|r| if r.worked() { bytes_in(r.bytes_moved, bu) } else { dash() }).collect(),
            ),
            (format!("median ({})", tu.suffix), true, time(&|t| t.median)),
            (format!("min ({})", tu.suffix), true, time(&|t| t.min)),
            (format!("IQR ({})", tu.suffix), true, time(&|t| t.iqr)),
            (
                "bandwidth (GB/s)".to_string(),
                true,
                self.rows.iter().map(|r| r.bandwidth.map_or_else(dash, gbps)).collect(),
            ),
        ];
        if self.rows.iter().any(|r| r.device_timing.is_some()) {
            cols.push((
                format!("device ({})", tu.suffix),
                true,
                self.rows
                    .iter()
                    .map(|r| r.device_timing.as_ref().map_or_else(dash, |t| units::time_in(t.median, tu)))
                    .collect(),
            ));
        }
        if self.rows.iter().any(|r| !r.why().is_empty()) {
            cols.push(("why".to_string(), false, self.rows.iter().map(PathRow::why).collect()));
        }
        cols
    }

    pub fn text(&self) -> String {
        let cols = self.columns();
        let mut header = vec![String::new()];
        header.extend(cols.iter().map(|c| c.0.clone()));
        let mut right = vec![false];
        right.extend(cols.iter().map(|c| c.1));
        let body: Vec<Vec<String>> = (0..self.rows.len())
            .map(|i| {
                let mut row = vec![if self.rows[i].fastest { "★".to_string() } else { String::new() }];
                row.extend(cols.iter().map(|c| c.2[i].clone()));
                row
            })
            .collect();
        format!("{}\n{}\n{}", self.caption(), text_table(&header, &body, &right), self.footer())
    }

    pub fn html(&self) -> String {
        let cols = self.columns();
        let mut h = String::with_capacity(2048 + self.rows.len() * 512);
        h.push_str(STYLE);
        h.push_str("<table class=\"gpushare gpushare-comparison\"><caption>");
        h.push_str(&escape(&self.caption()));
        h.push_str("</caption><thead><tr>");
        for (name, right, _) in &cols {
            h.push_str(&format!("<th{}>{}</th>", if *right { " class=\"num\"" } else { "" }, escape(name)));
        }
        h.push_str("</tr></thead><tbody>");
        for (i, r) in self.rows.iter().enumerate() {
            let class = if r.fastest { " class=\"best\"" } else { "" };
            h.push_str(&format!("<tr{class} data-path=\"{}\">", escape(&r.path)));
            for (c, (name, right, cells)) in cols.iter().enumerate() {
                let mut cell = escape(&cells[i]);
                if c == 0 && r.fastest {
                    cell = format!("<b>★ {cell}</b>");
                }
                let class = if name == "verdict" {
                    format!(" class=\"{}\"", if r.applicable { r.verdict.as_str() } else { "failed" })
                } else if *right {
                    " class=\"num\"".to_string()
                } else {
                    String::new()
                };
                h.push_str(&format!("<td{class}>{cell}</td>"));
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table>");
        h.push_str(&format!("<div class=\"gpushare-note\">{}</div>", escape(&self.footer())));
        h
    }
}

// ---------------------------------------------------------------------------------------------
// Benchmark: a sweep over sizes × paths.

/// One measured point of a sweep.
#[derive(Debug, Clone, Deserialize)]
pub struct BenchRun {
    /// Payload bytes of the source array.
    pub size: u64,
    #[serde(flatten)]
    pub run: PathRun,
}

/// What Python measured for `bench`.
#[derive(Debug, Clone, Deserialize)]
pub struct BenchInput {
    pub source_framework: String,
    pub target_framework: String,
    pub dtype: String,
    pub device: String,
    pub sizes: Vec<u64>,
    pub paths: Vec<String>,
    pub points: Vec<BenchRun>,
    #[serde(default)]
    pub interrupted: bool,
    #[serde(default)]
    pub repeat: u64,
    #[serde(default)]
    pub warmup: u64,
}

/// One point of a sweep as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchPoint {
    pub size: u64,
    #[serde(flatten)]
    pub row: PathRow,
}

/// A sweep over sizes × paths (payload of `gpushare.benchmark/1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        format!(
            "{} → {} · {} on {} · {} sizes × {} paths",
            self.source_framework,
            self.target_framework,
            self.dtype,
            self.device,
            self.sizes.len(),
            self.paths.len()
        )
    }

    fn footer(&self) -> String {
        let mut parts = vec![format!(
            "Median time per handoff of {} repeat{} after {} warm-up run{}; one unit per column; ★ fastest at each size; \
             bandwidth = bytes copied / median (zero-copy paths move nothing).",
            self.repeat,
            if self.repeat == 1 { "" } else { "s" },
            self.warmup,
            if self.warmup == 1 { "" } else { "s" }
        )];
        if self.interrupted {
            parts.push("Interrupted: partial results.".into());
        }
        let noisy = self.points.iter().filter(|p| p.row.warning.is_some()).count();
        if noisy > 0 {
            parts.push(format!("⚠ {noisy} noisy point{} (IQR > 25% of the median).", if noisy == 1 { "" } else { "s" }));
        }
        parts.join(" ")
    }

    /// A pivot of one quantity: rows = sizes, columns = paths, each column in its own unit.
    /// Returns (header, cells, fastest flags).
    fn pivot(&self, quantity: Quantity) -> (Vec<String>, Vec<Vec<String>>, Vec<Vec<bool>>) {
        let sizes = self.measured_sizes();
        let paths: Vec<&str> = match quantity {
            Quantity::Time => self.paths.iter().map(String::as_str).collect(),
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
        for (title, quantity) in [("median time per handoff", Quantity::Time), ("bandwidth", Quantity::Bandwidth)] {
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
        let mut h = format!("<table class=\"gpushare gpushare-bench\" data-quantity=\"{}\"><caption>{}</caption><thead><tr>",
            match quantity { Quantity::Time => "time", Quantity::Bandwidth => "bandwidth" }, escape(title));
        for (c, name) in header.iter().enumerate() {
            h.push_str(&format!("<th{}>{}</th>", if c > 0 { " class=\"num\"" } else { "" }, escape(name)));
        }
        h.push_str("</tr></thead><tbody>");
        for (row, f) in cells.iter().zip(&flags) {
            h.push_str("<tr>");
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    h.push_str(&format!("<th>{}</th>", escape(cell)));
                } else if f[c - 1] {
                    h.push_str(&format!("<td class=\"num best\"><b>★ {}</b></td>", escape(cell)));
                } else {
                    h.push_str(&format!("<td class=\"num\">{}</td>", escape(cell)));
                }
            }
            h.push_str("</tr>");
        }
        if matches!(quantity, Quantity::Time) {
            h.push_str("<tr><th>verdict</th>");
            for path in &self.paths {
                let v = self.path_verdict(path);
                let class = if v == "shared" { "shared" } else if v.contains("copied") { "copied" } else { "failed" };
                h.push_str(&format!("<td class=\"{class}\">{}</td>", escape(&v)));
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
        h.push_str(&self.html_pivot(&format!("{} — median time per handoff", self.caption()), Quantity::Time));
        h.push_str(&self.html_pivot("bandwidth", Quantity::Bandwidth));
        h.push_str(&super::plot::benchmark_svg(self));
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

#[derive(Debug, Clone, Copy)]
enum Quantity {
    Time,
    Bandwidth,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor() -> TensorReport {
        serde_json::from_value(serde_json::json!({
            "framework": "torch", "dtype": "float32", "shape": [1024], "strides": [1], "device": "cpu",
            "dlpack_device": [1, 0], "dlpack_device_name": "cpu:0", "data_ptr": 4096, "byte_offset": 0,
            "nbytes": 4096, "span": [4096, 8192], "contiguous": true, "alignment": 256, "readonly": false,
            "dlpack_version": [1, 0], "cuda": null
        }))
        .unwrap()
    }

    fn run(path: &str, verdict: &str, samples: &[f64], bytes: u64) -> PathRun {
        serde_json::from_value(serde_json::json!({
            "path": path, "verdict": verdict, "samples": samples, "loops": 10, "bytes_moved": bytes
        }))
        .unwrap()
    }

    fn comparison() -> ComparisonReport {
        let mut na = run("pinned", "failed", &[], 0);
        na.applicable = false;
        na.reason = Some("pinned needs CUDA: libcuda not found".into());
        let mut auto = run("dlpack", "shared", &[2e-6, 2.1e-6, 1.9e-6, 2e-6], 0);
        auto.auto = true;
        ComparisonReport::from_input(ComparisonInput {
            source: tensor(),
            target_framework: "jax".into(),
            runs: vec![
                auto,
                run("host", "copied", &[40e-6, 41e-6, 39e-6, 40e-6], 4096),
                na,
                run("copy", "copied", &[1.5e-6, 1.6e-6, 1.5e-6, 1.5e-6], 4096),
            ],
            repeat: 4,
            warmup: 1,
        })
    }

    #[test]
    fn comparison_marks_the_fastest_and_keeps_failed_rows() {
        let c = comparison();
        assert_eq!(c.fastest.as_deref(), Some("copy"));
        assert_eq!(c.auto_path.as_deref(), Some("dlpack"));
        assert_eq!(c.rows.iter().filter(|r| r.fastest).count(), 1);
        let pinned = &c.rows[2];
        assert!(!pinned.applicable && pinned.timing.is_none() && pinned.bandwidth.is_none());
        let host = &c.rows[1];
        assert!((host.bandwidth.unwrap() - 4096.0 / 40e-6).abs() < 1.0);
        assert!(c.rows[0].bandwidth.is_none(), "zero-copy moves nothing");
    }

    #[test]
    fn comparison_text_has_one_unit_per_column() {
        let text = comparison().text();
        assert!(text.starts_with("torch → jax · float32 (1024,) on cpu:0 · 4.00 KiB"), "{text}");
        let header = text.lines().nth(1).unwrap();
        for col in ["path", "verdict", "bytes moved (KiB)", "median (µs)", "min (µs)", "IQR (µs)", "bandwidth (GB/s)", "why"] {
            assert!(header.contains(col), "{col} missing in {header}");
        }
        assert!(text.contains("★  copy"), "{text}");
        assert!(text.contains("not applicable") && text.contains("pinned needs CUDA: libcuda not found"));
        assert!(text.contains("dlpack (auto)"));
        assert!(text.contains("auto picks dlpack"));
        // The host row in µs, three significant figures; copy's bandwidth in GB/s.
        let host = text.lines().find(|l| l.contains("host")).unwrap();
        assert!(host.contains("40.0") && host.contains("0.102"), "{host}");
    }

    #[test]
    fn comparison_html_highlights_the_fastest_and_json_has_the_schema() {
        let c = comparison();
        let html = c.html();
        assert!(html.contains("<tr class=\"best\" data-path=\"copy\">"));
        assert!(html.contains("<b>★ copy</b>"));
        assert!(html.contains("class=\"failed\">not applicable"));
        let json = c.to_json();
        assert_eq!(json["schema"], "gpushare.comparison/1");
        assert_eq!(json["data"]["rows"][2]["verdict"], "failed");
        assert_eq!(json["data"]["rows"][2]["applicable"], false);
        assert_eq!(json["data"]["rows"][3]["fastest"], true);
        assert_eq!(json["data"]["rows"][1]["timing"]["median"], 40e-6);
    }

    #[test]
    fn noisy_rows_carry_a_warning() {
        let c = ComparisonReport::from_input(ComparisonInput {
            source: tensor(),
            target_framework: "numpy".into(),
            runs: vec![run("dlpack", "shared", &[1e-6, 5e-6, 1e-6, 9e-6, 2e-6], 0)],
            repeat: 5,
            warmup: 1,
        });
        assert!(c.rows[0].warning.as_deref().unwrap().starts_with("noisy"));
        assert!(c.text().contains("⚠ noisy"));
    }

    fn bench() -> BenchmarkReport {
        let mut points = Vec::new();
        for (i, size) in [4096u64, 1 << 20, 256 << 20].into_iter().enumerate() {
            let scale = [1.0, 10.0, 1000.0][i];
            points.push(BenchRun { size, run: run("dlpack", "shared", &[2e-6, 2e-6, 2e-6], 0) });
            points.push(BenchRun { size, run: run("host", "copied", &[scale * 30e-6; 3], size) });
            let mut na = run("pinned", "failed", &[], 0);
            na.applicable = false;
            na.reason = Some("pinned needs CUDA: no driver".into());
            points.push(BenchRun { size, run: na });
        }
        BenchmarkReport::from_input(BenchInput {
            source_framework: "torch".into(),
            target_framework: "jax".into(),
            dtype: "float32".into(),
            device: "cpu".into(),
            sizes: vec![4096, 1 << 20, 256 << 20],
            paths: vec!["dlpack".into(), "host".into(), "pinned".into()],
            points,
            interrupted: false,
            repeat: 3,
            warmup: 1,
        })
    }

    #[test]
    fn bench_pivots_sizes_by_paths_with_a_unit_per_column() {
        let b = bench();
        assert_eq!(b.working_paths(), vec!["dlpack", "host"]);
        assert_eq!(b.path_verdict("pinned"), "n/a");
        let text = b.text();
        let header = text.lines().nth(2).unwrap();
        assert!(header.contains("dlpack (µs)") && header.contains("host (µs)") && header.contains("pinned"), "{header}");
        assert!(text.contains("4 KiB") && text.contains("256 MiB"));
        assert!(text.contains("★ 2.00"), "{text}");
        assert!(text.contains("host (GB/s)"));
        assert!(text.contains("pinned: pinned needs CUDA: no driver"));
        let json = b.to_json();
        assert_eq!(json["schema"], "gpushare.benchmark/1");
        assert_eq!(json["data"]["points"].as_array().unwrap().len(), 9);
        assert_eq!(json["data"]["points"][0]["size"], 4096);
        assert_eq!(json["data"]["points"][0]["path"], "dlpack");
        assert_eq!(json["data"]["points"][0]["fastest"], true);
    }

    #[test]
    fn bench_html_has_tables_and_the_plot() {
        let html = bench().html();
        assert!(html.contains("data-quantity=\"time\"") && html.contains("data-quantity=\"bandwidth\""));
        assert!(html.contains("<svg"));
        assert!(html.contains("<li><b>pinned</b>: pinned needs CUDA: no driver</li>"));
    }

    #[test]
    fn byte_units() {
        assert_eq!(byte_unit_for(&[0, 4096, 1 << 20]).suffix, "KiB");
        assert_eq!(byte_unit_for(&[0]).suffix, "B");
        assert_eq!(bytes_in(4096, byte_unit_for(&[4096])), "4");
        assert_eq!(bytes_in(1 << 20, byte_unit_for(&[4096])), "1024");
    }
}
