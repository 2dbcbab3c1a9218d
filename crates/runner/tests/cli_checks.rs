//! The `gpushare` command's arguments as users really give them: what Jupyter accepts is
//! accepted, and what cannot work is one clear error before any kernel starts.

mod support;

use support::{Sandbox, read};

#[test]
fn kernel_install_takes_a_name_with_user_or_prefix_as_jupyter_does() {
    let sb = Sandbox::new("install-name");
    // `jupyter kernelspec install --user --name X` and `ipykernel install --prefix DIR --name X`
    // are the everyday spellings.
    let (code, out, err) = sb.gpushare(&["kernel", "install", "--user", "--name", "Mine"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Installed kernelspec mine"), "{out}");
    let spec = read(&sb.path("data/kernels/mine/kernel.json"));
    assert!(spec["argv"].as_array().is_some_and(|a| !a.is_empty()), "{spec}");

    let prefix = sb.path("prefix");
    let (code, _, err) = sb.gpushare(&[
        "kernel", "install", "--prefix", prefix.to_str().unwrap(), "--name", "other", "--display-name", "Other",
    ]);
    assert_eq!(code, 0, "{err}");
    let spec = read(&prefix.join("share/jupyter/kernels/other/kernel.json"));
    assert_eq!(spec["display_name"], "Other");

    // Where to install is still one choice.
    for both in [["--user", "--sys-prefix"], ["--user", "--prefix"]] {
        let mut args = vec!["kernel", "install", both[0], both[1]];
        if both[1] == "--prefix" {
            args.push("/tmp");
        }
        let (code, _, err) = sb.gpushare(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("cannot be used with"), "{err}");
    }
}

/// A bench command that must be refused before any kernel starts: exit 2, one line that says
/// why (printed once), no traceback, no connection file ever written.
fn assert_refused_before_any_kernel(sb: &Sandbox, args: &[&str]) -> String {
    let argv: Vec<&str> = ["bench"].iter().chain(args).copied().collect();
    let (code, out, err) = sb.gpushare(&argv);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() <= 2 && lines[0].starts_with("error: "), "{args:?}: {err}");
    assert!(!err.contains("Traceback"), "{args:?}: {err}");
    assert!(!sb.path("runtime").exists(), "{args:?}: a kernel was started");
    err
}

#[test]
fn sizes_past_what_an_array_can_hold_are_usage_errors() {
    let sb = Sandbox::new("huge-sizes");
    let digits = "9".repeat(400);
    for sizes in ["18446744073709551616", digits.as_str(), "4KiB,18446744073709551616"] {
        let err = assert_refused_before_any_kernel(&sb, &["numpy->torch", "--device", "cpu", "--sizes", sizes]);
        assert!(err.contains("beyond any memory"), "{err}");
    }
}

#[test]
fn sizes_larger_than_the_memory_that_must_hold_them_are_refused_before_any_kernel() {
    let sb = Sandbox::new("big-sizes");
    for sizes in ["1TB", "1TiB", "4KiB,1TiB"] {
        let err = assert_refused_before_any_kernel(&sb, &["numpy->torch", "--device", "cpu", "--sizes", sizes]);
        assert!(err.contains("this machine's memory") && err.contains("bytes) is more than the"), "{err}");
    }
    // Without --device the sweep runs where gpushare.bench would put it: the check still holds.
    let err = assert_refused_before_any_kernel(&sb, &["numpy->torch", "--sizes", "64TiB"]);
    assert!(err.contains("--sizes 64TiB") && err.contains("memory"), "{err}");
}

#[test]
fn a_cuda_device_that_is_not_there_is_refused_before_any_kernel() {
    let sb = Sandbox::new("no-device");
    let status = gpushare_core::cuda::driver_status();
    if status.is_available() {
        // One past the last device.
        let device = format!("cuda:{}", status.device_count());
        let err = assert_refused_before_any_kernel(&sb, &["torch->numpy", "--device", &device]);
        assert!(err.contains("CUDA device"), "{err}");
    } else {
        for device in ["cuda", "cuda:0", "gpu:1"] {
            let err = assert_refused_before_any_kernel(&sb, &["torch->numpy", "--device", device]);
            assert!(err.contains("no CUDA device is usable here") && err.contains("--device cpu"), "{err}");
        }
        let err = assert_refused_before_any_kernel(&sb, &[
            "torch->torch", "--across", "processes", "--device", "cpu", "--worker-device", "cuda:0",
        ]);
        assert!(err.contains("--worker-device cuda:0"), "{err}");
    }
}

#[test]
fn bench_help_shows_the_defaults_gpushare_bench_uses_and_every_framework() {
    let sb = Sandbox::new("bench-help");
    let (code, help, _) = sb.gpushare(&["bench", "--help"]);
    assert_eq!(code, 0);
    for name in ["paddle", "torch", "tf", "jax", "numpy", "cupy", "numba"] {
        assert!(help.contains(name), "{name} missing from: {help}");
    }
    let script = "import inspect, json, gpushare\n\
                  p = inspect.signature(gpushare.bench).parameters\n\
                  print(json.dumps({k: p[k].default for k in ('sizes', 'dtype', 'device', 'paths')}))\n";
    let out = std::process::Command::new(support::python()).args(["-c", script]).output().unwrap();
    if !out.status.success() {
        eprintln!("skipped the comparison with Python: gpushare.bench not importable");
        return;
    }
    let defaults: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sizes: Vec<&str> = defaults["sizes"].as_array().unwrap().iter().filter_map(|s| s.as_str()).collect();
    let shown = |text: &str| help.contains(&format!("[default: {text}]"));
    assert!(shown(&sizes.join(",")), "sizes {sizes:?}: {help}");
    assert!(shown(defaults["dtype"].as_str().unwrap()), "dtype {}: {help}", defaults["dtype"]);
    assert!(shown(defaults["paths"].as_str().unwrap()), "paths {}: {help}", defaults["paths"]);
    assert!(defaults["device"].is_null() && shown("cuda:0 when CUDA is usable, else cpu"), "{help}");
}

#[test]
fn a_pair_that_lost_its_quotes_to_the_shell_gets_a_hint_to_quote_it() {
    let sb = Sandbox::new("unquoted");
    // Exactly what a user types: the shell splits off `>jax` as a redirection.
    let line = format!("'{}' bench torch->jax", env!("CARGO_BIN_EXE_gpushare"));
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .current_dir(&sb.dir)
        .env("JUPYTER_RUNTIME_DIR", sb.path("runtime"))
        .output()
        .expect("running sh");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(sb.path("jax").exists(), "the shell made the file the hint speaks of");
    assert!(err.contains("lost its quotes") && err.contains("gpushare bench 'torch->jax'"), "{err}");
    assert!(!sb.path("runtime").exists(), "a kernel was started");
}

#[test]
fn bench_results_that_cannot_be_written_fail_the_command() {
    if !support::gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("bench-full");
    let sweep = ["bench", "numpy->torch", "--sizes", "4KiB", "--device", "cpu", "--paths", "dlpack", "--kernel", "python3"];
    for (option, what) in [("--json", "/dev/full"), ("--html", "/dev/full")] {
        let mut args = sweep.to_vec();
        args.extend([option, what]);
        let (code, _, err) = sb.gpushare(&args);
        assert_eq!(code, 1, "{option}: {err}");
        assert!(err.contains("writing /dev/full") && err.contains("No space left"), "{option}: {err}");
    }
    // The table, or `--json -`, to a stdout on a full disk.
    for extra in [&[][..], &["--json", "-"][..]] {
        let mut args = sweep.to_vec();
        args.extend(extra);
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = sb.binary(&args).stdout(full).output().expect("running gpushare");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains("stdout") && err.contains("No space left"), "{extra:?}: {err}");
    }
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = sb.binary(&["doctor", "--kernel", "python3"]).stdout(full).output().expect("running gpushare");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "doctor: {err}");
    assert!(err.contains("writing the report to stdout"), "doctor: {err}");
}

/// `gpushare worker --device` reads a device as every other option does, before Python starts:
/// `gpu:1` is `cuda:1`, and a name no option accepts is one usage line.
#[test]
fn a_workers_device_is_checked_by_the_one_device_parser() {
    let sb = Sandbox::new("worker-device");
    let (code, _, err) = sb.gpushare(&["worker", "--listen", "127.0.0.1:1", "--device", "tpu:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--device") && err.contains("unknown device \"tpu:1\""), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
}
