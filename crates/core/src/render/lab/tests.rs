use super::*;
use super::columns::bytes_in;
use crate::report::{TensorReport, Verdict};

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
    let verdict = match verdict {
        "shared" => Verdict::Shared,
        "copied" => Verdict::Copied,
        _ => Verdict::Failed,
    };
    PathRun { verdict, samples: samples.to_vec(), loops: 10, bytes_moved: bytes, ..PathRun::new(path) }
}

pub(crate) fn comparison() -> ComparisonReport {
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
    // The time columns share the median's unit, said once; the why is on a line of its own.
    for col in ["path", "verdict", "moved (KiB)", "median (µs)", "min", "IQR", "GB/s"] {
        assert!(header.contains(col), "{col} missing in {header}");
    }
    assert!(!header.contains("why") && !header.contains("min (µs)"), "{header}");
    assert!(text.contains("★  copy"), "{text}");
    // The path that cannot run here is no row: one footnote with its short reason.
    assert!(!text.lines().any(|l| l.starts_with("   pinned")), "{text}");
    assert!(text.contains("Not applicable here (not run): pinned (pinned needs CUDA: libcuda not found)."), "{text}");
    assert!(!text.contains("failed") && !text.contains('✗'), "{text}");
    assert!(text.contains("dlpack (auto)"));
    // copy was ★ fastest: the footer says why auto did not take it.
    assert!(text.contains("auto picks dlpack: copy was faster but copies, and a copy is taken only when no path shares."), "{text}");
    // The host row in µs, three significant figures; copy's bandwidth in GB/s.
    let host = text.lines().find(|l| l.contains("host")).unwrap();
    assert!(host.contains("40.0") && host.contains("0.102"), "{host}");
}

#[test]
fn comparison_html_highlights_the_fastest_and_json_has_the_schema() {
    let c = comparison();
    let html = c.html();
    // The highlight is a class and an inline style (JupyterLab drops <style> in untrusted notebooks).
    assert!(html.contains(&format!("<tr class=\"best\" style=\"{}\" data-path=\"copy\">", crate::render::BEST_STYLE)));
    assert!(html.contains("<b>★ copy</b>"));
    // A path that cannot run here is a grey footnote, never a row in the failure's red.
    assert!(!html.contains("data-path=\"pinned\"") && !html.contains("class=\"failed\""), "{html}");
    assert!(html.contains("<div class=\"gpushare-note\" style=\"color:#6e7781\">Not applicable here (not run): pinned"), "{html}");
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

pub(crate) fn bench() -> BenchmarkReport {
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
    // The unit once, in the table's title; the columns are the paths that apply here.
    assert!(text.lines().nth(1).unwrap().ends_with("median time per handoff (µs)"), "{text}");
    let header = text.lines().nth(2).unwrap();
    assert!(header.contains("dlpack") && header.contains("host") && !header.contains("(µs)"), "{header}");
    assert!(!header.contains("pinned"), "{header}");
    assert!(text.contains("4 KiB") && text.contains("256 MiB"));
    assert!(text.contains("★ 2.00"), "{text}");
    assert!(text.contains("bandwidth of the copies, in GB/s"), "{text}");
    assert!(text.contains("Not applicable here (not run): pinned (pinned needs CUDA: no driver)."), "{text}");
    assert!(!text.contains("failed"), "{text}");
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
    // The plot is an image (an untrusted notebook drops inline <svg>), and it is the same SVG.
    assert!(!html.contains("<svg"));
    let src = html.split("src=\"data:image/svg+xml;base64,").nth(1).expect("the plot as a data URI");
    let encoded = &src[..src.find('"').unwrap()];
    assert_eq!(encoded, crate::render::base64(crate::render::plot::benchmark_svg(&bench()).as_bytes()));
    assert!(html.contains("Not applicable here (not run): pinned (pinned needs CUDA: no driver)."), "{html}");
    assert!(!html.contains("<li><b>pinned</b>") && !html.contains("class=\"failed\""), "{html}");
}

#[test]
fn byte_units() {
    assert_eq!(byte_unit_for(&[0, 4096, 1 << 20]).suffix, "KiB");
    assert_eq!(byte_unit_for(&[0]).suffix, "B");
    assert_eq!(bytes_in(4096, byte_unit_for(&[4096])), "4");
    assert_eq!(bytes_in(1 << 20, byte_unit_for(&[4096])), "1024");
}

#[test]
fn no_star_for_paths_within_each_others_spread() {
    let c = ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![
            run("dlpack", "shared", &[77e-6, 50e-6, 90e-6, 60e-6], 0),
            run("host", "copied", &[56e-6, 70e-6, 52e-6, 80e-6], 4096),
            run("copy", "copied", &[500e-6, 510e-6, 490e-6, 505e-6], 4096),
        ],
        repeat: 4,
        warmup: 1,
    });
    assert_eq!(c.fastest, None, "host ★56 over dlpack 77 was noise");
    let tied: Vec<&str> = c.rows.iter().filter(|r| r.tied).map(|r| r.path.as_str()).collect();
    assert_eq!(tied, ["dlpack", "host"]);
    let text = c.text();
    assert!(!text.contains('★') || text.contains("No ★"), "{text}");
    assert!(text.contains("dlpack ≈ host"), "{text}");
}

