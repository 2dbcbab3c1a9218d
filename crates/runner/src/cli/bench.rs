//! `gpushare bench`: sweep transfer sizes and paths between two frameworks in a fresh kernel.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use serde_json::Value;

use super::output::{Progress, points_in};
use super::{BenchArgs, Config, EXIT_FAILURE, EXIT_USAGE, is_stdout, kernel_for_tools};
use crate::kernel::output_file::write_output_file;
use crate::kernel::params::python_str_literal;
use crate::kernel::client::Message;
use crate::kernel::session::{Cancel, cancelled_by, cancelled_exit_code};
use crate::kernel::{Failure, Kernel, KernelError, StartOptions, strip_ansi};

/// Python source for a comma-separated list: ints stay ints, everything else is a string.
fn python_list(csv: &str) -> String {
    let items: Vec<String> = csv
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.bytes().all(|b| b.is_ascii_digit()) {
                s.to_string()
            } else {
                python_str_literal(s)
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// The sweep's code. `progress` is whether the kernel keeps its progress display (one line in a
/// display of its own, `gpushare.progress`), from which the CLI's bar counts points: only when
/// the CLI draws a bar.
pub(super) fn bench_code(src: &str, dst: &str, args: &BenchArgs, progress: bool) -> String {
    let mut call = format!("{}, {}", python_str_literal(src), python_str_literal(dst));
    if let Some(sizes) = &args.sizes {
        call.push_str(&format!(", sizes={}", python_list(sizes)));
    }
    if let Some(dtype) = &args.dtype {
        call.push_str(&format!(", dtype={}", python_str_literal(dtype)));
    }
    if let Some(device) = &args.device {
        call.push_str(&format!(", device={}", python_str_literal(device)));
    }
    if let Some(paths) = &args.paths {
        let value = if paths.trim() == "all" {
            python_str_literal("all")
        } else {
            python_list(paths)
        };
        call.push_str(&format!(", paths={value}"));
    }
    if let Some(across) = &args.across {
        // A worker process gpushare starts and stops, or a connection to the worker on another
        // host: `with` stops it (or lets the remote one go) even when the sweep fails.
        let worker = if super::bench_args::is_remote(across) {
            format!("host={}", python_str_literal(across))
        } else {
            let device = match &args.worker_device {
                Some(d) => python_str_literal(d),
                None => "None".to_string(),
            };
            format!("device={device}")
        };
        return format!(
            "import gpushare\nwith gpushare.Worker({worker}) as _gs_w:\n    _b = gpushare.bench({call}, across=_gs_w)\n"
        );
    }
    if progress {
        format!("import gpushare\n_b = gpushare.bench({call})\n")
    } else {
        format!("import gpushare\n_b = gpushare.bench({call}, progress=False)\n")
    }
}

/// Shows the benchmark as one display with exact strings: the JSON, the text and the HTML.
const BENCH_MIME: &str = "application/vnd.gpushare.bench-run+json";
const BENCH_FETCH: &str = "import json as _gs_json\n\
from IPython.display import display as _gs_display\n\
_gs_j = _b.to_json()\n\
_gs_display({'application/vnd.gpushare.bench-run+json': {\n\
    'json': _gs_j if isinstance(_gs_j, str) else _gs_json.dumps(_gs_j),\n\
    'text': repr(_b),\n\
    'html': _b._repr_html_() if hasattr(_b, '_repr_html_') else None,\n\
}, 'text/plain': repr(_b)}, raw=True)\n";

struct BenchResult {
    json: String,
    text: String,
    html: Option<String>,
    /// Ctrl-C (or SIGTERM, SIGHUP) stopped the sweep: it holds the points measured before.
    interrupted: bool,
}

/// Before the sweep: warnings say their message only. Python's default form quotes the line that
/// raised them, here the code this module generated (`<kernel cell>.py:9: GpushareWarning:
/// sharebench interrupted` above `_b = gpushare.bench(...)`), which the user never wrote.
const PLAIN_WARNINGS: &str = "import warnings as _gs_warnings\n\
_gs_warnings.formatwarning = lambda message, category, *_args, **_kw: f'warning: {message}\\n'\n";

/// How long fetching the result may take: it only formats what the sweep measured.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

async fn bench_pair(
    src: &str,
    dst: &str,
    args: &BenchArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    err: &mut dyn Write,
) -> Result<BenchResult> {
    let (spec, extra_env) = kernel_for_tools(&config.env, args.kernel.as_deref())?;
    let start = StartOptions {
        startup_timeout: args.startup_timeout,
        cwd: None,
        extra_env,
    };
    // One bar: a spinner while the kernel starts, then the sweep's points (counted from the
    // progress display gpushare.bench keeps in the kernel).
    let mut bar = Progress::new(config, &format!("{src}->{dst}"), "points");
    let kernel = Kernel::start(&spec, &config.env, &start, cancel).await;
    let result = match kernel {
        Ok(mut kernel) => {
            let result = bench_in(&mut kernel, src, dst, args, config.progress, &mut bar, cancel, err).await;
            bar.finish();
            kernel.shutdown().await;
            result
        }
        Err(e) => Err(e.into()),
    };
    bar.finish();
    result
}

#[allow(clippy::too_many_arguments)]
async fn bench_in(
    kernel: &mut Kernel,
    src: &str,
    dst: &str,
    args: &BenchArgs,
    progress: bool,
    bar: &mut Progress,
    cancel: &mut Option<Cancel>,
    err: &mut dyn Write,
) -> Result<BenchResult> {
    let mut found: Option<Value> = None;
    let mut on_message = |m: &Message, bar: &mut Progress| match m.msg_type.as_str() {
        // The sweep's own prints (warnings) are diagnostics: stderr, live.
        "stream" => {
            let text = m.content["text"].as_str().unwrap_or_default();
            let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
        }
        "display_data" | "update_display_data" => {
            if let Some(v) = m.content.pointer(&format!("/data/{}", BENCH_MIME.replace('/', "~1"))) {
                found = Some(v.clone());
            } else if let Some((done, total)) =
                m.content.pointer("/data/text~1plain").and_then(Value::as_str).and_then(points_in)
            {
                bar.count(done, total);
            }
        }
        _ => {}
    };
    let code = format!("{PLAIN_WARNINGS}{}", bench_code(src, dst, args, progress));
    let outcome = kernel.execute(&code, args.timeout, cancel, |m| on_message(m, bar)).await?;
    let interrupted = match outcome.failure {
        None => false,
        // gpushare.bench catches the interrupt between measurements and returns what it measured
        // (the cell then ends `ok`); the table of those points is what Ctrl-C promises.
        Some(Failure::Interrupted) if outcome.reply_status.as_deref() == Some("ok") => true,
        Some(failure) => return Err(sweep_failure(src, dst, failure)),
    };
    bar.finish();
    // The cancel has fired already (it would stop this at once), and this only formats results.
    let outcome = kernel
        .execute(BENCH_FETCH, Some(FETCH_TIMEOUT), &mut None, |m| on_message(m, bar))
        .await?;
    if let Some(failure) = outcome.failure {
        return Err(sweep_failure(src, dst, failure));
    }
    let found = found.context("the kernel did not return the benchmark result")?;
    let text_of = |key: &str| found.get(key).and_then(Value::as_str).map(String::from);
    Ok(BenchResult {
        json: text_of("json").context("the benchmark's to_json() returned nothing")?,
        text: text_of("text").unwrap_or_default(),
        html: text_of("html"),
        interrupted,
    })
}

/// A sweep (or the fetch of its result) that did not finish, as the command's error.
fn sweep_failure(src: &str, dst: &str, failure: Failure) -> anyhow::Error {
    match failure {
        Failure::Error { ename, evalue, traceback } => {
            anyhow!("{src}->{dst}: {}", kernel_error(&ename, &evalue, &traceback))
        }
        Failure::Timeout(t) => anyhow!("{src}->{dst}: timed out after {} s", t.as_secs_f64()),
        Failure::KernelDied { reason, output } => anyhow!("{src}->{dst}: the kernel died: {reason}\n{output}"),
        Failure::Interrupted => KernelError::Interrupted.into(),
        Failure::NoReply => anyhow!("{src}->{dst}: the kernel sent no execute_reply"),
        Failure::InvalidOutput(why) => anyhow!("{src}->{dst}: {why}"),
    }
}

pub(super) async fn bench(
    args: &BenchArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    // Usage errors before any kernel starts (a kernel takes seconds; these, Python's start-up).
    let names: Vec<&str> = args.pairs.iter().flat_map(|(src, dst)| [src.as_str(), dst.as_str()]).collect();
    let python = super::doctor::tool_python(config, args.kernel.as_deref()).ok().map(|(python, ..)| python);
    let checked = check_outputs(args, config)
        .and_then(|()| super::bench_checks::check_frameworks(&names, python.as_deref(), &config.env));
    if let Err(why) = checked {
        writeln!(err, "error: {why}")?;
        return Ok(EXIT_USAGE);
    }
    // With `--json -` or `--html -` stdout carries that document alone, without the tables.
    let stdout_taken = is_stdout(args.json.as_ref()) || is_stdout(args.html.as_ref());
    let mut results = Vec::new();
    let mut interrupted = false;
    // A table that cannot reach stdout (the terminal closed: SIGHUP, then EIO) does not keep the
    // files from being written: they may be the only copy of what was measured.
    let mut stdout_failed: Option<anyhow::Error> = None;
    for (src, dst) in &args.pairs {
        let result = bench_pair(src, dst, args, config, cancel, err).await?;
        if !stdout_taken && stdout_failed.is_none() {
            let heading = if args.pairs.len() > 1 { format!("{src}->{dst}\n") } else { String::new() };
            stdout_failed = writeln!(out, "{heading}{}", result.text.trim_end())
                .and_then(|()| out.flush())
                .context("writing the table to stdout")
                .err();
        }
        interrupted = result.interrupted;
        results.push(result);
        if interrupted {
            // The pairs after it are not started; the files below hold what was measured.
            break;
        }
    }
    if let Some(path) = &args.json {
        let text = if let [only] = results.as_slice() {
            only.json.trim_end().to_string()
        } else {
            let values: Vec<Value> = results
                .iter()
                .map(|r| serde_json::from_str(&r.json))
                .collect::<Result<_, _>>()
                .context("the benchmark's to_json() is not JSON")?;
            serde_json::to_string_pretty(&values)?
        };
        write_output(config, out, path, &(text + "\n"))?;
    }
    if let Some(path) = &args.html {
        let body: Vec<String> = results
            .iter()
            .zip(&args.pairs)
            .map(|(r, (src, dst))| {
                let table = r
                    .html
                    .clone()
                    .unwrap_or_else(|| format!("<pre>{}</pre>", html_escape(&r.text)));
                format!(
                    "<h2>{}</h2>\n{table}",
                    html_escape(&gpushare_core::route::label(src, dst))
                )
            })
            .collect();
        let page = format!(
            "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>gpushare bench</title>\n</head>\n<body>\n{}\n</body>\n</html>\n",
            body.join("\n")
        );
        write_output(config, out, path, &page)?;
    }
    if interrupted {
        // The report may not reach a terminal that closed (SIGHUP); the exit status says it.
        let _ = writeln!(
            err,
            "interrupted ({}): the table holds the points measured before it",
            cancelled_by()
        );
        return Ok(cancelled_exit_code());
    }
    if let Some(e) = stdout_failed {
        return Err(e);
    }
    // A sweep in which nothing worked measured nothing: say so and fail, after the table and
    // files above have shown every cell's reason.
    let mut code = 0;
    for (result, (src, dst)) in results.iter().zip(&args.pairs) {
        if let Some(cells) = nothing_worked(&result.json) {
            writeln!(
                err,
                "error: {src}->{dst}: none of the {cells} cells of the sweep succeeded (the reasons are in the table)"
            )?;
            code = EXIT_FAILURE;
        }
    }
    Ok(code)
}

/// `Some(number of cells)` when a sweep's JSON has no cell that worked (a verdict other than
/// "failed", with a timing); `None` when one did, or when the JSON cannot tell.
/// The kernel's error as one message: `ENAME: EVALUE`, then the traceback's frames. The traceback
/// ends with that same line (a gpushare error's is that line alone, `_render_traceback_`), which
/// was printed twice.
fn kernel_error(ename: &str, evalue: &str, traceback: &[String]) -> String {
    let headline = format!("{ename}: {evalue}");
    let text = strip_ansi(&traceback.join("\n"));
    let frames = text
        .trim_end()
        .strip_suffix(headline.as_str())
        .unwrap_or(&text)
        .trim_end();
    if frames.is_empty() {
        headline
    } else {
        format!("{headline}\n{frames}")
    }
}

fn nothing_worked(json: &str) -> Option<usize> {
    let value: Value = serde_json::from_str(json).ok()?;
    let data = value.get("data").unwrap_or(&value);
    let points = data.get("points")?.as_array()?;
    let worked = |p: &Value| {
        p.get("verdict")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.eq_ignore_ascii_case("failed"))
            && p.get("timing").is_some_and(|t| !t.is_null())
    };
    (!points.iter().any(worked)).then_some(points.len())
}

/// `--json` and `--html` checked before any kernel starts: one file cannot hold both documents
/// (the page replaced the JSON without a word), and a file goes into a directory that exists
/// (a typo in it is not made into new directories).
fn check_outputs(args: &BenchArgs, config: &Config) -> Result<(), String> {
    let files: Vec<(&str, &Path)> = [("--json", &args.json), ("--html", &args.html)]
        .into_iter()
        .filter_map(|(flag, path)| Some((flag, path.as_deref()?)))
        .filter(|(_, path)| path.as_os_str() != "-")
        .collect();
    for (flag, path) in &files {
        let absolute = config.env.absolute(path);
        if absolute.is_dir() {
            return Err(format!("{flag} {}: is a directory; name a file in it", path.display()));
        }
        let dir = absolute.parent().unwrap_or(Path::new("/"));
        if !dir.is_dir() {
            return Err(format!(
                "{flag} {}: the directory {} does not exist; create it first, or name a file in one that does",
                path.display(),
                dir.display()
            ));
        }
    }
    if let [(_, json), (_, html)] = files[..]
        && same_file(&config.env.absolute(json), &config.env.absolute(html))
    {
        return Err(format!(
            "--json {} and --html {} name the same file; write them to two files",
            json.display(),
            html.display()
        ));
    }
    Ok(())
}

/// Whether two paths name one file: the same directory (symlinks resolved) and name, or one
/// file already there under both.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    let resolved = |p: &Path| {
        let dir = p.parent().and_then(|d| std::fs::canonicalize(d).ok());
        dir.zip(p.file_name()).map(|(d, n)| d.join(n))
    };
    a == b || resolved(a).is_some_and(|r| Some(r) == resolved(b))
}

