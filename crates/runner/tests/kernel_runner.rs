//! `gpushare run` (and friends) against a real ipykernel over real sockets.
//!
//! Python comes from `$GPUSHARE_PYTHON`, else the project's `.venv`. The stock `python3`
//! kernelspec is installed once into a temp prefix that `JUPYTER_PATH` points at, so these tests
//! need ipykernel and nbformat but not an importable gpushare. Every test builds its own
//! [`Environment`] and calls [`run_with`]: tests run in parallel and never touch the process
//! environment.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gpushare_runner::cli::{Config, run_with};
use gpushare_runner::kernel::Environment;
use serde_json::{Value, json};

fn python() -> PathBuf {
    std::env::var_os("GPUSHARE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gpushare-it-{tag}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("creating a scratch dir");
    dir
}

/// `$PREFIX/share/jupyter` holding ipykernel's own `python3` kernelspec, installed once per run
/// under cargo's target tmp dir (reinstalled each run, so it always names the current Python).
fn jupyter_path() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_runner-prefix");
        let status = Command::new(python())
            .args([
                "-m",
                "ipykernel",
                "install",
                "--name",
                "python3",
                "--prefix",
            ])
            .arg(&prefix)
            .output()
            .expect("running python -m ipykernel install");
        assert!(
            status.status.success(),
            "ipykernel install failed: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        prefix.join("share/jupyter")
    })
}

/// A test's environment: the test Python, the test kernelspec, private runtime and data dirs.
struct Sandbox {
    dir: PathBuf,
    env: Environment,
}

impl Sandbox {
    fn new(tag: &str) -> Self {
        let dir = scratch(tag);
        let env = Environment::from_process()
            .with("GPUSHARE_PYTHON", python())
            .with("JUPYTER_PATH", jupyter_path())
            .with("JUPYTER_DATA_DIR", dir.join("data"))
            .with("JUPYTER_RUNTIME_DIR", dir.join("runtime"))
            .without("GPUSHARE_SYS_PREFIX");
        Self { dir, env }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write_notebook(&self, name: &str, nb: &Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_string_pretty(nb).unwrap()).unwrap();
        path
    }

    /// Run `gpushare ARGS…`: exit code, stdout, stderr.
    fn gpushare(&self, args: &[&str]) -> (i32, String, String) {
        let argv = std::iter::once("gpushare")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(
            argv,
            &Config::with_env(self.env.clone()),
            &mut out,
            &mut err,
        );
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    }

