//! The `gpushare` binary as a user runs it: real processes, real pipes, real signals, real kernels.
//!
//! `crates/runner/tests/kernel_runner.rs` calls `run_with` in-process; these tests spawn
//! `env!("CARGO_BIN_EXE_gpushare")` (and the Python console script) so that what depends on the
//! process itself is covered: whether stdout/stderr are terminals, `NO_COLOR`, SIGINT, `-` as stdout.
//! Python comes from `$GPUSHARE_PYTHON`, else the project's `.venv`; tests that need an importable
//! gpushare in the kernel say "skipped" and return without it, as kernel_runner.rs does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

fn python() -> PathBuf {
    std::env::var_os("GPUSHARE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

/// `$PREFIX/share/jupyter` holding ipykernel's own `python3` kernelspec for the test Python,
/// installed once per run under cargo's target tmp dir.
fn jupyter_path() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-prefix");
        let out = Command::new(python())
            .args(["-m", "ipykernel", "install", "--name", "python3", "--prefix"])
            .arg(&prefix)
            .output()
            .expect("running python -m ipykernel install");
        assert!(
            out.status.success(),
            "ipykernel install failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        prefix.join("share/jupyter")
    })
}

/// Whether the test Python can import gpushare with `attr`.
fn gpushare_has(attr: &str) -> bool {
    Command::new(python())
        .args(["-c", &format!("import gpushare; gpushare.{attr}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A private working directory, Jupyter runtime dir (where connection files appear while a kernel
/// runs) and data dir, for one test.
struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "gpushare-cli-{tag}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("creating a scratch dir");
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `program ARGS…` in the sandbox with piped stdout and stderr and no terminal anywhere.
    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.dir)
            .env("GPUSHARE_PYTHON", python())
            .env("JUPYTER_PATH", jupyter_path())
            .env("JUPYTER_DATA_DIR", self.path("data"))
            .env("JUPYTER_RUNTIME_DIR", self.path("runtime"))
            .env_remove("GPUSHARE_SYS_PREFIX")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn gpushare(&self, args: &[&str]) -> Command {
        self.command(Path::new(env!("CARGO_BIN_EXE_gpushare")), args)
    }

    /// Run to the end: exit code, stdout, stderr.
    fn run(&self, mut command: Command) -> (Option<i32>, String, String) {
        let Output { status, stdout, stderr } = command.output().expect("running gpushare");
        (
            status.code(),
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }

    /// The connection files in the runtime dir: one per running kernel.
    fn connection_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path("runtime"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Wait until a kernel has been launched (its connection file exists).
    fn wait_for_kernel(&self) {
        let began = Instant::now();
        while self.connection_files().is_empty() {
            assert!(began.elapsed() < Duration::from_secs(60), "no kernel started");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// SIGINT, as Ctrl-C sends it, then wait: exit code and stderr.
fn interrupt(child: Child) -> (Option<i32>, String) {
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().expect("waiting for gpushare");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Output meant for a file or pipe: no ANSI escapes and no carriage-return progress frames.
fn assert_plain(what: &str, text: &str) {
    assert!(!text.contains('\x1b'), "{what} has escape codes: {text:?}");
    assert!(!text.contains('\r'), "{what} has \\r progress frames: {text:?}");
}

#[test]
fn bad_bench_arguments_are_usage_errors_before_any_kernel_starts() {
    let sb = Sandbox::new("usage");
    let cases: [&[&str]; 9] = [
        &["torch->numpy", "--paths", "bogus"],
        &["torch->numpy", "--paths", "dlpack,cia"],
        &["torch->numpy", "--device", "gpu9"],
        &["torch->numpy", "--sizes", "4KiB,lots"],
        &["torch->numpy", "--sizes", ","],
        &["torch->numpy", "--dtype", "float7"],
        &["torch->numpyy"],
        &["torch->jax->tf"],
        &["torch->numpy", "--json", "-", "--html", "-"],
    ];
    for args in cases {
        let argv: Vec<&str> = ["bench"].iter().chain(args).copied().collect();
        let (code, out, err) = sb.run(sb.gpushare(&argv));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        // One line that says what is wrong, then clap's pointer to --help.
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: "), "{args:?}: {err}");
        assert!(
            err.lines().filter(|l| !l.trim().is_empty()).count() <= 2,
            "{args:?}: {err}"
        );
        assert!(!err.contains("Traceback"), "{args:?}: {err}");
        assert_plain("a piped usage error", &err);
        assert!(
            !sb.path("runtime").exists(),
            "{args:?}: a kernel was started"
        );
    }
    // The message names what is wrong and what would be right.
    let (_, _, err) = sb.run(sb.gpushare(&["bench", "torch->numpy", "--paths", "bogus"]));
    assert!(err.contains("bogus") && err.contains("dlpack"), "{err}");
    let (_, _, err) = sb.run(sb.gpushare(&["bench", "torch->numpyy"]));
    assert!(err.contains("numpyy") && err.contains("did you mean 'numpy'"), "{err}");
}

/// Framework names are checked by the adapters' own code in the kernel's Python before any
/// kernel starts: a typo gets the suggestion the magics give, and a framework that is not
/// installed there is named with how to install it, exit 2, in about a Python start-up.
#[test]
fn bench_checks_the_frameworks_before_any_kernel_starts() {
    if !gpushare_has("adapters.framework") {
        eprintln!("skipped: gpushare not importable by the test Python");
        return;
    }
    let sb = Sandbox::new("frameworks");
    let (code, out, err) = sb.run(sb.gpushare(&["bench", "torch->jaxx", "--device", "cpu", "--kernel", "python3"]));
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.starts_with("error: unknown framework 'jaxx'; did you mean 'jax'?"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!sb.path("runtime").exists(), "a kernel was started");
    // A framework gpushare knows that the test Python lacks (the first of these it lacks).
    let missing = ["cupy", "numba", "pycuda"].into_iter().find(|m| {
        !Command::new(python())
            .args(["-c", &format!("import importlib.util, sys; sys.exit(importlib.util.find_spec('{m}') is None)")])
            .status()
            .is_ok_and(|s| s.success())
    });
    let Some(missing) = missing else {
        eprintln!("skipped the missing-framework half: cupy, numba and pycuda are all installed");
        return;
    };
    let pair = format!("numpy->{missing}");
    let (code, out, err) = sb.run(sb.gpushare(&["bench", &pair, "--device", "cpu", "--kernel", "python3"]));
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.starts_with(&format!("error: {missing} is not installed in the kernel's Python")), "{err}");
    assert!(err.contains("pip install"), "{err}");
    assert!(!sb.path("runtime").exists(), "a kernel was started");
}

/// `--json` and `--html` that cannot both be written as asked are usage errors before any
/// kernel starts: one file for both, a directory that does not exist, a directory as the file.
#[test]
fn bench_output_files_are_checked_before_any_kernel_starts() {
    let sb = Sandbox::new("bench-files");
    std::fs::create_dir_all(sb.path("dir")).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--json", "r.out", "--html", "r.out"], "name the same file"),
        (&["--json", "r.out", "--html", "./dir/../r.out"], "name the same file"),
        (&["--json", "missing/r.json"], "does not exist"),
        (&["--html", "dir"], "is a directory"),
    ];
    for (files, says) in cases {
        let argv: Vec<&str> = ["bench", "numpy->torch", "--device", "cpu", "--kernel", "python3"]
            .iter()
            .chain(files)
            .copied()
            .collect();
        let (code, _, err) = sb.run(sb.gpushare(&argv));
        assert_eq!(code, Some(2), "{files:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{files:?}: {err}");
        assert!(!sb.path("runtime").exists(), "{files:?}: a kernel was started");
        assert!(!sb.path("r.out").exists() && !sb.path("missing").exists(), "{files:?}: wrote something");
    }
}

/// Wait until a child process of `parent` has a library whose path contains `name` mapped.
fn wait_for_library_in_child(parent: u32, name: &str) {
    let began = Instant::now();
    loop {
        let children = std::fs::read_dir("/proc").into_iter().flatten().filter_map(Result::ok).filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                // pid (comm) state ppid …; comm may hold spaces, so split after its `)`.
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1).map(String::from))
                    == Some(parent.to_string())
            })
        });
        if children.into_iter().any(|e| std::fs::read_to_string(e.path().join("maps")).is_ok_and(|m| m.contains(name))) {
            return;
        }
        assert!(began.elapsed() < Duration::from_secs(180), "no child of {parent} loaded {name}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGHUP from a closed terminal: the table can no longer reach stdout (a closed pipe here, EIO
/// on a terminal), and `--json` still gets the points measured, as after Ctrl-C.
#[test]
fn sighup_with_stdout_gone_still_writes_the_partial_json() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("sighup-bench");
    let sizes = (1..=60).map(|k| format!("{}KiB", k * 4)).collect::<Vec<_>>().join(",");
    // The signal must land in the sweep: one that lands in the kernel's imports ends the run with
    // nothing measured (and nothing to write). Each attempt waits until the kernel has loaded
    // torch's library, then longer than the one before.
    for attempt in 0..4 {
        let _ = std::fs::remove_file(sb.path("partial.json"));
        let mut child = sb
            .gpushare(&[
                "bench", "numpy->torch", "--sizes", &sizes, "--device", "cpu", "--kernel", "python3",
                "--json", "partial.json",
            ])
            .spawn()
            .expect("starting gpushare bench");
        drop(child.stdout.take());
        wait_for_library_in_child(child.id(), "libtorch");
        std::thread::sleep(Duration::from_secs(2 << attempt));
        // SAFETY: kill(2) on our own child, which has not been reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
        let output = child.wait_with_output().expect("waiting for gpushare");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(sb.connection_files().is_empty(), "connection files left behind");
        if !err.contains("sharebench interrupted") {
            continue; // it landed before the sweep measured anything
        }
        assert_eq!(output.status.code(), Some(129), "{err}");
        let text = std::fs::read_to_string(sb.path("partial.json"))
            .unwrap_or_else(|e| panic!("the JSON was not written ({e}): {err}"));
        let json: Value = serde_json::from_str(&text).expect("the JSON is JSON");
        let points = json.pointer("/data/points").or_else(|| json.get("points")).and_then(Value::as_array);
        assert!(points.is_some(), "{json}");
        if points.is_some_and(|p| p.is_empty()) {
            // It landed in the sweep before its first point was measured (a loaded machine's
            // first point can take longer than the wait): the empty JSON was still written, and
            // the next attempt waits longer for a point to keep.
            continue;
        }
        return;
    }
    panic!("SIGHUP never landed in the sweep after a point was measured, in four attempts");
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    // `script` gives the command a pseudo-terminal, where colour is on unless NO_COLOR says no.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) for a pseudo-terminal");
        return;
    }
    let sb = Sandbox::new("nocolor");
    let on_terminal = |no_color: Option<&str>| {
        // A route without `->`: a usage error whichever other checks exist.
        let line = format!("{} bench torch", env!("CARGO_BIN_EXE_gpushare"));
        let mut command = sb.command(Path::new("script"), &["-qec", &line, "/dev/null"]);
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let (code, out, _) = sb.run(command);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains("SRC->DST"), "{out}");
        out
    };
    // The check can see colour: without NO_COLOR the terminal gets it.
    assert!(on_terminal(None).contains('\x1b'), "no colour on a terminal");
    assert!(!on_terminal(Some("1")).contains('\x1b'), "NO_COLOR=1 still coloured");
    // https://no-color.org: an empty NO_COLOR does not count.
    assert!(on_terminal(Some("")).contains('\x1b'), "NO_COLOR= turned colour off");
}

