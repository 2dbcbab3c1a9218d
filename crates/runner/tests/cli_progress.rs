//! What `gpushare` shows while it works, on a real terminal (`script` gives it a pseudo-terminal)
//! and under Ctrl-C: one bar counting points, nothing with `NO_COLOR`, and the partial table.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{Sandbox, code, gpushare_has, notebook};

/// `gpushare ARGS…` on a pseudo-terminal: exit code and everything it drew there. `None` when
/// there is no `script` (util-linux) to make one.
fn on_terminal(sb: &Sandbox, args: &str, no_color: Option<&str>) -> Option<(Option<i32>, String)> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) for a pseudo-terminal");
        return None;
    }
    let line = format!("'{}' {args}", env!("CARGO_BIN_EXE_gpushare"));
    let mut command = Command::new("script");
    command.args(["-qec", &line, "/dev/null"]).current_dir(&sb.dir).env_clear().envs(sb.env.vars());
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    let out = command.output().expect("running script");
    Some((out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[test]
fn a_sweep_on_a_terminal_draws_one_bar_that_counts_points() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("one-bar");
    let Some((code, screen)) = on_terminal(
        &sb,
        "bench 'numpy->torch' --sizes 4KiB,64KiB,1MiB --device cpu --paths dlpack,copy --kernel python3",
        None,
    ) else {
        return;
    };
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("starting kernel"), "the bar covers the kernel's start: {screen}");
    assert!(screen.contains("/6 points"), "the same bar counts the sweep's 6 points: {screen}");
    // Not a bar of cells first (`0/0 cells`), nor the kernel's own second bar.
    assert!(!screen.contains("cells") && !screen.contains("0/0"), "{screen}");
    assert!(!screen.contains("%|") && !screen.contains("sharebench numpy"), "{screen}");
    assert!(screen.contains("median time per handoff"), "{screen}");
}

#[test]
fn no_color_turns_the_progress_bar_off_as_the_readme_says() {
    let sb = Sandbox::new("no-color-bar");
    let input = sb.write_notebook("p.ipynb", &notebook(vec![code("import time\ntime.sleep(1)")]));
    let args = format!("run '{}'", input.display());
    let Some((code, screen)) = on_terminal(&sb, &args, None) else {
        return;
    };
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("starting kernel"), "a terminal gets the bar: {screen}");
    let (code, screen) = on_terminal(&sb, &args, Some("1")).unwrap();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("starting kernel") && !screen.contains("/1 cells"), "NO_COLOR=1 kept the bar: {screen}");
    assert!(screen.contains("1 cells ran"), "{screen}");
}

#[test]
fn ctrl_c_in_bench_prints_the_points_measured_and_no_generated_code() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("ctrlc-partial");
    // Large enough that the sweep is still running when Ctrl-C comes (NumPy imports in a blink).
    let sizes = (1..=60).map(|k| format!("{}MiB", k * 16)).collect::<Vec<_>>().join(",");
    // The signal must land in the sweep, after its first point: one that lands in the kernel's
    // start ends the run with nothing measured. Each attempt waits longer than the one before.
    let (mut code, mut err, mut out, mut began) = (None, String::new(), String::new(), Instant::now());
    for attempt in 0..4 {
        let _ = std::fs::remove_file(sb.path("partial.json"));
        let child = sb
            .binary(&["bench", "numpy->numpy", "--sizes", &sizes, "--device", "cpu", "--paths", "dlpack,copy",
                      "--kernel", "python3", "--json", "partial.json"])
            .spawn()
            .expect("starting gpushare");
        sb.wait_for_kernel();
        std::thread::sleep(Duration::from_secs(4 << attempt));
        began = Instant::now();
        // SAFETY: kill(2) on our own child, which has not been reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let output = child.wait_with_output().expect("waiting for gpushare");
        code = output.status.code();
        err = String::from_utf8_lossy(&output.stderr).into_owned();
        out = String::from_utf8_lossy(&output.stdout).into_owned();
        if err.contains("points measured") {
            break;
        }
    }
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(began.elapsed() < Duration::from_secs(30), "slow to stop");
    // The table of what was measured, as `%sharebench?` promises.
    assert!(out.contains("median time per handoff") && out.contains("16 MiB"), "{out}\n{err}");
    assert!(err.contains("points measured") && err.contains("interrupted"), "{err}");
    // The warning is the user's to read, not a quote of the code the CLI generated.
    for generated in ["_b =", "gpushare.bench(", "_gs_", ".py:"] {
        assert!(!err.contains(generated), "{generated:?} in: {err}");
    }
    assert!(!err.contains("Traceback") && !err.contains("KeyboardInterrupt"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path("partial.json")).unwrap()).unwrap();
    assert_eq!(json["data"]["interrupted"], true, "{json}");
    sb.assert_runtime_dir_clean();
}