    /// No connection file (with its key) is left behind.
    fn assert_runtime_dir_clean(&self) {
        let left: Vec<_> = std::fs::read_dir(self.path("runtime"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
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

fn code(source: &str) -> Value {
    json!({"cell_type": "code", "execution_count": null, "id": uuid::Uuid::new_v4().simple().to_string()[..8],
           "metadata": {}, "outputs": [], "source": source})
}

fn tagged(source: &str, tag: &str) -> Value {
    let mut cell = code(source);
    cell["metadata"]["tags"] = json!([tag]);
    cell
}

fn notebook(cells: Vec<Value>) -> Value {
    json!({
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("reading the output notebook"))
        .expect("output is JSON")
}

/// Python's nbformat accepts what we wrote, and would write the very same bytes.
fn assert_valid_nbformat(path: &Path) {
    let check = "import sys, nbformat\n\
                 text = open(sys.argv[1], encoding='utf-8').read()\n\
                 nb = nbformat.reads(text, as_version=4)\n\
                 nbformat.validate(nb)\n\
                 assert nbformat.writes(nb) + '\\n' == text, 'not byte-identical to nbformat.writes'\n";
    let out = Command::new(python())
        .args(["-c", check])
        .arg(path)
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "nbformat rejects {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn text(value: &Value) -> String {
    match value {
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

fn outputs(nb: &Value, cell: usize) -> &Vec<Value> {
    nb["cells"][cell]["outputs"]
        .as_array()
        .expect("outputs list")
}

#[test]
fn three_cells_run_and_their_outputs_are_recorded() {
    let sb = Sandbox::new("three");
    let input = sb.write_notebook(
        "three.ipynb",
        &notebook(vec![
            json!({"cell_type": "markdown", "id": "md", "metadata": {}, "source": "# Title"}),
            code("print('hello')\nprint('world')"),
            code("6 * 7"),
            code("from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "stderr: {err}");
    let out_path = sb.path("three.executed.ipynb");
    let nb = read(&out_path);

    assert_eq!(outputs(&nb, 1).len(), 1, "one merged stdout stream");
    assert_eq!(outputs(&nb, 1)[0]["output_type"], "stream");
    assert_eq!(outputs(&nb, 1)[0]["name"], "stdout");
    assert_eq!(text(&outputs(&nb, 1)[0]["text"]), "hello\nworld\n");

    assert_eq!(outputs(&nb, 2)[0]["output_type"], "execute_result");
    assert_eq!(text(&outputs(&nb, 2)[0]["data"]["text/plain"]), "42");
    assert_eq!(outputs(&nb, 2)[0]["execution_count"], 2);

    let display = &outputs(&nb, 3)[0];
    assert_eq!(display["output_type"], "display_data");
    assert_eq!(text(&display["data"]["text/html"]), "<b>bold</b>");
    let mimes: Vec<&String> = display["data"].as_object().unwrap().keys().collect();
    assert_eq!(mimes, ["text/html", "text/plain"], "MIME keys sorted");

    let counts: Vec<&Value> = (1..4).map(|i| &nb["cells"][i]["execution_count"]).collect();
    assert_eq!(counts, [1, 2, 3]);
    assert_eq!(nb["metadata"]["language_info"]["name"], "python");
    assert_valid_nbformat(&out_path);
    sb.assert_runtime_dir_clean();
}

#[test]
fn a_failing_cell_stops_the_run_and_what_ran_is_written() {
    let sb = Sandbox::new("fail");
    let input = sb.write_notebook(
        "fail.ipynb",
        &notebook(vec![
            code("print('first')"),
            code("1 / 0"),
            code("print('never')"),
        ]),
    );
    let out_path = sb.path("out.ipynb");
    let (status, _, err) = sb.gpushare(&[
        "run",
        input.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert_eq!(status, 1);
    assert!(err.contains("cell 2"), "the cell number is reported: {err}");
    assert!(err.contains("ZeroDivisionError: division by zero"), "{err}");
    assert!(err.contains("Traceback"), "the traceback is printed: {err}");
    assert!(
        !err.contains('\x1b'),
        "no ANSI escapes in the report: {err:?}"
    );

    let nb = read(&out_path);
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "first\n");
    let error = outputs(&nb, 1)
        .iter()
        .find(|o| o["output_type"] == "error")
        .expect("an error output");
    assert_eq!(error["ename"], "ZeroDivisionError");
    assert!(
        outputs(&nb, 2).is_empty(),
        "cells after the failure do not run"
    );
    assert_eq!(nb["cells"][2]["execution_count"], Value::Null);
    assert_valid_nbformat(&out_path);
    sb.assert_runtime_dir_clean();
}

#[test]
fn raises_exception_tag_lets_the_run_go_on() {
    let sb = Sandbox::new("raises");
    let input = sb.write_notebook(
        "r.ipynb",
        &notebook(vec![
            tagged("raise ValueError('expected')", "raises-exception"),
            code("print('after')"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let nb = read(&sb.path("r.executed.ipynb"));
    assert_eq!(outputs(&nb, 0)[0]["ename"], "ValueError");
    assert_eq!(text(&outputs(&nb, 1)[0]["text"]), "after\n");
}

#[test]
fn a_cell_past_the_timeout_is_interrupted_and_fails_the_run() {
    let sb = Sandbox::new("timeout");
    let input = sb.write_notebook(
        "slow.ipynb",
        &notebook(vec![
            code("print('quick')"),
            code("import time\ntime.sleep(120)"),
            code("print('never')"),
        ]),
    );
    let began = Instant::now();
    // A limit the quick cell meets on any machine, however loaded; the sleep outlasts it by far.
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "--timeout", "10"]);
    assert_eq!(status, 1, "{err}");
    assert!(
        began.elapsed() < Duration::from_secs(110),
        "the timeout stopped the run before the 120 s sleep ended"
    );
    assert!(
        err.contains("cell 2") && err.contains("timed out after 10 s"),
        "{err}"
    );
    let nb = read(&sb.path("slow.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "quick\n");
    // The cell was interrupted, so where it hung is recorded.
    assert!(
        outputs(&nb, 1)
            .iter()
            .any(|o| o["ename"] == "KeyboardInterrupt"),
        "{:?}",
        outputs(&nb, 1)
    );
    assert!(outputs(&nb, 2).is_empty());
    sb.assert_runtime_dir_clean();
}

#[test]
fn a_kernel_that_dies_is_reported_and_what_ran_is_written() {
    let sb = Sandbox::new("killed");
    let input = sb.write_notebook(
        "dies.ipynb",
        &notebook(vec![
            code("print('alive')"),
            code("import os\nos.kill(os.getpid(), 9)"),
            code("print('never')"),
        ]),
    );
    let began = Instant::now();
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "death is noticed promptly"
    );
    assert!(
        err.contains("kernel died") && err.contains("cell 2"),
        "{err}"
    );
    assert!(err.contains("SIGKILL"), "{err}");
    let nb = read(&sb.path("dies.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "alive\n");
    assert!(outputs(&nb, 2).is_empty());
    assert_valid_nbformat(&sb.path("dies.executed.ipynb"));
    sb.assert_runtime_dir_clean();
}

#[test]
fn awkward_parameter_values_arrive_exactly() {
    let sb = Sandbox::new("params");
    let awkward = "it's \"quoted\" \\ back\\slash\nsecond line\ttab\r ünï 日本 🚀 \u{2028}\u{202e} end'); import os; ('";
    let input = sb.write_notebook(
        "p.ipynb",
        &notebook(vec![
            json!({"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "Parameters below"}),
            tagged("s = 'default'\nn = 0\nf = 0.0\nflag = False\nnothing = 1\nbig = 0\nzip_code = ''\nnumeric_text = ''", "parameters"),
            code(
                "import json\n\
                 print(json.dumps({'s': s, 'n': n, 'f': f, 'flag': flag, 'nothing': nothing, 'big': str(big),\n\
                 'zip_code': zip_code, 'numeric_text': numeric_text,\n\
                 'types': [type(v).__name__ for v in (s, n, f, flag, nothing, big, zip_code, numeric_text)]}))",
            ),
        ]),
    );
    let s_param = format!("s={awkward}");
    let (status, _, err) = sb.gpushare(&[
        "run",
        input.to_str().unwrap(),
        "-p",
        &s_param,
        "-p",
        "n=-42",
        "-p",
        "f=2.5e-3",
        "-p",
        "flag=True",
        "-p",
        "nothing=None",
        "-p",
        "big=123456789012345678901234567890",
        "-p",
        "zip_code=01234",
        "-r",
        "numeric_text=7",
    ]);
    assert_eq!(status, 0, "{err}");
    let out_path = sb.path("p.executed.ipynb");
    let nb = read(&out_path);
    let injected = &nb["cells"][2];
    assert_eq!(
        injected["metadata"]["tags"],
        json!(["injected-parameters"]),
        "injected right after `parameters`"
    );
    let printed = text(&outputs(&nb, 3)[0]["text"]);
    let got: Value = serde_json::from_str(&printed).expect("the cell printed JSON");
    assert_eq!(got["s"], awkward);
    assert_eq!(got["n"], -42);
    assert_eq!(got["f"], 0.0025);
    assert_eq!(got["flag"], true);
    assert_eq!(got["nothing"], Value::Null);
    assert_eq!(got["big"], "123456789012345678901234567890");
    assert_eq!(got["zip_code"], "01234");
    assert_eq!(got["numeric_text"], "7");
    assert_eq!(
        got["types"],
        json!([
            "str", "int", "float", "bool", "NoneType", "int", "str", "str"
        ])
    );
    assert_valid_nbformat(&out_path);
}

#[test]
fn unknown_fields_and_metadata_survive_a_run() {
    let sb = Sandbox::new("unknown");
    let mut nb = notebook(vec![
        json!({"cell_type": "markdown", "id": "m1", "metadata": {"custom": {"keep": [1, 2, 3]}},
               "source": "![img](attachment:a.png)",
               "attachments": {"a.png": {"image/png": "iVBORw0KGgo="}}}),
        json!({"cell_type": "raw", "id": "r1", "metadata": {"format": "text/plain"}, "source": "raw text\nstays"}),
        code("x = 1"),
    ]);
    nb["metadata"]["authors"] = json!([{"name": "Ada"}]);
    nb["metadata"]["x_tool"] = json!({"version": "9.9", "nested": {"deep": true}});
    nb["cells"][2]["metadata"]["collapsed"] = json!(false);
    nb["cells"][2]["metadata"]["x_cell_tool"] = json!({"keep": "me"});
    let input = sb.write_notebook("u.ipynb", &nb);
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let out_path = sb.path("u.executed.ipynb");
    let out = read(&out_path);
    assert_eq!(out["metadata"]["authors"], nb["metadata"]["authors"]);
    assert_eq!(out["metadata"]["x_tool"], nb["metadata"]["x_tool"]);
    assert_eq!(
        out["metadata"]["kernelspec"], nb["metadata"]["kernelspec"],
        "the notebook's own kernelspec is kept"
    );
    assert_eq!(out["cells"][0]["metadata"], nb["cells"][0]["metadata"]);
    assert_eq!(
        out["cells"][0]["attachments"],
        nb["cells"][0]["attachments"]
    );
    assert_eq!(text(&out["cells"][1]["source"]), "raw text\nstays");
    assert_eq!(out["cells"][1]["metadata"], nb["cells"][1]["metadata"]);
    // The code cell's own metadata is kept; the run adds only its timing, as nbclient does.
    let mut code_metadata = out["cells"][2]["metadata"].clone();
    assert!(code_metadata.as_object_mut().unwrap().remove("execution").is_some());
    assert_eq!(code_metadata, nb["cells"][2]["metadata"]);
    assert_eq!(out["cells"][2]["id"], nb["cells"][2]["id"]);
    assert_valid_nbformat(&out_path);

    // Fields nbformat's schema would reject are kept too (validation is not our call).
    let mut odd = nb.clone();
    odd["x_top_level"] = json!({"kept": true});
    odd["cells"][2]["x_cell_field"] = json!("kept");
    let input = sb.write_notebook("odd.ipynb", &odd);
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let out = read(&sb.path("odd.executed.ipynb"));
    assert_eq!(out["x_top_level"], json!({"kept": true}));
    assert_eq!(out["cells"][2]["x_cell_field"], "kept");
}

#[test]
fn two_notebooks_run_in_two_fresh_kernels() {
    let sb = Sandbox::new("two");
    let a = sb.write_notebook(
        "a.ipynb",
        &notebook(vec![code(
            "import os\nsecret = 41\nprint(secret + 1, os.getpid())",
        )]),
    );
    let b = sb.write_notebook(
        "b.ipynb",
        &notebook(vec![code(
            "import os\nprint('secret' in globals(), os.getpid())",
        )]),
    );
    let out_dir = sb.path("executed");
    let (status, _, err) = sb.gpushare(&[
        "run",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{err}");
    let a_out = text(&outputs(&read(&out_dir.join("a.ipynb")), 0)[0]["text"]);
    let b_out = text(&outputs(&read(&out_dir.join("b.ipynb")), 0)[0]["text"]);
    let (a_answer, a_pid) = a_out.trim().split_once(' ').unwrap();
    let (b_answer, b_pid) = b_out.trim().split_once(' ').unwrap();
    assert_eq!(a_answer, "42");
    assert_eq!(
        b_answer, "False",
        "the second notebook does not see the first one's variables"
    );
    assert_ne!(a_pid, b_pid, "each notebook has its own kernel process");
    sb.assert_runtime_dir_clean();
}

#[test]
fn missing_notebook_and_missing_kernel_fail_with_a_message() {
    let sb = Sandbox::new("missing");
    let (status, _, err) = sb.gpushare(&["run", sb.path("nope.ipynb").to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(err.contains("nope.ipynb"), "{err}");
    let input = sb.write_notebook("k.ipynb", &notebook(vec![code("1")]));
    let (status, _, err) =
        sb.gpushare(&["run", input.to_str().unwrap(), "--kernel", "no-such-kernel"]);
    assert_eq!(status, 1);
    assert!(err.contains("no kernel named `no-such-kernel`"), "{err}");
}

#[test]
fn the_installed_kernelspec_starts_with_gpushare_memory_settings() {
    let sb = Sandbox::new("install");
    let prefix = sb.path("prefix");
    let (status, out, err) =
        sb.gpushare(&["kernel", "install", "--prefix", prefix.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("Installed kernelspec gpushare"), "{out}");
    let spec = read(&prefix.join("share/jupyter/kernels/gpushare/kernel.json"));
    assert_eq!(
        spec["argv"][0],
        python().to_str().unwrap(),
        "argv[0] is the absolute Python"
    );

    // Launch it: the extension may not be importable here (IPython then only logs a warning),
    // but the memory settings must reach the kernel.
    let mut sb = sb;
    sb.env = sb
        .env
        .clone()
        .with("JUPYTER_PATH", prefix.join("share/jupyter"));
    let input = sb.write_notebook(
        "g.ipynb",
        &notebook(vec![code(
            "import os\nprint(os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'], os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])",
        )]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "--kernel", "gpushare"]);
    assert_eq!(status, 0, "{err}");
    let nb = read(&sb.path("g.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "false true\n");
}

#[test]
fn ctrl_c_interrupts_the_kernel_and_exits_130() {
    let sb = Sandbox::new("ctrlc");
    let input = sb.write_notebook(
        "c.ipynb",
        &notebook(vec![code(&support::sleeping_cell(&sb.path("began")))]),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpushare"))
        .args(["run", input.to_str().unwrap()])
        .env_clear()
        .envs(sb.env.vars())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting the gpushare binary");
    support::wait_for_cell(&sb.path("began"));
    let began = Instant::now();
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().expect("waiting for gpushare");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(began.elapsed() < Duration::from_secs(60), "slow to stop");
    assert!(err.contains("interrupted"), "{err}");
    let nb = read(&sb.path("c.executed.ipynb"));
    assert!(
        outputs(&nb, 0)
            .iter()
            .any(|o| o["ename"] == "KeyboardInterrupt"),
        "{:?}",
        outputs(&nb, 0)
    );
    sb.assert_runtime_dir_clean();
}

/// Whether the test Python can import gpushare and has `attr` (written by other work in progress).
fn gpushare_has(attr: &str) -> bool {
    Command::new(python())
        .args(["-c", &format!("import gpushare; gpushare.{attr}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bench_runs_a_sweep_in_a_kernel_and_writes_json_and_html() {
    if !gpushare_has("bench") {
        eprintln!("skipped: gpushare.bench not available");
        return;
    }
    let sb = Sandbox::new("bench");
    let (json_path, html_path) = (sb.path("b.json"), sb.path("b.html"));
    let (status, out, err) = sb.gpushare(&[
        "bench",
        "numpy->torch",
        "--sizes",
        "4KiB,64KiB",
        "--device",
        "cpu",
        "--kernel",
        "python3",
        "--json",
        json_path.to_str().unwrap(),
        "--html",
        html_path.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{err}");
    assert!(!out.trim().is_empty(), "the table is printed");
    let _: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap())
        .expect("--json writes JSON");
    assert!(
        std::fs::read_to_string(&html_path)
            .unwrap()
            .contains("<html>")
    );
    sb.assert_runtime_dir_clean();
}

#[test]
fn doctor_prints_the_environment_report() {
    if !gpushare_has("gpuinfo") {
        eprintln!("skipped: gpushare.gpuinfo not available");
        return;
    }
    let sb = Sandbox::new("doctor");
    let (status, out, err) = sb.gpushare(&["doctor", "--kernel", "python3"]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("python:"), "{out}");
    assert!(
        out.lines().count() > 2,
        "the report follows the header: {out}"
    );
}

/// Run `input` under nbclient (the reference) in the sandbox's environment; returns the name of
/// the exception nbclient raised (empty when the run succeeded) and the notebook it left.
fn nbclient_run(sb: &Sandbox, input: &Path, timeout: Option<u64>) -> (String, Value) {
    nbclient_run_with(sb, input, timeout, false)
}

/// [`nbclient_run`], choosing what nbclient does at a timeout: give up on the cell
/// (`interrupt_on_timeout=False`, its default) or interrupt the kernel and wait for the reply.
fn nbclient_run_with(
    sb: &Sandbox,
    input: &Path,
    timeout: Option<u64>,
    interrupt_on_timeout: bool,
) -> (String, Value) {
    let script = "import sys, json, os, nbformat, nbclient\n\
                  nb = nbformat.read(sys.argv[1], as_version=4)\n\
                  t = None if sys.argv[2] == 'none' else int(sys.argv[2])\n\
                  c = nbclient.NotebookClient(nb, timeout=t, kernel_name='python3',\n\
                      interrupt_on_timeout=sys.argv[3] == 'interrupt', iopub_timeout=60,\n\
                      resources={'metadata': {'path': os.path.dirname(sys.argv[1])}})\n\
                  err = ''\n\
                  try:\n    c.execute()\n\
                  except Exception as e:\n    err = type(e).__name__\n\
                  print(json.dumps({'error': err, 'nb': nb}))\n";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(input)
        .arg(timeout.map_or_else(|| "none".to_string(), |t| t.to_string()))
        .arg(if interrupt_on_timeout {
            "interrupt"
        } else {
            "give-up"
        })
        .env_clear()
        .envs(sb.env.vars())
        .output()
        .expect("running nbclient");
    assert!(
        out.status.success(),
        "nbclient script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("nbclient's result is JSON");
    (
        result["error"].as_str().unwrap_or_default().to_string(),
        result["nb"].clone(),
    )
}

/// Start the gpushare binary on `args` in the sandbox's environment, stderr piped.
fn spawn_gpushare(sb: &Sandbox, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_gpushare"))
        .args(args)
        .env_clear()
        .envs(sb.env.vars())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting the gpushare binary")
}

/// Wait for `child` with wait4(2): its exit code, the peak resident memory in bytes of the child
/// itself (its `VmHWM`, read while it runs), and the largest of it and the processes it reaped
/// (the kernel included: its own buffering is IPython's, not the runner's).
fn wait_with_peak_memory(child: &mut std::process::Child) -> (Option<i32>, u64, u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let own_peak = std::sync::Arc::new(AtomicU64::new(0));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let status_file = format!("/proc/{}/status", child.id());
    let poller = {
        let (own_peak, done) = (own_peak.clone(), done.clone());
        std::thread::spawn(move || {
            // VmHWM only grows, so the last reading before the process exits is its peak so far.
            while !done.load(Ordering::Relaxed) {
                let hwm = std::fs::read_to_string(&status_file).ok().and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                });
                if let Some(kib) = hwm {
                    own_peak.fetch_max(kib * 1024, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value to pass for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own unreaped child, with valid pointers to locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    done.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, own_peak.load(Ordering::Relaxed), usage.ru_maxrss as u64 * 1024)
}

fn read_stderr(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    err
}

#[test]
fn runaway_output_is_capped_and_the_timeout_still_holds() {
    let sb = Sandbox::new("flood");
    let input = sb.write_notebook(
        "flood.ipynb",
        &notebook(vec![
            // Each print its own message: what is bounded here is the runner's memory under a
            // flood of messages. A kernel left to batch a flood sends it in messages of hundreds
            // of megabytes, which every client holds at least once (jupyter_client held 1.1 GB
            // for messages of 300 MB), as does the kernel itself.
            code("while True:\n    print('z' * 4096, flush=True)"),
            code("print('never')"),
        ]),
    );
    let began = Instant::now();
    // 8 MiB rather than the default 32: this test is about the timeout and memory under a flood,
    // and a debug build spends seconds writing 32 MiB on a loaded machine.
    let mut child = spawn_gpushare(
        &sb,
        &[
            "run",
            input.to_str().unwrap(),
            "--timeout",
            "5",
            "--output-limit",
            "8",
        ],
    );
    let (code, peak, with_kernel) = wait_with_peak_memory(&mut child);
    eprintln!("peak memory: the runner {} MiB; with the kernel {} MiB", peak >> 20, with_kernel >> 20);
    let elapsed = began.elapsed();
    let err = read_stderr(&mut child);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("timed out after 5 s"), "{err}");
    // The flood does not delay the timeout: measured against the same run of a silent endless cell
    // on this machine now (kernel start and shutdown in both), not against a wall-clock figure a
    // loaded machine can miss. Before the fix the flood took ~19 s against ~8 s.
    let quiet = sb.write_notebook(
        "quiet.ipynb",
        &notebook(vec![crate::code("while True:\n    pass")]),
    );
    let began_quiet = Instant::now();
    let (quiet_status, _, quiet_err) =
        sb.gpushare(&["run", quiet.to_str().unwrap(), "--timeout", "5"]);
    let baseline = began_quiet.elapsed();
    assert_eq!(quiet_status, 1, "{quiet_err}");
    assert!(
        elapsed < baseline * 3 / 2 + Duration::from_secs(3),
        "the flood took {elapsed:?}, the silent cell {baseline:?}"
    );
    assert!(
        peak < 1 << 30,
        "the runner's peak memory {} MiB: output is not bounded",
        peak >> 20
    );
    let out_path = sb.path("flood.executed.ipynb");
    let size = std::fs::metadata(&out_path).unwrap().len();
    // 8 MiB of output, plus JSON quoting and line splitting.
    assert!(size < 10 << 20, "notebook of {} MiB", size >> 20);
    let nb = read(&out_path);
    let cell = outputs(&nb, 0);
    let all_text: String = cell.iter().map(|o| text(&o["text"])).collect();
    assert!(all_text.starts_with("zzzz"), "the first output is kept");
    assert!(
        cell.iter()
            .any(|o| o["name"] == "stderr" && text(&o["text"]).contains("Output limit reached")),
        "the notebook says output was cut"
    );
    // The KeyboardInterrupt traceback is recorded past the limit when it arrives within the
    // interrupt grace; under a flood it can sit behind seconds of backlog, so it is not asserted.
    assert!(outputs(&nb, 1).is_empty());
    assert_valid_nbformat(&out_path);
    sb.assert_runtime_dir_clean();
}

#[test]
fn a_small_output_limit_cuts_the_cell_and_says_so() {
    let sb = Sandbox::new("limit");
    let input = sb.write_notebook(
        "limit.ipynb",
        &notebook(vec![
            code("for i in range(3000):\n    print('y' * 1000)\nprint('tail')"),
            code("print('next cell')"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "--output-limit", "1"]);
    assert_eq!(status, 0, "a capped cell still succeeds: {err}");
    let nb = read(&sb.path("limit.executed.ipynb"));
    let cell = outputs(&nb, 0);
    let stdout: String = cell
        .iter()
        .filter(|o| o["name"] == "stdout")
        .map(|o| text(&o["text"]))
        .collect();
    assert_eq!(
        stdout.len(),
        1 << 20,
        "output up to the limit is kept, no more"
    );
    assert!(!stdout.contains("tail"));
    assert!(
        text(&cell.last().unwrap()["text"])
            .contains("Output limit reached: this cell's output passed 1 MiB")
    );
    // The limit is per cell: the next one starts afresh.
    assert_eq!(text(&outputs(&nb, 1)[0]["text"]), "next cell\n");
}

/// Whether `pid` is gone (or a zombie waiting for init to reap it).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_kernel_that_dies_takes_its_children_with_it() {
    let sb = Sandbox::new("orphans");
    let input = sb.write_notebook(
        "orphans.ipynb",
        &notebook(vec![code(
            "import os, subprocess\n\
             child = subprocess.Popen(['sleep', '300'])\n\
             with open('child.pid', 'w') as f:\n    f.write(str(child.pid))\n\
             os._exit(1)",
        )]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("kernel died"), "{err}");
    let pid: i32 = std::fs::read_to_string(sb.path("child.pid"))
        .expect("the cell wrote its child's pid")
        .trim()
        .parse()
        .unwrap();
    let began = Instant::now();
    while !process_gone(pid) && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone = process_gone(pid);
    if !gone {
        // Do not leave it behind for the next test run. SAFETY: kill(2) on a pid read just now;
        // it is the sleep the cell started (not yet reaped, so not reused).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(gone, "the kernel's child {pid} outlived it");
    sb.assert_runtime_dir_clean();
}

#[test]
fn sigterm_cleans_up_like_ctrl_c_writes_what_ran_and_exits_143() {
    let sb = Sandbox::new("sigterm");
    let input = sb.write_notebook(
        "t.ipynb",
        &notebook(vec![
            code("print('first')"),
            code(&support::sleeping_cell(&sb.path("began"))),
            code("print('never')"),
        ]),
    );
    let mut child = spawn_gpushare(&sb, &["run", input.to_str().unwrap()]);
    support::wait_for_cell(&sb.path("began"));
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().expect("waiting for gpushare");
    let err = read_stderr(&mut child);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    let nb = read(&sb.path("t.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "first\n");
    assert!(
        outputs(&nb, 1)
            .iter()
            .any(|o| o["ename"] == "KeyboardInterrupt"),
        "{:?}",
        outputs(&nb, 1)
    );
    assert!(outputs(&nb, 2).is_empty());
    sb.assert_runtime_dir_clean();
}

#[test]
fn a_cell_without_execute_reply_fails_like_under_nbclient() {
    let sb = Sandbox::new("noreply");
    // The kernel keeps running and reports idle, but drops every execute_reply from here on.
    let input = sb.write_notebook(
        "n.ipynb",
        &notebook(vec![
            code(
                "kernel = get_ipython().kernel\n\
                 send = kernel.session.send\n\
                 def no_reply(stream, msg_or_type, *args, **kwargs):\n\
                 \x20   kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type['header']['msg_type']\n\
                 \x20   if kind == 'execute_reply':\n\
                 \x20       return None\n\
                 \x20   return send(stream, msg_or_type, *args, **kwargs)\n\
                 kernel.session.send = no_reply\n\
                 print('patched')",
            ),
            code("print('never')"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(
        err.contains("cell 1") && err.contains("no execute_reply"),
        "{err}"
    );
    assert!(!err.contains("cells ran"), "{err}");
    let nb = read(&sb.path("n.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "patched\n");
    assert!(outputs(&nb, 1).is_empty());
    sb.assert_runtime_dir_clean();
    // nbclient waits for the reply and fails the cell when it does not come.
    let (error, _) = nbclient_run(&sb, &input, Some(5));
    assert!(!error.is_empty(), "nbclient counts the cell as failed too");
}

#[test]
fn bytes_that_are_not_utf8_become_replacement_characters_as_in_nbclient() {
    let sb = Sandbox::new("surrogates");
    let input = sb.write_notebook(
        "s.ipynb",
        &notebook(vec![
            code("print('bad \\udcff')\nprint('ok')"),
            code("print(b'caf\\xe9.txt'.decode('utf-8', 'surrogateescape'))"),
            code("raise ValueError('bad \\udcff')"),
            code("print('never')"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1, "the error fails the run: {err}");
    assert!(
        err.contains("cell 3") && err.contains("ValueError"),
        "{err}"
    );
    let out_path = sb.path("s.executed.ipynb");
    let nb = read(&out_path);
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "bad \u{fffd}\nok\n");
    assert_eq!(text(&outputs(&nb, 1)[0]["text"]), "caf\u{fffd}.txt\n");
    let error = &outputs(&nb, 2)[0];
    assert_eq!(error["ename"], "ValueError");
    assert_eq!(error["evalue"], "bad \u{fffd}");
    assert!(outputs(&nb, 3).is_empty());
    assert_valid_nbformat(&out_path);

    let (nbclient_error, reference) = nbclient_run(&sb, &input, None);
    assert_eq!(nbclient_error, "CellExecutionError");
    for cell in 0..3 {
        let ours: Vec<_> = outputs(&nb, cell)
            .iter()
            .map(|o| {
                (
                    o["output_type"].clone(),
                    text(&o["text"]),
                    o["evalue"].clone(),
                )
            })
            .collect();
        let theirs: Vec<_> = outputs(&reference, cell)
            .iter()
            .map(|o| {
                (
                    o["output_type"].clone(),
                    text(&o["text"]),
                    o["evalue"].clone(),
                )
            })
            .collect();
        assert_eq!(ours, theirs, "cell {cell}");
    }
}

#[test]
fn numbers_are_kept_as_written() {
    let sb = Sandbox::new("numbers");
    let path = sb.path("num.ipynb");
    // Written by hand: a serde_json::Value without arbitrary precision could not even hold it.
    let nb_text = r#"{"cells": [{"cell_type": "code", "execution_count": null, "id": "c1", "metadata": {},
        "outputs": [], "source": "from IPython.display import JSON, display\ndisplay(JSON({'f': 3.6040260791778564, 'big': 10**30, 'neg': -2**63-1, 'small': 1e-05}))"}],
      "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   "timing": 3.6040260791778564, "big": 1000000000000000000000000000000, "neg": -9223372036854775809},
      "nbformat": 4, "nbformat_minor": 5}"#;
    std::fs::write(&path, nb_text).unwrap();
    let (status, _, err) = sb.gpushare(&["run", path.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let out_path = sb.path("num.executed.ipynb");
    let written = std::fs::read_to_string(&out_path).unwrap();
    for literal in [
        "\"timing\": 3.6040260791778564",
        "\"big\": 1000000000000000000000000000000",
        "\"neg\": -9223372036854775809",
        "\"f\": 3.6040260791778564",
        "\"big\": 1000000000000000000000000000000",
        "\"neg\": -9223372036854775809",
        "\"small\": 1e-05",
    ] {
        assert!(
            written.contains(literal),
            "{literal} is missing from:\n{written}"
        );
    }
    // Python reads the same numbers back and would write the very same bytes.
    assert_valid_nbformat(&out_path);
}

#[test]
fn an_output_nbformat_rejects_fails_the_cell_as_in_nbclient_and_is_not_written() {
    let sb = Sandbox::new("invalid");
    let input = sb.write_notebook(
        "bad.ipynb",
        &notebook(vec![
            code(
                "print('before')\n\
                 display({'text/plain': 'raw', 'application/x-custom': {'k': 1}}, raw=True)\n\
                 print('after')",
            ),
            code("print('never')"),
        ]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(
        err.contains("cell 1") && err.contains("application/x-custom"),
        "{err}"
    );
    let out_path = sb.path("bad.executed.ipynb");
    assert_valid_nbformat(&out_path);
    let nb = read(&out_path);
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "before\nafter\n");
    assert!(outputs(&nb, 1).is_empty());
    let (error, _) = nbclient_run(&sb, &input, None);
    assert_eq!(error, "NotebookValidationError");
}

/// `model_id`s differ between runs; replace them with a placeholder.
fn without_model_ids(outputs: &[Value]) -> Vec<Value> {
    outputs
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if let Some(view) = o.pointer_mut("/data/application~1vnd.jupyter.widget-view+json") {
                view["model_id"] = json!("ID");
            }
            // nbformat splits text into lines when it writes; nbclient's in-memory copy does not.
            if o["text"].is_array() {
                o["text"] = json!(text(&o["text"]));
            }
            if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
                for value in data.values_mut() {
                    if value
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_string))
                    {
                        *value = json!(text(value));
                    }
                }
            }
            o
        })
        .collect()
}

#[test]
fn output_widgets_capture_their_output_as_in_nbclient() {
    let sb = Sandbox::new("widgets");
    let mut nb = notebook(vec![
        code(
            "import ipywidgets as w\n\
             from IPython.display import clear_output\n\
             print('cell own')\n\
             out = w.Output()\n\
             display(out)\n\
             with out:\n    print('in widget')\n    clear_output()\n    print('after clear')\n\
             print('cell after')",
        ),
        // Sorted: the key order of a dict the front end sent is not part of the outcome.
        code("print([sorted(o.items()) for o in out.outputs])"),
    ]);
    nb["metadata"]["widgets"] = json!({"application/vnd.jupyter.widget-state+json": {
        "state": {"stale-model": {"model_name": "X", "state": {}}}, "version_major": 2, "version_minor": 0}});
    let input = sb.write_notebook("w.ipynb", &nb);
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(
        status, 0,
        "{err} (is ipywidgets importable by the test Python?)"
    );
    let out_path = sb.path("w.executed.ipynb");
    assert_valid_nbformat(&out_path);
    let ours = read(&out_path);
    let cell = without_model_ids(outputs(&ours, 0));
    assert_eq!(
        cell.iter().map(|o| text(&o["text"])).collect::<Vec<_>>(),
        ["cell own\n", "", "cell after\n"],
        "clear_output inside the widget leaves the cell alone; the widget's output is not here"
    );
    assert_eq!(
        text(&outputs(&ours, 1)[0]["text"]),
        "[[('name', 'stdout'), ('output_type', 'stream'), ('text', 'after clear\\n')]]\n",
        "the kernel hears what its widget holds"
    );
    let state = &ours["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"];
    assert!(
        state.get("stale-model").is_none(),
        "the input's widget state is replaced"
    );
    let output_model = state
        .as_object()
        .unwrap()
        .values()
        .find(|w| w["model_name"] == "OutputModel")
        .expect("the Output widget's state is recorded");
    assert_eq!(
        output_model["state"]["outputs"],
        json!([{"output_type": "stream", "name": "stdout", "text": "after clear\n"}])
    );

    // A timeout, so that nbclient cannot hang the test when it misses a message under load.
    let (error, reference) = nbclient_run(&sb, &input, Some(60));
    assert_eq!(error, "");
    for index in 0..2 {
        assert_eq!(
            without_model_ids(outputs(&ours, index)),
            without_model_ids(outputs(&reference, index)),
            "cell {index}"
        );
    }
    assert_eq!(widget_model_names(&ours), widget_model_names(&reference));
}

/// The sorted `model_name`s of the widget state a run recorded in `metadata.widgets`.
fn widget_model_names(nb: &Value) -> Vec<String> {
    let mut names: Vec<String> = nb
        .pointer("/metadata/widgets/application~1vnd.jupyter.widget-state+json/state")
        .and_then(Value::as_object)
        .map(|state| {
            state
                .values()
                .map(|w| w["model_name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_markdown_cell_tagged_parameters_anchors_the_injected_cell() {
    let sb = Sandbox::new("mdparams");
    let mut md = json!({"cell_type": "markdown", "id": "md", "metadata": {"tags": ["parameters"]}, "source": "Parameters: n"});
    md["metadata"]["tags"] = json!(["parameters"]);
    let input = sb.write_notebook(
        "p.ipynb",
        &notebook(vec![code("n = 1"), md, code("print(n)")]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "-p", "n=5"]);
    assert_eq!(status, 0, "{err}");
    assert!(!err.contains("injected at the top"), "{err}");
    let nb = read(&sb.path("p.executed.ipynb"));
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[2]["metadata"]["tags"], json!(["injected-parameters"]));
    assert_eq!(text(&cells[2]["source"]), "# Parameters\nn = 5\n");
    assert_eq!(text(&outputs(&nb, 3)[0]["text"]), "5\n");
}

// ---------------------------------------------------------------------------------------------
// The same notebook through `gpushare run` and through nbclient, one test per kind of behaviour
// (errors, clear_output, display updates, output widgets, stdin, interrupts,
// parameters, odd bytes). The bar is nbclient's outcome.

/// How [`assert_same_as_nbclient`] runs a notebook on both sides.
#[derive(Default)]
struct Both<'a> {
    /// Arguments to `gpushare run` after the input path.
    args: &'a [&'a str],
    /// nbclient's per-cell timeout; `None` for none.
    timeout: Option<u64>,
    /// nbclient interrupts the kernel at a timeout (as `gpushare run` always does) rather than
    /// giving up on the cell.
    interrupt_on_timeout: bool,
    /// The cells nbclient runs when they are not the input's: for parameters, the notebook as
    /// papermill injects them (nbclient itself knows no parameters).
    reference: Option<Vec<Value>>,
    /// Cells from this index on are compared by source only: a kernel that dies inside one may or
    /// may not have sent that cell's messages (its execute_input, its prints) before it went, in
    /// either runner; the run's outcome is compared all the same.
    unsettled_from: Option<usize>,
}

/// What both runs left, for a test's own extra checks.
struct BothRuns {
    status: i32,
    err: String,
    ours: Value,
    nbclient_error: String,
}

/// Outputs as they are compared with nbclient's. Only representation is normalised, never
/// content:
/// - widget `model_id`s are fresh uuids in every run, and nbformat's line splitting of text
///   happens when a notebook is written, not in nbclient's in-memory copy ([`without_model_ids`]);
/// - consecutive stream outputs of one name are merged: `gpushare run` merges them as JupyterLab
///   shows them, nbclient (`coalesce_streams=False`) keeps one output per kernel message, and how
///   the kernel batched its prints into messages is timing, not outcome.
fn comparable(outputs: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for output in without_model_ids(outputs) {
        if let Some(last) = merged.last_mut()
            && output["output_type"] == "stream"
            && last["output_type"] == "stream"
            && last["name"] == output["name"]
        {
            last["text"] = json!(text(&last["text"]) + &text(&output["text"]));
            continue;
        }
        merged.push(output);
    }
    merged
}

/// The recorded state of every widget, as sorted JSON texts: model ids are fresh in every run
/// (so `IPY_MODEL_<id>` references between widgets become `IPY_MODEL_ID`), and an Output
/// widget's `outputs` are compared as cells' are ([`comparable`]).
fn widget_states(nb: &Value) -> Vec<String> {
    fn without_ids(value: &mut Value) {
        match value {
            Value::String(s) if s.starts_with("IPY_MODEL_") => *s = "IPY_MODEL_ID".into(),
            Value::Array(items) => items.iter_mut().for_each(without_ids),
            Value::Object(map) => map.values_mut().for_each(without_ids),
            _ => {}
        }
    }
    let mut all: Vec<String> = nb
        .pointer("/metadata/widgets/application~1vnd.jupyter.widget-state+json/state")
        .and_then(Value::as_object)
        .map(|state| {
            state
                .values()
                .map(|w| {
                    let mut w = w.clone();
                    if let Some(outputs) = w["state"]["outputs"].as_array() {
                        w["state"]["outputs"] = json!(comparable(outputs));
                    }
                    without_ids(&mut w);
                    // Compared as data: the two writers need not insert keys in the same order.
                    w.sort_all_objects();
                    serde_json::to_string(&w).unwrap()
                })
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    all
}

/// Run `cells` through `gpushare run` and through nbclient (in the same sandbox, so in the same
/// kind of kernel) and assert the same outcome: both succeed or both fail, the same cells (type,
/// source, tags) in the same order, and per code cell the same execution count and the same
/// outputs up to [`comparable`]. Cell metadata is not compared: nbclient adds its timing there
/// (`metadata.execution`, `record_timing`), which is wall-clock time, not outcome.
fn assert_same_as_nbclient(tag: &str, cells: Vec<Value>, how: Both) -> BothRuns {
    let sb = Sandbox::new(tag);
    let input = sb.write_notebook("ours.ipynb", &notebook(cells));
    let out_path = sb.path("ours.executed.ipynb");
    let mut args = vec!["run", input.to_str().unwrap()];
    args.extend_from_slice(how.args);
    let (status, _, err) = sb.gpushare(&args);
    assert!(status == 0 || status == 1, "exit {status}: {err}");
    assert_valid_nbformat(&out_path);
    let ours = read(&out_path);
    sb.assert_runtime_dir_clean();

    let reference_input = match how.reference {
        Some(cells) => sb.write_notebook("reference.ipynb", &notebook(cells)),
        None => input.clone(),
    };
    let (nbclient_error, reference) =
        nbclient_run_with(&sb, &reference_input, how.timeout, how.interrupt_on_timeout);
    assert_eq!(
        status == 0,
        nbclient_error.is_empty(),
        "gpushare exited {status}, nbclient raised {nbclient_error:?}; gpushare said: {err}"
    );
    let (our_cells, their_cells) = (
        ours["cells"].as_array().unwrap(),
        reference["cells"].as_array().unwrap(),
    );
    let shape = |cells: &Vec<Value>| -> Vec<(Value, String, Value)> {
        cells
            .iter()
            .map(|c| {
                (
                    c["cell_type"].clone(),
                    text(&c["source"]),
                    c.pointer("/metadata/tags").cloned().unwrap_or(json!([])),
                )
            })
            .collect()
    };
    assert_eq!(shape(our_cells), shape(their_cells), "the cells differ");
    for (index, (a, b)) in our_cells.iter().zip(their_cells).enumerate() {
        if a["cell_type"] != "code" || how.unsettled_from.is_some_and(|from| index >= from) {
            continue;
        }
        assert_eq!(
            a["execution_count"], b["execution_count"],
            "cell {index}: execution count"
        );
        assert_eq!(
            comparable(a["outputs"].as_array().unwrap()),
            comparable(b["outputs"].as_array().unwrap()),
            "cell {index}: outputs (left: gpushare run, right: nbclient)"
        );
    }
    assert_eq!(
        widget_model_names(&ours),
        widget_model_names(&reference),
        "widget models"
    );
    assert_eq!(
        widget_states(&ours),
        widget_states(&reference),
        "the widgets' recorded state"
    );
    BothRuns {
        status,
        err,
        ours,
        nbclient_error,
    }
}

#[test]
fn errors_fail_or_pass_the_run_as_in_nbclient() {
    // An allowed error (raises-exception) lets the run go on; an error raised deep in a call
    // stops it after that cell's own output; later cells keep no output and no count.
    let run = assert_same_as_nbclient(
        "same-errors",
        vec![
            code("print('first')"),
            tagged(
                "print('before')\nraise ValueError('expected')",
                "raises-exception",
            ),
            tagged("def broken(:\n    pass", "raises-exception"),
            code(
                "def inner(d):\n    return d['missing']\n\
                 def outer():\n    return inner({})\n\
                 print('partial')\nouter()",
            ),
            code("print('never')"),
        ],
        Both::default(),
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.nbclient_error, "CellExecutionError");
    assert!(
        run.err.contains("cell 4") && run.err.contains("KeyError"),
        "{}",
        run.err
    );
    let errors: Vec<&Value> = (1..4)
        .map(|i| &outputs(&run.ours, i).last().unwrap()["ename"])
        .collect();
    assert_eq!(errors, ["ValueError", "SyntaxError", "KeyError"]);

    // Errors that are not plain exceptions: SystemExit and a KeyboardInterrupt the code raised.
    let run = assert_same_as_nbclient(
        "same-exits",
        vec![
            tagged("raise KeyboardInterrupt", "raises-exception"),
            code("import sys\nprint('leaving')\nsys.exit(3)"),
            code("print('never')"),
        ],
        Both::default(),
    );
    assert_eq!(run.status, 1, "{}", run.err);

    // Tags: a raises-exception cell that does not raise is fine; a skip-execution cell is not
    // run at all.
    let run = assert_same_as_nbclient(
        "same-tags",
        vec![
            tagged("print('no error after all')", "raises-exception"),
            tagged("1 / 0", "skip-execution"),
            code("print('last')"),
        ],
        Both::default(),
    );
    assert_eq!(run.status, 0, "{}", run.err);

    // IPython's exit() asks the front end to stop the kernel: the cell itself succeeds.
    assert_same_as_nbclient(
        "same-exit",
        vec![code("print('bye')
exit()"), code("print('after exit')")],
        Both {
            timeout: Some(60),
            ..Both::default()
        },
    );

    // A kernel that dies fails the run, after what the cells before it printed. Whether the dying
    // cell's own messages (its execute_input, a print) leave the kernel before os._exit is a race
    // in both runners (clean-clone CI saw each differ): that cell and the next are not compared.
    let run = assert_same_as_nbclient(
        "same-died",
        vec![
            code("print('alive')"),
            code("import os
os._exit(1)"),
            code("print('never')"),
        ],
        Both {
            timeout: Some(60),
            unsettled_from: Some(1),
            ..Both::default()
        },
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.nbclient_error, "DeadKernelError");
}

#[test]
fn clear_output_clears_as_in_nbclient() {
    assert_same_as_nbclient(
        "same-clear",
        vec![
            code(
                "from IPython.display import clear_output, display\n\
                 print('gone')\nclear_output()\nprint('kept')",
            ),
            // wait=True: each clear happens just before the next output, so the last step stays.
            code(
                "for i in range(3):\n    clear_output(wait=True)\n    print(f'step {i}', flush=True)\n\
                 display('shown after the steps')",
            ),
            // A pending clear with nothing after it clears nothing, and does not carry over.
            code("print('stays')\nclear_output(wait=True)"),
            code("print('next cell')"),
            // A display cleared away is not brought back by its update.
            code(
                "display('old', display_id='cleared')\nclear_output()\n\
                 from IPython.display import update_display\n\
                 update_display('resurrected?', display_id='cleared')\nprint('end')",
            ),
            // A pending clear is applied by the traceback too.
            tagged(
                "print('replaced by the error')\nclear_output(wait=True)\nraise ValueError('v')",
                "raises-exception",
            ),
            code("print('last')"),
        ],
        Both::default(),
    );
}

#[test]
fn display_updates_land_as_in_nbclient() {
    let run = assert_same_as_nbclient(
        "same-display",
        vec![
            code(
                "from IPython.display import display, update_display, HTML, Markdown\n\
                 handle = display('zero', display_id=True)\n\
                 display('a', display_id='same')\nprint('between')",
            ),
            // Updates reach outputs of earlier cells; a second display with an id already shown
            // takes its place everywhere, the new output included.
            code("handle.update('one')\ndisplay('b', display_id='same')"),
            code(
                "update_display(HTML('<b>c</b>'), display_id='same', metadata={'m': 1})\n\
                 update_display('ghost', display_id='never-shown')\n\
                 display(Markdown('*md*'), display_id='same')\nprint('done')",
            ),
            code("handle.update({'text/plain': 'raw two'}, raw=True)"),
        ],
        Both::default(),
    );
    assert_eq!(run.status, 0, "{}", run.err);
    let first = &outputs(&run.ours, 0)[1];
    assert_eq!(
        text(&first["data"]["text/markdown"]),
        "*md*",
        "the first display with id `same` shows the last one: {first}"
    );
}

#[test]
fn output_widgets_across_cells_as_in_nbclient() {
    // `output_widgets_capture_their_output_as_in_nbclient` covers capture and clear_output()
    // in one cell; this covers clear_output(wait=True), displays, and a widget that keeps
    // capturing from later cells, and a display id shown again inside the widget (nbclient
    // updates the cell's output with that id too).
    let run = assert_same_as_nbclient(
        "same-widgets",
        vec![
            code(
                "import ipywidgets as w\n\
                 from IPython.display import clear_output, display\n\
                 display('outside', display_id='both')\n\
                 out = w.Output()\ndisplay(out)\n\
                 with out:\n    print('one')\n    clear_output(wait=True)\n    print('two')\n\
                 \x20   display('shown in the widget')\n\
                 \x20   display('inside', display_id='both')\n\
                 print('cell own')",
            ),
            code("with out:\n    print('from cell two')\nprint('cell two own')"),
            // The widget shows the traceback and swallows the exception (ipywidgets'
            // `Output.__exit__`), so the cell succeeds; odd bytes go into the widget too.
            code(
                "with out:\n    print('bad \\udcff')\n    raise ValueError('in the widget')\n\
                 print('went on')",
            ),
            code("print(len(out.outputs))"),
            // Widget state is recorded as the kernel sent it, odd bytes included.
            code("w.HBox([w.Label('label \\udcff'), w.IntSlider(3)])"),
        ],
        Both {
            // nbclient's Output-widget mimic at times stalls a cell until its timeout and then
            // goes on as if nothing happened (seen 2 runs in 10): a short bound keeps that short.
            timeout: Some(15),
            ..Both::default()
        },
    );
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(
        text(&outputs(&run.ours, 0)[0]["data"]["text/plain"]),
        "'inside'",
        "the display shown again inside the widget updates the cell's"
    );
    assert!(
        widget_states(&run.ours)
            .iter()
            .any(|w| w.contains("\"label \u{fffd}\"")),
        "the Label's state is recorded, with a replacement character"
    );
}

#[test]
fn input_without_stdin_fails_as_in_nbclient() {
    // Neither front end allows stdin: input() and getpass() raise in the kernel instead of
    // waiting for an answer that never comes.
    let run = assert_same_as_nbclient(
        "same-stdin",
        vec![
            code(
                "try:\n    input('name? ')\nexcept Exception as e:\n    print(type(e).__name__, e)",
            ),
            tagged(
                "import getpass\ngetpass.getpass('pw? ')",
                "raises-exception",
            ),
            code("print('asking')\nanswer = input('again? ')"),
            code("print('never')"),
        ],
        Both {
            // A runner that waited for stdin would hang: a bound keeps the test finite.
            timeout: Some(60),
            ..Both::default()
        },
    );
    assert_eq!(run.status, 1);
    assert_eq!(
        outputs(&run.ours, 2).last().unwrap()["ename"],
        "StdinNotImplementedError"
    );
}

#[test]
fn a_timeout_interrupts_the_cell_as_nbclient_interrupt_on_timeout_does() {
    // `gpushare run` interrupts a cell past its timeout, records where it stopped and fails the
    // run: nbclient with interrupt_on_timeout=True records the same, and fails on the
    // KeyboardInterrupt it gets back.
    let cells = vec![
        code("print('quick')"),
        code("import time\nprint('started', flush=True)\ntime.sleep(60)"),
        code("print('never')"),
    ];
    let run = assert_same_as_nbclient(
        "same-timeout",
        cells.clone(),
        Both {
            // The first cell meets 10 s on any machine; the sleep of 60 s never does.
            args: &["--timeout", "10"],
            timeout: Some(10),
            interrupt_on_timeout: true,
            ..Both::default()
        },
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.nbclient_error, "CellExecutionError");
    assert_eq!(
        outputs(&run.ours, 1).last().unwrap()["ename"],
        "KeyboardInterrupt"
    );
    // nbclient's default gives up on the cell rather than interrupting it, and fails the run
    // too (without the traceback: it never asked where the cell was).
    let sb = Sandbox::new("same-timeout-default");
    let input = sb.write_notebook("t.ipynb", &notebook(cells));
    let (error, _) = nbclient_run(&sb, &input, Some(10));
    assert_eq!(error, "CellTimeoutError");
}

/// The cell papermill injects for `params` (its Python translator: a comment line, then one
/// `name = value` line each; the values here are ints and floats, which it writes as Python
/// does).
fn papermill_injected(params: &[(&str, &str)]) -> Value {
    let mut source = String::from("# Parameters\n");
    for (name, value) in params {
        source.push_str(&format!("{name} = {value}\n"));
    }
    tagged(&source, "injected-parameters")
}

#[test]
fn parameters_are_injected_as_papermill_does_and_run_as_in_nbclient() {
    // Tagged code cell: the injected cell follows it, and wins over its defaults.
    let intro =
        json!({"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Intro"});
    let defaults = tagged("n = 1\nf = 0.5\nkept = 'default'", "parameters");
    let body = code("print(n * f, kept)");
    let injected = papermill_injected(&[("n", "5"), ("f", "2.5")]);
    let run = assert_same_as_nbclient(
        "same-params",
        vec![intro.clone(), defaults.clone(), body.clone()],
        Both {
            args: &["-p", "n=5", "-p", "f=2.5"],
            reference: Some(vec![intro, defaults, injected.clone(), body]),
            ..Both::default()
        },
    );
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(text(&outputs(&run.ours, 3)[0]["text"]), "12.5 default\n");

    // Tagged markdown cell: papermill anchors on any cell with the tag.
    let first = code("n = 1\nf = 1.0");
    let mut md =
        json!({"cell_type": "markdown", "id": "md", "metadata": {}, "source": "Parameters: n, f"});
    md["metadata"]["tags"] = json!(["parameters"]);
    let body = code("print(n * f)");
    let run = assert_same_as_nbclient(
        "same-mdparams",
        vec![first.clone(), md.clone(), body.clone()],
        Both {
            args: &["-p", "n=5", "-p", "f=2.5"],
            reference: Some(vec![first, md, injected.clone(), body]),
            ..Both::default()
        },
    );
    assert_eq!(text(&outputs(&run.ours, 3)[0]["text"]), "12.5\n");

    // No cell tagged `parameters`: at the top.
    let body = code("print(n * f)");
    let run = assert_same_as_nbclient(
        "same-topparams",
        vec![body.clone()],
        Both {
            args: &["-p", "n=5", "-p", "f=2.5"],
            reference: Some(vec![injected.clone(), body]),
            ..Both::default()
        },
    );
    assert!(run.err.contains("injected at the top"), "{}", run.err);

    // An injected cell an earlier run left is replaced where it stands, as papermill does.
    let defaults = tagged("n = 1\nf = 1.0", "parameters");
    let between = code("print('between', n)");
    let stale = tagged("# Parameters\nn = 99\n", "injected-parameters");
    let body = code("print(n * f)");
    assert_same_as_nbclient(
        "same-reparams",
        vec![defaults.clone(), between.clone(), stale, body.clone()],
        Both {
            args: &["-p", "n=5", "-p", "f=2.5"],
            reference: Some(vec![defaults, between, injected, body]),
            ..Both::default()
        },
    );
}

#[test]
fn odd_bytes_and_characters_come_out_as_in_nbclient() {
    // `bytes_that_are_not_utf8_become_replacement_characters_as_in_nbclient` covers lone
    // surrogates in print and in an error's message; these reach displays, JSON outputs, stderr,
    // results and tracebacks, beside characters that are valid but awkward.
    let run = assert_same_as_nbclient(
        "same-bytes",
        vec![
            code(
                "import sys\n\
                 from IPython.display import display, JSON\n\
                 sys.stderr.write('err \\udcff \\x00 nul\\n'); sys.stderr.flush()\n\
                 display({'text/plain': 'plain \\udcfe', 'text/html': '<i>\\udcff</i>'}, raw=True)\n\
                 display(JSON({'key \\udcff': ['v \\udcfe', 1.5], 'ok': 'ü \\u2028 🚀'}))",
            ),
            // repr() escapes what is not printable, so the raw characters come from a repr of
            // one's own.
            code(
                "class R:\n    def __repr__(self):\n        return 'result \\udcff \\x1b[31mred\\x1b[0m'\n\
                 \x20   def _repr_html_(self):\n        return '<b>\\udcfe</b>'\n\
                 R()",
            ),
            code("print('a\\rb\\x08c \\ufeff \\u202e end')"),
            code("import os\nos.fsdecode(b'caf\\xe9.txt')"),
            tagged(
                "def f():\n    raise RuntimeError('deep \\udcff')\nf()",
                "raises-exception",
            ),
            code("print('after')"),
        ],
        Both::default(),
    );
    assert_eq!(run.status, 0, "{}", run.err);
    assert_eq!(
        text(&outputs(&run.ours, 1)[0]["data"]["text/plain"]),
        "result \u{fffd} \x1b[31mred\x1b[0m"
    );
}
