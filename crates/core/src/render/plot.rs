//! An inline SVG plot of a sweep: time per handoff against size (log–log) and bandwidth against
//! size, one line per path, with axis labels and a legend. Plain SVG, no script or external style,
//! so it renders in notebooks, exported HTML and GitHub alike.
//!
//! Every point is a `<circle class="point" data-path=… data-size=… data-value=…>` with a `<title>`
//! tooltip, so tests and tools can read the plot back.

use std::fmt::Write as _;

use super::escape;
use super::lab::BenchmarkReport;
use super::units;

const PANEL_W: f64 = 360.0;
const PANEL_H: f64 = 230.0;
const MARGIN_L: f64 = 64.0;
const MARGIN_R: f64 = 16.0;
const MARGIN_T: f64 = 28.0;
const MARGIN_B: f64 = 44.0;
const LEGEND_ROW: f64 = 18.0;

/// Colours per path, the same in every plot: the path table's (`crate::paths`).
pub fn colour(path: &str) -> &'static str {
    crate::paths::colour(path)
}

/// How a path's line and points are drawn besides its colour: a dash pattern (empty: solid), the
/// points' radius and whether they are rings. Lines that coincide (`dlpack` exactly under `shared`
/// on a CPU) stay visible: a dashed line over a solid one, a dot inside a ring. Benchmark.plot()
/// (python/gpushare/bench_plot.py) uses the same dashes.
pub fn stroke(path: &str) -> (&'static str, f64, bool) {
    match path {
        "dlpack" => ("", 4.5, true),
        "capsule" => ("6 3", 3.0, false),
        "cai" => ("2 2", 3.0, false),
        "host" => ("8 3 2 3", 3.5, true),
        "pinned" => ("4 4", 3.0, false),
        "copy" => ("1 3", 3.5, true),
        "shared" => ("10 4", 2.5, false),
        "auto" => ("6 2 2 2", 3.0, true),
        _ => ("3 1", 3.0, false),
    }
}

/// The attributes of a path's points: a filled dot or a ring.
fn marker(path: &str) -> String {
    let (_, r, ring) = stroke(path);
    let c = colour(path);
    if ring { format!("r=\"{r}\" fill=\"#fff\" stroke=\"{c}\" stroke-width=\"1.5\"") } else { format!("r=\"{r}\" fill=\"{c}\"") }
}

fn dash_attr(path: &str) -> String {
    match stroke(path).0 {
        "" => String::new(),
        d => format!(" stroke-dasharray=\"{d}\""),
    }
}

/// One line of a panel: a path and its (size in bytes, value) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub path: String,
    pub points: Vec<(f64, f64)>,
}

/// A log–log panel.
pub struct Panel<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<Series>,
    /// Tick positions of the x axis (the sizes swept).
    pub x_ticks: Vec<f64>,
    pub y_format: fn(f64) -> String,
    /// Appended to values in tooltips when the tick labels carry no unit.
    pub y_unit: &'a str,
}

/// Decade range that holds every value (at least one decade wide).
fn decades(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v.log10());
        hi = hi.max(v.log10());
    }
    if !lo.is_finite() {
        return None;
    }
    let (mut lo, mut hi) = (lo.floor(), hi.ceil());
    if hi <= lo {
        lo -= 0.5;
        hi += 0.5;
    }
    Some((lo, hi))
}