#[test]
fn one_sample_is_too_few_to_name_a_winner() {
    let c = ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![run("dlpack", "shared", &[1e-6], 0), run("host", "copied", &[50e-6], 4096)],
        repeat: 1,
        warmup: 1,
    });
    assert_eq!(c.fastest, None);
}

#[test]
fn a_row_from_another_source_is_shown_but_not_ranked() {
    let mut shared = run("shared", "shared", &[1e-7, 1e-7, 1e-7, 1e-7], 0);
    shared.comparable = false;
    let c = ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![run("dlpack", "shared", &[2e-6, 2e-6, 2e-6, 2e-6], 0), run("host", "copied", &[4e-5; 4], 4096), shared],
        repeat: 4,
        warmup: 1,
    });
    assert_eq!(c.fastest.as_deref(), Some("dlpack"));
}

#[test]
fn a_one_point_sweep_keeps_its_samples_and_counts_in_the_singular() {
    let mut point = run("dlpack", "shared", &[1.5e-6, 2.25e-6, 3e-6], 0);
    point.device_samples = Some(vec![1e-6, 1e-6, 1e-6]);
    point.auto = true;
    let report = BenchmarkReport::from_input(BenchInput {
        source_framework: "torch".into(),
        target_framework: "cupy".into(),
        dtype: "float32".into(),
        device: "cuda:0".into(),
        sizes: vec![4096],
        paths: vec!["dlpack".into()],
        points: vec![BenchRun { size: 4096, run: point }],
        interrupted: false,
        repeat: 3,
        warmup: 1,
    });
    assert_eq!(report.points[0].size, 4096);
    assert_eq!(report.points[0].row.timing.as_ref().unwrap().samples, vec![1.5e-6, 2.25e-6, 3e-6]);
    assert!(report.points[0].row.device_timing.is_some());
    // One size and one path are counted in the singular, not "1 sizes".
    assert!(report.caption().ends_with("· 1 size × 1 path"), "{}", report.caption());
}

/// One call timed once per path (`-n1 -r1`): the tables say "1 sample", never median or min.
fn single(path: &str, verdict: &str, seconds: f64, bytes: u64) -> PathRun {
    let mut r = run(path, verdict, &[seconds], bytes);
    r.loops = 1;
    r
}

#[test]
fn comparison_of_single_samples_says_1_sample_not_median() {
    let c = ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![single("dlpack", "shared", 2e-6, 0), single("host", "copied", 40e-6, 4096)],
        repeat: 1,
        warmup: 1,
    });
    for out in [c.text(), c.html()] {
        assert!(out.contains("time (µs)") && out.contains("1 sample"), "{out}");
        assert!(!out.contains("median") && !out.contains("minimum"), "{out}");
        assert!(out.contains("—"), "min and IQR of one sample are dashes: {out}");
    }
    // Several samples still read as medians.
    let many = comparison().text();
    assert!(many.contains("median (µs)") && !many.contains("1 sample"), "{many}");
}