#[test]
fn a_piped_sweep_has_no_escape_codes_progress_frames_or_tqdm_warnings() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("piped");
    // Spaces around `->` are fine.
    let (code, out, err) = sb.run(sb.gpushare(&[
        "bench",
        "numpy -> torch",
        "--sizes",
        "4KiB,64KiB",
        "--device",
        "cpu",
        "--paths",
        "dlpack,copy",
        "--kernel",
        "python3",
    ]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("dlpack"), "the table is printed: {out}");
    assert_plain("stdout", &out);
    assert_plain("stderr", &err);
    assert!(!err.contains("TqdmWarning") && !err.contains("IProgress"), "{err}");
    assert!(sb.connection_files().is_empty());
}

#[test]
fn a_sweep_in_which_no_cell_succeeds_exits_1_and_says_so() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("nothing");
    // NumPy arrays cannot live on a GPU: every cell fails. Without a CUDA device that sweep is
    // refused before a kernel starts (crates/runner/tests/cli_checks.rs), so the host's way for every cell to
    // fail stands in there: NumPy cannot make bfloat16 arrays.
    let (device, dtype, reason) = if gpushare_core::cuda::driver_status().device_count() > 0 {
        ("cuda:0", "float32", "--device cpu")
    } else {
        ("cpu", "bfloat16", "data type 'bfloat16' not understood")
    };
    let (code, out, err) = sb.run(sb.gpushare(&[
        "bench",
        "numpy->torch",
        "--sizes",
        "4KiB",
        "--device",
        device,
        "--dtype",
        dtype,
        "--paths",
        "dlpack,copy",
        "--kernel",
        "python3",
        "--json",
        "b.json",
    ]));
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(
        err.contains("numpy->torch: none of the 2 cells of the sweep succeeded"),
        "{err}"
    );
    assert!(!err.contains("Traceback"), "{err}");
    // What failed and why is still shown and written.
    assert!(out.contains(reason), "the reasons are in the table: {out}");
    assert!(sb.path("b.json").is_file());
}