fn trim_number(v: f64) -> String {
    let s = units::sig_figs(v, 3);
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// `1e-5` → "10 µs".
pub fn time_tick(seconds: f64) -> String {
    let unit = units::time_unit_for(&[seconds]);
    format!("{} {}", trim_number(seconds / unit.seconds), unit.suffix)
}

/// `2e9` (bytes per second) → "2" (the axis label says GB/s; short ticks leave it room).
pub fn bandwidth_tick(bytes_per_second: f64) -> String {
    trim_number(bytes_per_second / 1e9)
}

fn size_tick(bytes: f64) -> String {
    super::lab::size_label(bytes.round() as u64)
}

impl Panel<'_> {
    /// The panel's SVG group, drawn at (`x0`, `y0`).
    fn svg(&self, x0: f64, y0: f64) -> String {
        let mut s = String::new();
        let _ = write!(s, "<g class=\"panel\" data-panel=\"{}\" transform=\"translate({x0},{y0})\">", self.name);
        let (w, h) = (PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
        let _ = write!(
            s,
            "<text class=\"panel-title\" x=\"{:.1}\" y=\"16\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            MARGIN_L + w / 2.0,
            escape(self.title)
        );
        let xs = decades(self.x_ticks.iter().copied().chain(self.series.iter().flat_map(|se| se.points.iter().map(|p| p.0))));
        let ys = decades(self.series.iter().flat_map(|se| se.points.iter().map(|p| p.1)));
        let _ = write!(
            s,
            "<rect x=\"{MARGIN_L}\" y=\"{MARGIN_T}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"none\" stroke=\"#999\"/>"
        );
        // Axis labels are drawn even when there is nothing to plot.
        let _ = write!(
            s,
            "<text class=\"axis-label\" data-axis=\"x\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            MARGIN_L + w / 2.0,
            PANEL_H - 6.0,
            escape(self.x_label)
        );
        let _ = write!(
            s,
            "<text class=\"axis-label\" data-axis=\"y\" transform=\"translate(14,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            MARGIN_T + h / 2.0,
            escape(self.y_label)
        );
        let (Some((xl, xh)), Some((yl, yh))) = (xs, ys) else {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#777\">no data</text></g>",
                MARGIN_L + w / 2.0,
                MARGIN_T + h / 2.0
            );
            return s;
        };
        let px = |x: f64| MARGIN_L + (x.log10() - xl) / (xh - xl) * w;
        let py = |y: f64| MARGIN_T + h - (y.log10() - yl) / (yh - yl) * h;
        // Y grid at every decade.
        let mut d = yl.ceil();
        while d <= yh + 1e-9 {
            let v = 10f64.powf(d);
            let y = py(v);
            let _ = write!(
                s,
                "<line class=\"grid\" x1=\"{MARGIN_L}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
<text class=\"tick\" data-axis=\"y\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                MARGIN_L + w,
                MARGIN_L - 4.0,
                y + 4.0,
                escape(&(self.y_format)(v))
            );
            d += 1.0;
        }
        for &x in &self.x_ticks {
            let xp = px(x);
            let _ = write!(
                s,
                "<line class=\"grid\" x1=\"{xp:.1}\" x2=\"{xp:.1}\" y1=\"{MARGIN_T}\" y2=\"{:.1}\" stroke=\"#e5e5e5\"/>\
<text class=\"tick\" data-axis=\"x\" x=\"{xp:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                MARGIN_T + h,
                MARGIN_T + h + 14.0,
                escape(&size_tick(x))
            );
        }
        for series in &self.series {
            let c = colour(&series.path);
            let _ = write!(s, "<g class=\"series\" data-path=\"{}\">", escape(&series.path));
            if series.points.len() > 1 {
                let pts: Vec<String> = series.points.iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
                let _ = write!(
                    s,
                    "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.8\"{} points=\"{}\"/>",
                    dash_attr(&series.path),
                    pts.join(" ")
                );
            }
            for (x, y) in &series.points {
                let _ = write!(
                    s,
                    "<circle class=\"point\" data-path=\"{p}\" data-size=\"{x}\" data-value=\"{y:e}\" cx=\"{:.1}\" cy=\"{:.1}\" {}>\
<title>{p} · {} · {}{}</title></circle>",
                    px(*x),
                    py(*y),
                    marker(&series.path),
                    escape(&size_tick(*x)),
                    escape(&(self.y_format)(*y)),
                    escape(self.y_unit),
                    p = escape(&series.path),
                );
            }
            s.push_str("</g>");
        }
        s.push_str("</g>");
        s
    }
}