#[test]
fn bench_of_single_samples_says_1_sample_not_median() {
    let mut points = Vec::new();
    for size in [4096u64, 1 << 20] {
        points.push(BenchRun { size, run: single("dlpack", "shared", 2e-6, 0) });
        points.push(BenchRun { size, run: single("host", "copied", 30e-6, size) });
    }
    let b = BenchmarkReport::from_input(BenchInput {
        source_framework: "torch".into(),
        target_framework: "jax".into(),
        dtype: "float32".into(),
        device: "cpu".into(),
        sizes: vec![4096, 1 << 20],
        paths: vec!["dlpack".into(), "host".into()],
        points,
        interrupted: false,
        repeat: 1,
        warmup: 1,
    });
    for out in [b.text(), b.html()] {
        assert!(out.contains("time per handoff (1 sample)") && out.contains("1 sample (one call, timed once"), "{out}");
        assert!(!out.contains("median"), "{out}");
    }
    // The plot's axis, in the SVG the HTML carries as an image (JupyterLab drops inline <svg> in
    // untrusted notebooks).
    assert!(crate::render::plot::benchmark_svg(&b).contains("time (1 sample)"));
    assert!(bench().text().contains("median time per handoff"));
}

#[test]
fn a_faster_row_auto_left_for_its_ordering_is_explained_in_the_footer() {
    // torch→jax on a GPU: cai shares and is faster, but JAX ignores the interface's stream.
    let mut auto = run("dlpack", "shared", &[30e-6, 31e-6, 29e-6, 30e-6], 0);
    auto.auto = true;
    let mut cai = run("cai", "shared", &[15e-6, 15.5e-6, 14.5e-6, 15e-6], 0);
    cai.ordering = Some(crate::advice::model::Ordering::Unordered.describe().into());
    let mut capsule = run("capsule", "shared", &[60e-6, 61e-6, 59e-6, 60e-6], 0);
    capsule.ordering = Some(crate::advice::model::Ordering::HostSynchronise.describe().into());
    let c = ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![auto, cai, capsule],
        repeat: 4,
        warmup: 1,
    });
    assert_eq!(c.fastest.as_deref(), Some("cai"));
    let text = c.text();
    assert!(text.contains("auto picks dlpack: cai was faster but nothing the consumer honours orders its handoff"), "{text}");
}

/// A comparison as `compare(x, "jax")` gives it on a machine without CUDA: long reasons, a copy
/// by design with the path table's words, host-memory ordering words on every row.
fn wordy_comparison() -> ComparisonReport {
    let host_order = crate::advice::model::Ordering::None.describe().to_string();
    let mut dlpack = run("dlpack", "shared", &[143e-6, 71e-6, 300e-6, 90e-6, 200e-6], 0);
    dlpack.auto = true;
    dlpack.ordering = Some(host_order.clone());
    let mut host = run("host", "copied", &[257e-6, 43e-6, 400e-6, 100e-6], 4096);
    host.reason = Some(crate::paths::copied_by_design(crate::paths::PathKind::Share, "host").unwrap().into());
    host.ordering = Some(host_order);
    let mut cai = run("cai", "failed", &[], 0);
    cai.applicable = false;
    cai.reason = Some("cai needs an array in CUDA memory; this torch array has no __cuda_array_interface__ (Can't get __cuda_array_interface__ on non-CUDA tensor type: torch.FloatTensor If CUDA data is required use tensor.cuda() to copy tensor to device memory.)".into());
    ComparisonReport::from_input(ComparisonInput {
        source: tensor(),
        target_framework: "jax".into(),
        runs: vec![dlpack, cai, host],
        repeat: 4,
        warmup: 1,
    })
}

#[test]
fn comparison_text_fits_100_columns_with_the_why_on_its_own_lines() {
    let text = wordy_comparison().text();
    for line in text.lines() {
        assert!(line.chars().count() <= crate::render::TEXT_WIDTH, "{} columns: {line}\n{text}", line.chars().count());
    }
    // Wrapped at word boundaries: every word of the long reason is whole on some line.
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(words.iter().any(|w| w.starts_with("__cuda_array_interface__")), "{text}");
    // The noisy row's warning is on the line under that row, not in a column.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.contains("dlpack (auto)")).unwrap();
    assert!(lines[at + 1].starts_with("     ⚠ noisy"), "{text}");
    // Host memory has no queue: no ordering words; a copy by design says so once, without ✗.
    assert!(!text.contains("ordered by") && !text.contains("queue"), "{text}");
    assert!(text.contains("copied (by design)") && !text.contains('✗'), "{text}");
    assert!(text.contains("the naive route through NumPy on the host") && !text.contains("copied by design:"), "{text}");
    // The noisy note names the rows it concerns.
    assert!(text.split_whitespace().collect::<Vec<_>>().join(" ").contains("on the row of dlpack, host"), "{text}");
}