#[test]
fn json_dash_writes_the_json_to_stdout_and_no_file() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("jsondash");
    let (code, out, err) = sb.run(sb.gpushare(&[
        "bench", "numpy->torch", "--sizes", "4KiB", "--device", "cpu", "--paths", "dlpack",
        "--kernel", "python3", "--json", "-",
    ]));
    assert_eq!(code, Some(0), "{err}");
    // Stdout is the document alone, so it can be piped into jq.
    let json: Value = serde_json::from_str(&out).expect("stdout is the JSON alone");
    assert_eq!(json["data"]["source_framework"], "numpy", "{json}");
    assert!(!sb.path("-").exists(), "a file named `-` was written");
}

#[test]
fn html_dash_writes_the_page_to_stdout_and_no_file() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("htmldash");
    let (code, out, err) = sb.run(sb.gpushare(&[
        "bench", "numpy->torch", "--sizes", "4KiB", "--device", "cpu", "--paths", "dlpack",
        "--kernel", "python3", "--html", "-",
    ]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("<!DOCTYPE html>"), "{out}");
    assert!(out.trim_end().ends_with("</html>"), "{out}");
    assert!(!sb.path("-").exists(), "a file named `-` was written");
}

#[test]
fn ctrl_c_in_the_console_script_exits_130_quietly_and_shuts_the_kernel_down() {
    if !gpushare_has("bench") || !gpushare_has("_native.cli_main") {
        eprintln!("skipped: gpushare with its console script not available");
        return;
    }
    let sb = Sandbox::new("ctrlc-bench");
    // `python -m gpushare` is the console script users run: the Rust command inside Python.
    // Sizes enough that the sweep is still running when Ctrl-C comes.
    let sizes = (1..=60).map(|k| format!("{}KiB", k * 4)).collect::<Vec<_>>().join(",");
    let child = sb
        .command(&python(), &[
            "-m", "gpushare", "bench", "numpy->torch", "--sizes", &sizes, "--device", "cpu",
            "--kernel", "python3",
        ])
        .spawn()
        .expect("starting python -m gpushare");
    sb.wait_for_kernel();
    std::thread::sleep(Duration::from_secs(3));
    let began = Instant::now();
    let (code, err) = interrupt(child);
    assert_eq!(code, Some(130), "{err}");
    assert!(began.elapsed() < Duration::from_secs(30), "slow to stop");
    assert!(err.contains("interrupted"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    assert!(!err.contains("KeyboardInterrupt"), "{err}");
    assert!(
        sb.connection_files().is_empty(),
        "connection files left behind: {:?}",
        sb.connection_files()
    );
}

#[test]
fn ctrl_c_during_doctor_exits_130_without_a_traceback() {
    if !gpushare_has("gpuinfo") {
        eprintln!("skipped: gpushare.gpuinfo not available");
        return;
    }
    let sb = Sandbox::new("ctrlc-doctor");
    // Importing every framework takes seconds: Ctrl-C lands in the middle.
    let child = sb
        .gpushare(&["doctor", "--import", "--kernel", "python3"])
        .spawn()
        .expect("starting gpushare doctor");
    std::thread::sleep(Duration::from_millis(1500));
    let (code, err) = interrupt(child);
    assert_eq!(code, Some(130), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    assert!(err.contains("interrupted"), "{err}");
}

#[test]
fn doctor_import_reports_each_frameworks_dlpack_support() {
    if !gpushare_has("gpuinfo") {
        eprintln!("skipped: gpushare.gpuinfo not available");
        return;
    }
    let sb = Sandbox::new("doctor-import");
    let (code, plain, err) = sb.run(sb.gpushare(&["doctor", "--kernel", "python3"]));
    assert_eq!(code, Some(0), "{err}");
    let (code, imported, err) =
        sb.run(sb.gpushare(&["doctor", "--import", "--kernel", "python3"]));
    assert_eq!(code, Some(0), "{err}");
    // The report says what PyTorch's arrays export over DLPack once it is imported, and cannot
    // say it before.
    let torch_line = |report: &str| {
        report
            .lines()
            .find(|l| l.trim_start().starts_with("torch"))
            .unwrap_or_default()
            .to_string()
    };
    let after = torch_line(&imported);
    assert!(
        after.contains("versioned") || after.contains("legacy"),
        "{imported}"
    );
    let before = torch_line(&plain);
    assert!(
        !before.contains("versioned") && !before.contains("legacy"),
        "{plain}"
    );
    assert_plain("doctor's report", &imported);
}

/// The names after "known: " / "known paths: " in a usage error, as a sorted list.
fn names_in_usage_error(err: &str, after: &str) -> Vec<String> {
    let first = err.lines().next().unwrap_or_default();
    let list = first
        .split_once(after)
        .unwrap_or_else(|| panic!("no `{after}` in {err}"))
        .1;
    // The process paths follow in parentheses: "(with --across processes: ipc, …)".
    let list = list.split(" (with ").next().unwrap_or_default();
    let mut names: Vec<String> = list
        .split([',', '(', ')'])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    names.sort();
    names
}

#[test]
fn the_cli_knows_exactly_the_frameworks_and_paths_the_python_side_knows() {
    if !gpushare_has("adapters._NAMES") {
        eprintln!("skipped: gpushare.adapters not available");
        return;
    }
    let sb = Sandbox::new("names");
    // The CLI's copies of the names, from its own usage errors (a misspelt name is answered by
    // the kernel's Python; one that cannot be a name, by the CLI's table).
    let (_, _, err) = sb.run(sb.gpushare(&["bench", "torch->none'such"]));
    let cli_frameworks = names_in_usage_error(&err, "known: ");
    let (_, _, err) = sb.run(sb.gpushare(&["bench", "torch->numpy", "--paths", "nonesuch"]));
    let mut cli_paths = names_in_usage_error(&err, "known paths: ");
    cli_paths.retain(|p| p != "all");
    // The kernel side's: every name gpushare.framework() resolves, every path parse_paths takes.
    let python_list = |code: &str| -> Vec<String> {
        let out = Command::new(python())
            .args(["-c", code])
            .output()
            .expect("running python");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        cli_frameworks,
        python_list("from gpushare.adapters import _NAMES; print(*_NAMES)")
    );
    assert_eq!(
        cli_paths,
        python_list("from gpushare.paths import PATH_NAMES; print(*PATH_NAMES, 'auto')")
    );
}

/// A script in `sandbox` that runs the project's Python with site-packages off (`-S -s`): a
/// Python that cannot import ipykernel, for the tests of what users without it are told.
fn python_without_site(sandbox: &Sandbox) -> PathBuf {
    let wrapper = sandbox.path("python-without-site");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec {} -S -s \"$@\"\n", python().display())).unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    wrapper
}

/// `kernel install` with a Python that cannot import ipykernel (site-packages off) installs the spec
/// and says, on stderr, that kernels from it will fail and how to fix that; with the project's
/// Python it says nothing of the kind.
#[test]
fn kernel_install_warns_when_ipykernel_is_missing() {
    let sandbox = Sandbox::new("no-ipykernel");
    let wrapper = python_without_site(&sandbox);
    let prefix = sandbox.path("prefix");
    let mut command = sandbox.gpushare(&["kernel", "install", "--prefix", prefix.to_str().unwrap()]);
    command.env("GPUSHARE_PYTHON", &wrapper);
    let (code, stdout, stderr) = sandbox.run(command);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("Installed kernelspec"), "{stdout}");
    assert!(stderr.contains("cannot import ipykernel") && stderr.contains("gpushare-dlpack[kernel]"), "{stderr}");

    let prefix = sandbox.path("prefix2");
    let (code, _, stderr) = sandbox.run(sandbox.gpushare(&["kernel", "install", "--prefix", prefix.to_str().unwrap()]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("ipykernel"), "{stderr}");
}

/// `doctor` says which gpushare it is and ends with one line: ready (a real share on the CPU
/// worked), or not ready and why, exit 1.
#[test]
fn doctor_prints_the_version_and_a_one_line_verdict() {
    if !gpushare_has("gpuinfo") {
        eprintln!("skipped: gpushare.gpuinfo not available");
        return;
    }
    let sb = Sandbox::new("doctor-verdict");
    let (code, out, err) = sb.run(sb.gpushare(&["doctor", "--kernel", "python3"]));
    assert_eq!(code, Some(0), "{out}{err}");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(out.lines().next(), Some(format!("gpushare:   {version} (this command)").as_str()), "{out}");
    assert!(out.contains(&format!("gpushare {version} in ")), "{out}");
    let last = out.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("ready: sharing works on the CPU; "), "{out}");
    assert!(last.contains("CUDA"), "the verdict says what it found of CUDA: {last}");

    // A Python that cannot import gpushare (site-packages off): not ready, and how to fix it.
    let wrapper = python_without_site(&sb);
    std::fs::create_dir_all(sb.path("no-kernels")).unwrap();
    let mut command = sb.gpushare(&["doctor"]);
    command.env("GPUSHARE_PYTHON", &wrapper).env("JUPYTER_PATH", sb.path("no-kernels"));
    let (code, out, err) = sb.run(command);
    assert_eq!(code, Some(1), "{out}{err}");
    let last = out.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("not ready: ") && last.contains("cannot import gpushare") && last.contains("pip install"), "{out}");
    assert!(!err.contains("Traceback"), "{err}");
}

