//! What the CLI's integration tests share: the test Python, a `python3` kernelspec for it, and a
//! private sandbox (working, runtime and data dirs) per test. crates/runner/tests/cli.rs and
//! crates/runner/tests/kernel_runner.rs carry their own older copies; new test files use this one.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gpushare_runner::cli::{Config, run_with};
use gpushare_runner::kernel::Environment;
use serde_json::{Value, json};

/// `$GPUSHARE_PYTHON`, else the project's `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("GPUSHARE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

/// `$PREFIX/share/jupyter` holding ipykernel's own `python3` kernelspec for the test Python,
/// installed once per test binary under cargo's target tmp dir.
pub fn jupyter_path() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        let tag = exe.file_stem().map_or_else(|| "support".into(), |s| s.to_string_lossy().into_owned());
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{tag}-prefix"));
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
pub fn gpushare_has(attr: &str) -> bool {
    Command::new(python())
        .args(["-c", &format!("import gpushare; gpushare.{attr}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A test's environment: the test Python, the test kernelspec, private runtime and data dirs.
pub struct Sandbox {
    pub dir: PathBuf,
    pub env: Environment,
}

impl Sandbox {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "gpushare-t-{tag}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("creating a scratch dir");
        let env = Environment::from_process()
            .with("GPUSHARE_PYTHON", python())
            .with("JUPYTER_PATH", jupyter_path())
            .with("JUPYTER_DATA_DIR", dir.join("data"))
            .with("JUPYTER_RUNTIME_DIR", dir.join("runtime"))
            .without("GPUSHARE_SYS_PREFIX")
            .without("NO_COLOR");
        Self { dir, env }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn write_notebook(&self, name: &str, nb: &Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_string_pretty(nb).unwrap()).unwrap();
        path
    }

    /// `gpushare ARGS…` in this process: exit code, stdout, stderr.
    pub fn gpushare(&self, args: &[&str]) -> (i32, String, String) {
        let argv = std::iter::once("gpushare")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(argv, &Config::with_env(self.env.clone()), &mut out, &mut err);
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    }

    /// The gpushare binary on `args` in the sandbox (its own process: real signals, real
    /// stdout), stdin closed, stdout and stderr piped.
    pub fn binary(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gpushare"));
        command
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .envs(self.env.vars())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// The connection files in the runtime dir: one per running kernel.
    pub fn connection_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path("runtime"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Wait until a kernel has been launched (its connection file exists).
    pub fn wait_for_kernel(&self) {
        let began = Instant::now();
        while self.connection_files().is_empty() {
            assert!(began.elapsed() < Duration::from_secs(60), "no kernel started");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// No connection file (with its key) is left behind.
    pub fn assert_runtime_dir_clean(&self) {
        let left = self.connection_files();
        assert!(left.is_empty(), "connection files left behind: {left:?}");
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Send `signal` to a child that has not been reaped, then wait: exit code, stderr.
pub fn signal_and_wait(child: Child, signal: libc::c_int) -> (Option<i32>, String) {
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let output = child.wait_with_output().expect("waiting for gpushare");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

pub fn code(source: &str) -> Value {
    json!({"cell_type": "code", "execution_count": null, "id": uuid::Uuid::new_v4().simple().to_string()[..8],
           "metadata": {}, "outputs": [], "source": source})
}

pub fn notebook(cells: Vec<Value>) -> Value {
    json!({
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

pub fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("reading the output notebook"))
        .expect("output is JSON")
}

pub fn text(value: &Value) -> String {
    match value {
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

pub fn outputs(nb: &Value, cell: usize) -> &Vec<Value> {
    nb["cells"][cell]["outputs"].as_array().expect("outputs list")
}

/// A cell that says, by creating `marker`, that it began, then sleeps: a signal sent after
/// [`wait_for_cell`] lands in that cell however slow the kernel was to start.
pub fn sleeping_cell(marker: &Path) -> String {
    format!("import time, pathlib\npathlib.Path({:?}).touch()\nprint('started', flush=True)\ntime.sleep(120)", marker.display().to_string())
}

/// Wait until the cell of [`sleeping_cell`] has created `marker`.
pub fn wait_for_cell(marker: &Path) {
    let began = Instant::now();
    while !marker.exists() {
        assert!(began.elapsed() < Duration::from_secs(180), "the cell never began");
        std::thread::sleep(Duration::from_millis(50));
    }
}