#[test]
fn a_starred_copy_is_explained_where_it_is_starred() {
    let c = comparison();
    assert_eq!(c.fastest.as_deref(), Some("copy"));
    let text = c.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("★ on copy, a copy: at 4.00 KiB copying the bytes cost less"), "{text}");
    let mut b = bench();
    // host starred at 4 KiB in a sweep (make demo's): the note names the size.
    for p in b.points.iter_mut() {
        p.row.fastest = p.row.path == "host" && p.size == 4096;
    }
    let text = b.text().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("★ on host, a copy: at 4 KiB"), "{text}");
}

#[test]
fn at_an_interrupted_size_the_only_path_measured_gets_no_star() {
    let mut points = Vec::new();
    for size in [4096u64, 1 << 20] {
        points.push(BenchRun { size, run: run("dlpack", "shared", &[2e-6; 3], 0) });
    }
    points.push(BenchRun { size: 4096, run: run("host", "copied", &[40e-6; 3], 4096) });
    let b = BenchmarkReport::from_input(BenchInput {
        source_framework: "torch".into(),
        target_framework: "numpy".into(),
        dtype: "float32".into(),
        device: "cpu".into(),
        sizes: vec![4096, 1 << 20],
        paths: vec!["dlpack".into(), "host".into()],
        points,
        interrupted: true,
        repeat: 3,
        warmup: 1,
    });
    assert!(b.point(4096, "dlpack").unwrap().fastest);
    assert!(!b.point(1 << 20, "dlpack").unwrap().fastest, "dlpack was measured alone at 1 MiB");
    let text = b.text();
    assert_eq!(text.matches('★').count(), 1 + text.matches("no ★").count() + text.matches("★ fastest").count(), "{text}");
    assert!(text.split_whitespace().collect::<Vec<_>>().join(" ").contains("at 1 MiB not every path was measured"), "{text}");
}

#[test]
fn a_warning_mark_is_in_the_title_only_where_a_cell_carries_it() {
    let b = bench();
    let text = b.text();
    assert!(!text.contains('⚠'), "nothing noisy, nothing predicted: {text}");
    let mut points = Vec::new();
    for size in [4096u64, 1 << 20] {
        points.push(BenchRun { size, run: run("dlpack", "shared", &[2e-6; 3], 0) });
        let noisy: &[f64] = if size == 4096 { &[10e-6, 40e-6, 90e-6, 20e-6] } else { &[50e-6; 3] };
        points.push(BenchRun { size, run: run("host", "copied", noisy, size) });
    }
    let b = BenchmarkReport::from_input(BenchInput { points, ..bench_input() });
    let text = b.text();
    let title = text.lines().nth(1).unwrap();
    assert!(title.contains("⚠ noisy"), "{text}");
    let row = text.lines().find(|l| l.starts_with("4 KiB")).unwrap();
    assert!(row.contains("⚠"), "the cell carries the mark: {text}");
    assert!(!text.lines().find(|l| l.starts_with("1 MiB")).unwrap().contains('⚠'), "{text}");
    assert!(text.contains("host at 4 KiB"), "the note names the row: {text}");
}

fn bench_input() -> BenchInput {
    BenchInput {
        source_framework: "torch".into(),
        target_framework: "numpy".into(),
        dtype: "float32".into(),
        device: "cpu".into(),
        sizes: vec![4096, 1 << 20],
        paths: vec!["dlpack".into(), "host".into()],
        points: Vec::new(),
        interrupted: false,
        repeat: 3,
        warmup: 1,
    }
}