/// Write an output document to `path`, or to stdout for `-`.
fn write_output(config: &Config, out: &mut dyn Write, path: &Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        return out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing to stdout");
    }
    write_output_file(&config.env.absolute(path), text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn a_kernel_error_is_told_once() {
        // A gpushare error's traceback is its own line (in colour): said once, not twice.
        let tb = ["\x1b[31mFrameworkNotInstalledError\x1b[0m: paddle is not installed; pip install paddlepaddle".to_string()];
        let text = kernel_error(
            "FrameworkNotInstalledError",
            "paddle is not installed; pip install paddlepaddle",
            &tb,
        );
        assert_eq!(
            text,
            "FrameworkNotInstalledError: paddle is not installed; pip install paddlepaddle"
        );
        // Another error keeps its frames, under the headline, without repeating it at the end.
        let tb = [
            "Traceback (most recent call last):".to_string(),
            "  File \"x\", line 1".to_string(),
            "ValueError: bad".to_string(),
        ];
        let text = kernel_error("ValueError", "bad", &tb);
        assert_eq!(
            text,
            "ValueError: bad\nTraceback (most recent call last):\n  File \"x\", line 1"
        );
        assert_eq!(text.matches("ValueError: bad").count(), 1);
    }

    #[test]
    fn bench_code_passes_arguments_as_literals() {
        let cli = Cli::try_parse_from([
            "gpushare",
            "bench",
            "torch->jax",
            "--sizes",
            "4KiB,1024",
            "--dtype",
            "float32",
            "--device",
            "cuda:0",
            "--paths",
            "dlpack,host",
        ])
        .unwrap();
        let Command::Bench(args) = cli.command else {
            panic!()
        };
        // Off a terminal the kernel keeps no progress display (nothing would draw it).
        assert_eq!(
            bench_code("torch", "jax", &args, false),
            "import gpushare\n_b = gpushare.bench('torch', 'jax', sizes=['4KiB', 1024], dtype='float32', device='cuda:0', paths=['dlpack', 'host'], progress=False)\n"
        );
        let across = Cli::try_parse_from([
            "gpushare", "bench", "torch->torch", "--across", "processes", "--worker-device", "cuda:1", "--paths",
            "ipc,nccl",
        ])
        .unwrap();
        let Command::Bench(across) = across.command else { panic!() };
        assert_eq!(
            bench_code("torch", "torch", &across, true),
            "import gpushare\nwith gpushare.Worker(device='cuda:1') as _gs_w:\n    _b = gpushare.bench('torch', 'torch', paths=['ipc', 'nccl'], across=_gs_w)\n"
        );
        let remote = Cli::try_parse_from(["gpushare", "bench", "torch->torch", "--across", "10.0.0.2:29600", "--paths", "remote"])
            .unwrap();
        let Command::Bench(remote) = remote.command else { panic!() };
        assert_eq!(
            bench_code("torch", "torch", &remote, true),
            "import gpushare\nwith gpushare.Worker(host='10.0.0.2:29600') as _gs_w:\n    _b = gpushare.bench('torch', 'torch', paths=['remote'], across=_gs_w)\n"
        );
        // On one it does (the CLI's bar counts its points); tqdm is not imported for it, as the
        // kernel's display is not tqdm's.
        assert_eq!(
            bench_code("torch", "jax", &args, true),
            "import gpushare\n_b = gpushare.bench('torch', 'jax', sizes=['4KiB', 1024], dtype='float32', device='cuda:0', paths=['dlpack', 'host'])\n"
        );
    }

    fn point(verdict: &str, timing: Value) -> Value {
        serde_json::json!({"size": 4096, "path": "dlpack", "verdict": verdict, "timing": timing})
    }

    #[test]
    fn a_sweep_without_one_working_cell_is_recognised() {
        let sweep = |points: Vec<Value>| {
            serde_json::json!({"schema": "gpushare.benchmark/1", "data": {"points": points}}).to_string()
        };
        let timing = serde_json::json!({"median": 1e-6});
        assert_eq!(nothing_worked(&sweep(vec![point("failed", Value::Null), point("failed", Value::Null)])), Some(2));
        assert_eq!(nothing_worked(&sweep(vec![])), Some(0));
        assert_eq!(nothing_worked(&sweep(vec![point("failed", Value::Null), point("copied", timing.clone())])), None);
        assert_eq!(nothing_worked(&sweep(vec![point("shared", timing)])), None);
        assert_eq!(nothing_worked("not json"), None);
    }
}