/// A kernel name that would put the spec outside the kernels folder (`..` is the data dir itself,
/// `.` the kernels folder) is a usage error, and nothing is written anywhere.
#[test]
fn kernel_install_refuses_names_that_leave_the_kernels_folder() {
    let sandbox = Sandbox::new("kernel-name");
    let prefix = sandbox.path("prefix");
    for name in ["..", ".", "../x", "../../x", "a/b", ""] {
        let (code, stdout, stderr) = sandbox.run(sandbox.gpushare(&[
            "kernel", "install", "--prefix", prefix.to_str().unwrap(), "--name", name,
        ]));
        assert_eq!(code, Some(2), "{name:?}: {stdout}{stderr}");
        assert!(stderr.contains("not a valid kernel name"), "{name:?}: {stderr}");
        assert!(!stdout.contains("Installed"), "{name:?}: {stdout}");
        assert!(!prefix.exists(), "{name:?} wrote under the prefix");
    }
}

/// A notebook on ipykernel's own `python3` kernel that uses `%share` without `%load_ext gpushare`:
/// IPython only says the magic was not found; `gpushare run` adds how to load it, and the
/// notebook with that one cell added runs.
#[test]
fn a_gpushare_magic_without_the_extension_loaded_gets_the_load_ext_hint() {
    if !gpushare_has("share") {
        eprintln!("skipped: gpushare not importable by the test Python");
        return;
    }
    let sb = Sandbox::new("no-load-ext");
    let notebook = |cells: &[&str]| {
        serde_json::json!({
            "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": cells.iter().enumerate().map(|(i, src)| serde_json::json!({
                "cell_type": "code", "id": format!("c{i}"), "metadata": {}, "execution_count": null,
                "outputs": [], "source": src,
            })).collect::<Vec<_>>(),
        })
        .to_string()
    };
    let body = ["import numpy as np\nx = np.arange(3.0)", "%share x numpy->numpy -n 1 -r 1 -q"];
    std::fs::write(sb.path("plain.ipynb"), notebook(&body)).unwrap();
    let (code, _, err) = sb.run(sb.gpushare(&["run", "plain.ipynb", "-o", "plain.out.ipynb"]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Line magic function `%share` not found"), "{err}");
    assert!(
        err.contains("hint: `%share` is a gpushare magic, and the `python3` kernel does not load gpushare")
            && err.contains("`%load_ext gpushare`"),
        "{err}"
    );

    let loaded = ["%load_ext gpushare", body[0], body[1]];
    std::fs::write(sb.path("loaded.ipynb"), notebook(&loaded)).unwrap();
    let (code, _, err) = sb.run(sb.gpushare(&["run", "loaded.ipynb", "-o", "loaded.out.ipynb"]));
    assert_eq!(code, Some(0), "the hint's fix does not work: {err}");
    assert!(!err.contains("hint"), "{err}");
}

/// A kernel (not gpushare's) whose Python cannot import ipykernel: after the install hint, the
/// error says that this kernel also needs `%load_ext gpushare`.
#[test]
fn a_kernel_without_ipykernel_that_is_not_gpushares_gets_both_hints() {
    let sb = Sandbox::new("no-ipykernel-run");
    let wrapper = python_without_site(&sb);
    let kernels = sb.path("jupyter/kernels/nosite");
    std::fs::create_dir_all(&kernels).unwrap();
    let spec = serde_json::json!({
        "argv": [wrapper, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "no site-packages", "language": "python",
    });
    std::fs::write(kernels.join("kernel.json"), spec.to_string()).unwrap();
    let nb = serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": null, "outputs": [], "source": "1"}],
    });
    std::fs::write(sb.path("nb.ipynb"), nb.to_string()).unwrap();
    let mut command = sb.gpushare(&["run", "nb.ipynb", "--kernel", "nosite", "-o", "out.ipynb"]);
    command.env("JUPYTER_PATH", format!("{}:{}", sb.path("jupyter").display(), jupyter_path().display()));
    let (code, _, err) = sb.run(command);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("gpushare-dlpack[kernel]"), "{err}");
    assert!(err.contains("hint: the `nosite` kernel does not load gpushare itself") && err.contains("`%load_ext gpushare`"), "{err}");
}