/// The width JupyterLab gives a bench table, from its HTML: per column the widest cell (0.6 em a
/// monospace character at 12 px; a text cell at least its min-width), plus 8 px of padding.
fn estimated_width_px(html: &str) -> f64 {
    let char_px = 0.6 * 12.0;
    let mut widths: Vec<f64> = Vec::new();
    for row in html.split("<tr").skip(1) {
        let row = &row[..row.find("</tr>").unwrap_or(row.len())];
        for (c, cell) in row.split("<t").skip(1).filter(|c| c.starts_with('d') || c.starts_with('h')).enumerate() {
            let open = cell.find('>').unwrap();
            let style = &cell[..open];
            let text = &cell[open + 1..cell.find("</t").unwrap_or(cell.len())];
            let text = text.replace("<b>", "").replace("</b>", "").replace("&#39;", "'").replace("&amp;", "&");
            // A cell that may wrap at spaces is as wide as its longest word.
            let chars = if style.contains("white-space:normal") {
                text.split(' ').map(|w| w.chars().count()).max().unwrap_or(0)
            } else {
                text.chars().count()
            } as f64;
            let min = if style.contains("min-width:6.1em") { 6.1 * 12.0 } else { 0.0 };
            let w = (chars * char_px).max(min) + 8.0;
            if widths.len() <= c {
                widths.push(w);
            } else {
                widths[c] = widths[c].max(w);
            }
        }
    }
    widths.iter().sum()
}

#[test]
fn a_sweep_of_all_seven_paths_fits_a_592_px_output() {
    // On a GPU every share path applies: seven columns, 4 KiB to 256 MiB, one of them copying in ms.
    let paths = ["dlpack", "capsule", "cai", "host", "pinned", "copy", "shared"];
    let sizes = [4096u64, 1 << 20, 64 << 20, 256 << 20];
    let mut points = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        for (j, path) in paths.iter().enumerate() {
            let copies = ["host", "pinned", "copy"].contains(path);
            let t = if copies { 12e-6 * 8f64.powi(i as i32) * (1.0 + j as f64 / 10.0) } else { 9.5e-6 + j as f64 * 1e-6 };
            let mut r = run(path, if copies { "copied" } else { "shared" }, &[t, t * 1.01, t * 0.99], if copies { size } else { 0 });
            r.comparable = *path != "shared";
            points.push(BenchRun { size, run: r });
        }
    }
    let b = BenchmarkReport::from_input(BenchInput {
        source_framework: "torch".into(),
        target_framework: "cupy".into(),
        dtype: "float32".into(),
        device: "cuda:0".into(),
        sizes: sizes.to_vec(),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        points,
        interrupted: false,
        repeat: 3,
        warmup: 1,
    });
    let html = b.html();
    for table in html.split("<table").skip(1) {
        let width = estimated_width_px(table);
        assert!(width <= 592.0, "{width:.0} px wide:\n{table}");
    }
    for line in b.text().lines() {
        assert!(line.chars().count() <= crate::render::TEXT_WIDTH, "{line}");
    }
}

#[test]
fn a_calibrated_cuda_comparison_still_fits_100_columns() {
    // Every optional column: a prediction (one missed, ⚠) and device time, on a GPU.
    let p = |s: f64| crate::advice::model::Prediction { seconds: s, fixed: s, bandwidth: None, rate: None, bound: "fixed cost".into(), tolerance: 0.3, extrapolated: false, extrapolated_from: None, unpredictable: None, unlike_its_fit: false, waits_for_queue: 0.0, host_slowdown: None, ..Default::default() };
    let mut runs = Vec::new();
    for (path, verdict, t, bytes) in [("dlpack", "shared", 12.5e-6, 0u64), ("capsule", "shared", 11.0e-6, 0), ("pinned", "copied", 1234.5e-6, 64 << 20), ("copy", "copied", 456.7e-6, 64 << 20)] {
        let mut r = run(path, verdict, &[t, t * 1.01, t * 0.99, t], bytes);
        r.device_samples = Some(vec![t * 0.5; 4]);
        r.predicted = Some(p(if path == "copy" { t * 3.0 } else { t }));
        r.auto = path == "dlpack";
        if bytes > 0 {
            r.reason = Some("copied by design: staged through page-locked host memory by gpushare".into());
        }
        runs.push(r);
    }
    let c = ComparisonReport::from_input(ComparisonInput { source: tensor(), target_framework: "cupy".into(), runs, repeat: 4, warmup: 1 });
    let text = c.text();
    // The prediction stays a column; the device time moves to the row's sub-line rather than
    // widening the table past the terminal.
    assert!(text.lines().nth(1).unwrap().contains("predicted"), "{text}");
    assert!(text.contains("     device 6.25 µs"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= crate::render::TEXT_WIDTH, "{} columns: {line}\n{text}", line.chars().count());
    }
}