/// Time and bandwidth against size for every path that worked, with a shared legend.
pub fn benchmark_svg(report: &BenchmarkReport) -> String {
    let working = report.working_paths();
    let series = |bandwidth: bool| -> Vec<Series> {
        working
            .iter()
            .filter_map(|path| {
                let points: Vec<(f64, f64)> = report
                    .sizes
                    .iter()
                    .filter_map(|size| {
                        let row = report.point(*size, path).filter(|r| r.worked())?;
                        let value = if bandwidth { row.bandwidth? } else { row.timing.as_ref()?.median };
                        (value.is_finite() && value > 0.0).then_some((*size as f64, value))
                    })
                    .collect();
                (!points.is_empty()).then(|| Series { path: path.to_string(), points })
            })
            .collect()
    };
    let x_ticks: Vec<f64> = report.measured_sizes().iter().map(|s| *s as f64).collect();
    let time = Panel {
        name: "time",
        title: "time per handoff",
        x_label: "size (bytes)",
        y_label: if report.all_single() { "time (1 sample)" } else { "time (median)" },
        series: series(false),
        x_ticks: x_ticks.clone(),
        y_format: time_tick,
        y_unit: "",
    };
    let bw = Panel {
        name: "bandwidth",
        title: "bandwidth of copying paths",
        x_label: "size (bytes)",
        y_label: "bandwidth (GB/s)",
        series: series(true),
        x_ticks,
        y_format: bandwidth_tick,
        y_unit: " GB/s",
    };
    let per_row = 4usize;
    let legend_rows = working.len().div_ceil(per_row).max(1);
    let width = 2.0 * PANEL_W;
    let height = PANEL_H + 8.0 + legend_rows as f64 * LEGEND_ROW + 6.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"gpushare-plot\" width=\"{width}\" height=\"{height}\" \
viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = write!(
        s,
        "<title>{}: time and bandwidth against size</title>",
        escape(&crate::route::label(&report.source_framework, &report.target_framework))
    );
    s.push_str(&time.svg(0.0, 0.0));
    s.push_str(&bw.svg(PANEL_W, 0.0));
    let _ = write!(s, "<g class=\"legend\" transform=\"translate({MARGIN_L},{})\">", PANEL_H + 8.0);
    for (i, path) in working.iter().enumerate() {
        let (col, row) = (i % per_row, i / per_row);
        let (x, y) = (col as f64 * 150.0, row as f64 * LEGEND_ROW);
        let verdict = report.path_verdict(path);
        let _ = write!(
            s,
            "<g class=\"legend-entry\" data-path=\"{p}\" transform=\"translate({x},{y})\">\
<line x1=\"0\" x2=\"18\" y1=\"5\" y2=\"5\" stroke=\"{c}\" stroke-width=\"2.5\"{d}/>\
<circle cx=\"9\" cy=\"5\" {m}/><text x=\"24\" y=\"9\">{p} ({v})</text></g>",
            p = escape(path),
            c = colour(path),
            d = dash_attr(path),
            m = marker(path),
            v = escape(&verdict),
        );
    }
    if working.is_empty() {
        s.push_str("<text x=\"0\" y=\"9\" fill=\"#777\">no path worked</text>");
    }
    s.push_str("</g></svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::lab::{BenchInput, BenchRun, PathRun};
    use crate::report::Verdict;

    fn report(interrupted_after: usize) -> BenchmarkReport {
        let sizes = vec![4096u64, 1 << 20, 256 << 20];
        let mut points = Vec::new();
        for (i, &size) in sizes.iter().enumerate().take(interrupted_after) {
            let scale = 4f64.powi(i as i32 * 4);
            for (path, verdict, t, bytes) in
                [("dlpack", Verdict::Shared, 3e-6, 0), ("host", Verdict::Copied, 20e-6 * scale, size), ("copy", Verdict::Copied, 5e-6 * scale, size)]
            {
                let run =
                    PathRun { verdict, samples: vec![t, t * 1.01, t * 0.99], bytes_moved: bytes, ..PathRun::new(path) };
                points.push(BenchRun { size, run });
            }
            let na = PathRun { applicable: false, reason: Some("pinned needs CUDA".into()), ..PathRun::new("pinned") };
            points.push(BenchRun { size, run: na });
        }
        BenchmarkReport::from_input(BenchInput {
            source_framework: "torch".into(),
            target_framework: "jax".into(),
            dtype: "float32".into(),
            device: "cpu".into(),
            sizes,
            paths: vec!["dlpack".into(), "host".into(), "pinned".into(), "copy".into()],
            points,
            interrupted: interrupted_after < 3,
            repeat: 3,
            warmup: 1,
        })
    }

    #[test]
    fn one_line_per_working_path_with_a_point_per_size() {
        let svg = benchmark_svg(&report(3));
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        for path in ["dlpack", "host", "copy"] {
            assert!(svg.contains(&format!("<g class=\"legend-entry\" data-path=\"{path}\"")), "{path}");
        }
        assert!(!svg.contains("data-path=\"pinned\""), "paths that never worked are not drawn");
        // Time panel: 3 paths × 3 sizes; bandwidth panel: the 2 copying paths × 3 sizes.
        assert_eq!(svg.matches("<circle class=\"point\"").count(), 9 + 6);
        assert_eq!(svg.matches("<circle class=\"point\" data-path=\"dlpack\"").count(), 3);
        assert_eq!(svg.matches("<circle class=\"point\" data-path=\"host\"").count(), 6);
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(svg.contains(">size (bytes)</text>") && svg.contains(">time (median)</text>"));
        assert!(svg.contains(">bandwidth (GB/s)</text>"));
        assert!(svg.contains(">4 KiB</text>") && svg.contains(">256 MiB</text>"));
        assert!(svg.contains(" µs</text>"));
        assert!(svg.contains("dlpack (shared)") && svg.contains("host (copied)"));
    }

    #[test]
    fn partial_sweeps_and_empty_panels_render() {
        let svg = benchmark_svg(&report(1));
        assert_eq!(svg.matches("<circle class=\"point\" data-path=\"copy\"").count(), 2);
        assert!(!svg.contains("<polyline"), "one point per line draws no line");
        let empty = benchmark_svg(&report(0));
        assert!(empty.contains("no data") && empty.contains("no path worked"));
    }

    #[test]
    fn every_path_is_drawn_its_own_way_so_coinciding_lines_stay_visible() {
        let paths = ["dlpack", "capsule", "cai", "host", "pinned", "copy", "shared", "auto"];
        let looks: Vec<String> = paths.iter().map(|p| format!("{:?}", stroke(p))).collect();
        for (i, a) in looks.iter().enumerate() {
            assert!(!looks[i + 1..].contains(a), "{} is drawn like another path: {a}", paths[i]);
        }
        // dlpack (solid, rings) and shared (dashed, dots) on one CPU sweep, where they coincide.
        let svg = benchmark_svg(&report(3));
        assert!(svg.contains("stroke-dasharray=\"8 3 2 3\""), "host's line is dashed");
        assert!(svg.contains("data-path=\"dlpack\" data-size=\"4096\"") && svg.contains("fill=\"#fff\" stroke=\"#1f77b4\""));
        assert_ne!(stroke("dlpack").0, stroke("shared").0);
    }

    #[test]
    fn ticks() {
        assert_eq!(time_tick(1e-5), "10 µs");
        assert_eq!(time_tick(1e-3), "1 ms");
        assert_eq!(bandwidth_tick(1e8), "0.1");
        assert_eq!(bandwidth_tick(1e12), "1000");
        assert_eq!(size_tick(4096.0), "4 KiB");
        assert_eq!(decades([3e-6, 2e-3].into_iter()), Some((-6.0, -2.0)));
    }
}