/// A kernel that loses a port to another process before binding it may stay up without it
/// (ipykernel 7 did, in CI: the iopub bind's traceback, then nothing until the 60 s start-up timeout).
/// The runner reads that in the kernel's output, stops it and starts it again on new ports at once;
/// this stand-in loses its port every time, so the run fails fast, says why, and leaves no process.
#[test]
fn a_kernel_that_lost_a_port_but_stayed_up_is_stopped_and_started_again_at_once() {
    let sb = Sandbox::new("lost-port");
    let kernels = sb.path("jupyter/kernels/lostport");
    std::fs::create_dir_all(&kernels).unwrap();
    let marker = format!("gpushare-lost-port-{}", std::process::id());
    let script = format!(
        "echo \"zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:40623')\" >&2; exec sleep 600 # {marker}"
    );
    let spec = serde_json::json!({
        "argv": ["sh", "-c", script, "{connection_file}"],
        "display_name": "loses its port", "language": "python",
    });
    std::fs::write(kernels.join("kernel.json"), spec.to_string()).unwrap();
    let nb = serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": null, "outputs": [], "source": "1"}],
    });
    std::fs::write(sb.path("nb.ipynb"), nb.to_string()).unwrap();
    let mut command = sb.gpushare(&["run", "nb.ipynb", "--kernel", "lostport", "-o", "out.ipynb"]);
    command.env("JUPYTER_PATH", sb.path("jupyter"));
    let started = std::time::Instant::now();
    let (code, _, err) = sb.run(command);
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("taken before it bound it") && err.contains("Address already in use"), "{err}");
    assert!(took < std::time::Duration::from_secs(30), "waited {took:?}, as if for the start-up timeout: {err}");
    let left = std::process::Command::new("pgrep").args(["-f", &marker]).output().unwrap();
    assert!(left.stdout.is_empty(), "kernel processes left behind: {}", String::from_utf8_lossy(&left.stdout));
}