#[test]
fn each_row_shows_its_own_prediction_and_device_time_past_a_path_that_does_not_apply() {
    // The fixture's rows: dlpack, host, pinned (not applicable: folded into a footnote), copy. The
    // predicted and device cells of copy are copy's, not those of the pinned row before it.
    let mut c = comparison();
    let prediction = |seconds: f64| crate::advice::model::Prediction {
        seconds, fixed: seconds, bound: "fixed cost".into(), tolerance: 0.2, ..Default::default()
    };
    for (row, seconds) in c.rows.iter_mut().zip([2e-6, 40e-6, 7e-6, 1.5e-6]) {
        row.predicted = Some(prediction(seconds));
        row.device_timing = row.timing.clone();
    }
    c.rows[2].device_timing = None;
    let text = c.text();
    let copy = text.lines().find(|l| l.contains("copy")).unwrap();
    let header = text.lines().nth(1).unwrap();
    assert!(header.contains("predicted"), "{text}");
    // Every cell of the copy row reads 1.50 (median, min, predicted), never pinned's 7.00 or a dash.
    assert!(!copy.contains("7.00") && !copy.contains(" - "), "{text}");
    let predicted = |line: &str| line.split_whitespace().filter(|w| *w == "1.50").count();
    assert!(predicted(copy) >= 3, "median, min and predicted of copy in {copy:?}:\n{text}");
    let html = c.html();
    let copy_row = html.split("data-path=\"copy\"").nth(1).unwrap().split("</tr>").next().unwrap();
    assert!(!copy_row.contains("7.00") && copy_row.matches("1.50").count() >= 3, "{copy_row}");
}

#[test]
fn a_folded_cell_has_its_unit_after_the_number_and_words_take_none() {
    assert_eq!(super::comparison::with_unit("20.0 ⚠", "µs"), "20.0 µs ⚠");
    assert_eq!(super::comparison::with_unit("20.0", "µs"), "20.0 µs");
    assert_eq!(super::comparison::with_unit(crate::advice::model::UNPREDICTABLE_CELL, "µs"), "not within 2x");
}

#[test]
fn the_html_marks_tied_rows_as_the_text_does() {
    let mut c = comparison();
    c.rows[1].tied = true;
    c.rows[3].tied = true;
    let html = c.html();
    let host = html.split("data-path=\"host\"").nth(1).unwrap().split("</td>").next().unwrap();
    assert!(host.ends_with("≈ host"), "{host}");
}

#[test]
fn the_predicted_table_takes_its_unit_from_the_numbers_it_shows() {
    // One prediction given as words (400 ns, not within 2x) does not make the table's unit ns.
    let mut b = bench();
    let p = |seconds: f64, unpredictable: Option<&str>| crate::advice::model::Prediction {
        seconds, fixed: seconds, bound: "fixed cost".into(), tolerance: 0.2,
        unpredictable: unpredictable.map(str::to_string), ..Default::default()
    };
    for point in b.points.iter_mut().filter(|p| p.row.path == "host") {
        point.row.predicted = Some(p(2e-3, None));
    }
    b.points[0].row.predicted = Some(p(400e-9, Some("its fit missed sizes it did not see")));
    let text = b.text();
    let title = text.lines().find(|l| l.starts_with("predicted before it ran")).expect("the predicted table");
    assert!(!title.contains("(ns)"), "{text}");
    assert!(text.contains("not within 2x") && !text.contains("2000000"), "{text}");
}

#[test]
fn a_strided_arrays_caption_gives_its_bytes_not_its_span() {
    let mut c = comparison();
    // Every third float32 of ten: 4 elements, 16 bytes, spanning 40.
    c.source.shape = vec![4];
    c.source.strides = vec![3];
    c.source.nbytes = 40;
    c.source.contiguous = false;
    assert_eq!(c.source.payload_bytes(), 16);
    assert!(c.text().starts_with("torch → jax · float32 (4,) on cpu:0 · 16 B"), "{}", c.text());
    // A reversed view spans what it holds; a broadcast one holds more than it spans.
    c.source.strides = vec![-1];
    c.source.nbytes = 16;
    assert_eq!(c.source.payload_bytes(), 16);
    c.source.strides = vec![0];
    c.source.nbytes = 4;
    assert_eq!(c.source.payload_bytes(), 16);
    c.source.shape = vec![0];
    assert_eq!(c.source.payload_bytes(), 0);
}
