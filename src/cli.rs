//! The `gpushare` command: `kernel install`, `run`, `bench` and `doctor`.
//!
//! [`run`] is what both the cargo binary and the Python console script (through pyo3) call.
//! [`run_with`] takes the environment and output streams explicitly so tests can run commands
//! in parallel without touching the process environment.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::kernel::kernelspec::{self, DEFAULT_KERNEL_NAME};
use crate::kernel::notebook::default_output_path;
use crate::kernel::params::{Injected, python_str_literal};
use crate::kernel::runner::RunSummary;
use crate::kernel::session::{Cancel, cancelled_by, cancelled_exit_code, ctrl_c_watch};
use crate::kernel::{
    CellFailure, Environment, Failure, InstallTarget, Kernel, KernelError, KernelSpec, Notebook,
    Parameter, RunOptions, StartOptions, find_kernelspec, run_notebook, strip_ansi,
};

/// Exit status when a notebook failed (a cell raised, timed out, or the kernel died).
pub const EXIT_FAILURE: i32 = 1;
/// Exit status for bad arguments (clap's).
pub const EXIT_USAGE: i32 = 2;
/// Exit status after Ctrl-C, as shells report SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Memory settings that let several frameworks share one GPU; the gpushare kernelspec sets
/// them, and `bench`/`doctor` add them when they fall back to a plain kernel.
const MEMORY_ENV: [(&str, &str); 2] = [
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
    ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
];

/// What a command runs with besides its arguments.
#[derive(Clone, Debug)]
pub struct Config {
    pub env: Environment,
    /// Draw a progress bar on the terminal's stderr (hidden anyway when it is not a terminal).
    pub progress: bool,
    /// Turn Ctrl-C into "interrupt the kernel, shut it down, exit 130".
    pub handle_ctrl_c: bool,
    /// Let clap colour help and usage errors.
    pub color: bool,
}

impl Config {
    /// This process's environment, terminal and signals.
    pub fn from_process() -> Self {
        Self {
            env: Environment::from_process(),
            progress: true,
            handle_ctrl_c: true,
            color: true,
        }
    }

    /// An explicit environment, no progress bar, no signal handling, plain text.
    pub fn with_env(env: Environment) -> Self {
        Self {
            env,
            progress: false,
            handle_ctrl_c: false,
            color: false,
        }
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "gpushare",
    version,
    about = "See what really happens when arrays move between array frameworks",
    long_about = "See what really happens when arrays move between array frameworks.\n\n\
                  Runs notebooks and benchmarks in Jupyter kernels (over ZeroMQ, no Python client \
                  needed), installs the gpushare kernel, and reports the GPU environment.",
    after_help = "Examples:\n  gpushare kernel install --sys-prefix\n  gpushare run analysis.ipynb -p n=1000 -p label='run 1'\n  \
                  gpushare bench 'torch->jax' --sizes 4KiB,1MiB,256MiB --json out.json\n  gpushare doctor"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Manage the gpushare Jupyter kernel
    #[command(subcommand)]
    Kernel(KernelCommand),
    /// Execute notebooks in fresh kernels and write them with their outputs
    Run(RunArgs),
    /// Sweep transfer sizes and paths between two frameworks in a fresh kernel
    Bench(BenchArgs),
    /// Print the environment report (frameworks, CUDA driver and devices, memory settings)
    Doctor(DoctorArgs),
}

#[derive(Subcommand, Debug)]
enum KernelCommand {
    /// Install the gpushare kernelspec (like `python -m ipykernel install`)
    ///
    /// The kernel is IPython with the gpushare extension preloaded and memory settings that let
    /// several frameworks share one GPU (XLA_PYTHON_CLIENT_PREALLOCATE=false,
    /// TF_FORCE_GPU_ALLOW_GROWTH=true). It runs the Python that runs this command.
    Install(InstallArgs),
}

#[derive(Args, Debug)]
#[group(id = "target", multiple = false)]
struct InstallArgs {
    /// Install for the current user (the Jupyter data dir) instead of system-wide
    #[arg(long, group = "target")]
    user: bool,
    /// Install into this Python environment's sys.prefix (virtualenv or conda env)
    #[arg(long, group = "target")]
    sys_prefix: bool,
    /// Install under PREFIX/share/jupyter
    #[arg(long, group = "target", value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Kernelspec name
    #[arg(long, default_value = DEFAULT_KERNEL_NAME)]
    name: String,
    /// Name shown in Jupyter's kernel picker [default: "Python 3 (gpushare)"]
    #[arg(long)]
    display_name: Option<String>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Output goes to NAME.executed.ipynb beside each notebook unless -o or --inplace says \
                        otherwise. Cells are numbered from 1, counting every cell. Exit status: 0 when every \
                        notebook ran, 1 when a cell failed, timed out or the kernel died (the notebook is \
                        still written up to that cell), 130 after Ctrl-C, 143 after SIGTERM."
)]
struct RunArgs {
    /// Notebooks to execute, each in its own fresh kernel
    #[arg(required = true, value_name = "NOTEBOOK")]
    notebooks: Vec<PathBuf>,
    /// Output file for one notebook, or directory for several (written as DIR/NAME.ipynb)
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write each executed notebook over its input
    #[arg(long, conflicts_with = "output")]
    inplace: bool,
    /// Set a parameter; VALUE becomes an int, float, True/False/None when it reads like one,
    /// else a string. Injected in a cell after the one tagged `parameters`.
    #[arg(short = 'p', long = "parameter", value_name = "KEY=VALUE")]
    parameters: Vec<String>,
    /// Set a parameter to the string VALUE, whatever it looks like
    #[arg(short = 'r', long = "raw-parameter", value_name = "KEY=VALUE")]
    raw_parameters: Vec<String>,
    /// Time limit per cell, in seconds; a cell that runs longer is interrupted and fails the run
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Seconds to wait for the kernel to start
    #[arg(long, value_name = "S", value_parser = parse_seconds, default_value = "60")]
    startup_timeout: Duration,
    /// Kernel to use [default: the notebook's metadata.kernelspec.name, else python3]
    #[arg(short, long, value_name = "NAME")]
    kernel: Option<String>,
    /// Most output one cell keeps, in MiB; past it output is dropped and the notebook says so
    #[arg(long, value_name = "MIB", default_value_t = crate::kernel::notebook::DEFAULT_OUTPUT_LIMIT >> 20)]
    output_limit: usize,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Quote the pairs: `>` is a redirection to the shell (gpushare bench 'torch->jax')."
)]
struct BenchArgs {
    /// Framework pairs such as torch->jax; each pair runs in a fresh kernel
    #[arg(required = true, value_name = "SRC->DST", value_parser = parse_pair)]
    pairs: Vec<(String, String)>,
    /// Comma-separated sizes, e.g. 4KiB,1MiB,256MiB
    #[arg(long, value_name = "SIZES")]
    sizes: Option<String>,
    /// Element type, e.g. float32
    #[arg(long)]
    dtype: Option<String>,
    /// Device, e.g. cuda:0 or cpu
    #[arg(long)]
    device: Option<String>,
    /// Comma-separated transfer paths (dlpack, capsule, cai, host, pinned, copy, shared) or all
    #[arg(long, value_name = "PATHS")]
    paths: Option<String>,
    /// Write the results as JSON (an array when there are several pairs)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the results as an HTML page
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Kernel to use [default: gpushare, else python3 with gpushare's memory settings]
    #[arg(short, long, value_name = "NAME")]
    kernel: Option<String>,
    /// Time limit for each sweep, in seconds
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Seconds to wait for the kernel to start
    #[arg(long, value_name = "S", value_parser = parse_seconds, default_value = "60")]
    startup_timeout: Duration,
}

#[derive(Args, Debug)]
struct DoctorArgs {
    /// Report on this kernel's Python [default: gpushare, else the Python running gpushare]
    #[arg(short, long, value_name = "NAME")]
    kernel: Option<String>,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs.is_finite() && secs > 0.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!("`{s}`: seconds must be positive"))
    }
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    let (src, dst) = s
        .split_once("->")
        .ok_or_else(|| format!("`{s}` is not of the form SRC->DST"))?;
    let valid = |name: &str| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !valid(src.trim()) || !valid(dst.trim()) {
        return Err(format!(
            "`{s}`: framework names are letters, digits and `_` (e.g. torch->jax)"
        ));
    }
    Ok((src.trim().to_string(), dst.trim().to_string()))
}

/// Run the command line `args` (`args[0]` is the program name) in this process's environment.
pub fn run(args: Vec<String>) -> i32 {
    run_with(
        args,
        &Config::from_process(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
}

/// Run the command line `args` with an explicit configuration and output streams.
pub fn run_with(
    args: Vec<String>,
    config: &Config,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let text = if config.color {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            let _ = if e.use_stderr() {
                write!(err, "{text}")
            } else {
                write!(out, "{text}")
            };
            return e.exit_code();
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(err, "error: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let result = runtime.block_on(async {
        // Only the commands that run kernels take over Ctrl-C; elsewhere it keeps killing us.
        let mut cancel = (config.handle_ctrl_c
            && matches!(cli.command, Command::Run(_) | Command::Bench(_)))
        .then(ctrl_c_watch);
        match cli.command {
            Command::Kernel(KernelCommand::Install(args)) => {
                kernel_install(&args, config, out).map(|()| 0)
            }
            Command::Run(args) => run_notebooks(&args, config, &mut cancel, err).await,
            Command::Bench(args) => bench(&args, config, &mut cancel, out, err).await,
            Command::Doctor(args) => doctor(&args, config, out, err),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            if e.downcast_ref::<KernelError>()
                .is_some_and(|k| matches!(k, KernelError::Interrupted))
            {
                let _ = writeln!(err, "interrupted");
                return cancelled_exit_code();
            }
            let _ = writeln!(err, "error: {e:#}");
            EXIT_FAILURE
        }
    }
}

fn kernel_install(args: &InstallArgs, config: &Config, out: &mut dyn Write) -> Result<()> {
    let target = if args.user {
        InstallTarget::User
    } else if args.sys_prefix {
        InstallTarget::SysPrefix
    } else if let Some(prefix) = &args.prefix {
        InstallTarget::Prefix(prefix.clone())
    } else {
        InstallTarget::System
    };
    let dir = kernelspec::install(
        &config.env,
        &target,
        &args.name,
        args.display_name.as_deref(),
    )
    .with_context(|| format!("installing the `{}` kernelspec", args.name))?;
    writeln!(
        out,
        "Installed kernelspec {} in {}",
        args.name.to_lowercase(),
        dir.display()
    )?;
    Ok(())
}

/// Where each notebook's result goes.
fn output_paths(args: &RunArgs, env: &Environment) -> Result<Vec<PathBuf>> {
    let inputs = &args.notebooks;
    if args.inplace {
        return Ok(inputs.clone());
    }
    let Some(out) = &args.output else {
        return Ok(inputs.iter().map(|p| default_output_path(p)).collect());
    };
    let as_dir = inputs.len() > 1
        || env.absolute(out).is_dir()
        || out.as_os_str().to_string_lossy().ends_with('/');
    if !as_dir {
        return Ok(vec![out.clone()]);
    }
    let mut seen = HashMap::new();
    inputs
        .iter()
        .map(|input| {
            let name = input
                .file_name()
                .with_context(|| format!("{}: not a file name", input.display()))?;
            if let Some(other) = seen.insert(name.to_os_string(), input) {
                bail!(
                    "{} and {} would both be written to {}; run them separately",
                    other.display(),
                    input.display(),
                    out.join(name).display()
                );
            }
            Ok(out.join(name))
        })
        .collect()
}

fn progress_bar(config: &Config, name: &str) -> ProgressBar {
    let target = if config.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:.bold} {spinner} [{bar:30.cyan/blue}] {pos}/{len} cells {elapsed} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(name.to_string());
    bar.set_message("starting kernel");
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn parameters(args: &RunArgs) -> Result<Vec<Parameter>> {
    let plain = args.parameters.iter().map(|p| Parameter::parse(p, false));
    let raw = args
        .raw_parameters
        .iter()
        .map(|p| Parameter::parse(p, true));
    Ok(plain.chain(raw).collect::<Result<_, _>>()?)
}

async fn run_notebooks(
    args: &RunArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    err: &mut dyn Write,
) -> Result<i32> {
    let env = &config.env;
    let outputs = output_paths(args, env)?;
    let options = RunOptions {
        timeout: args.timeout,
        startup_timeout: args.startup_timeout,
        params: parameters(args)?,
        output_limit: args.output_limit.saturating_mul(1 << 20),
    };
    let mut specs: BTreeMap<String, KernelSpec> = BTreeMap::new();
    let mut failed = 0;
    for (input, output) in args.notebooks.iter().zip(&outputs) {
        let label = input.display().to_string();
        let mut nb = match Notebook::read(&env.absolute(input)) {
            Ok(nb) => nb,
            Err(e) => {
                writeln!(err, "error: {e}")?;
                failed += 1;
                continue;
            }
        };
        let name = args
            .kernel
            .clone()
            .or_else(|| nb.kernel_name().map(String::from))
            .unwrap_or_else(|| "python3".into());
        let spec = match specs.get(&name) {
            Some(spec) => spec.clone(),
            None => match find_kernelspec(env, &name) {
                Ok(spec) => specs.entry(name).or_insert(spec).clone(),
                Err(e) => {
                    writeln!(err, "error: {label}: {e}")?;
                    failed += 1;
                    continue;
                }
            },
        };
        let bar = progress_bar(config, &label);
        let mut started = false;
        let began = Instant::now();
        let dir = env.absolute(input).parent().map(Path::to_path_buf);
        let result = run_notebook(
            &mut nb,
            dir.as_deref(),
            &spec,
            env,
            &options,
            cancel,
            &mut |done, total| {
                if !started {
                    started = true;
                    bar.set_message("");
                }
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        )
        .await;
        bar.finish_and_clear();

        // Whatever ran is written, failure or not; a kernel that never started ran nothing.
        let wrote = if started {
            nb.write(&env.absolute(output))
                .with_context(|| format!("writing {}", output.display()))?;
            true
        } else {
            false
        };
        match result {
            Ok(summary) => {
                report_injection(&summary, &label, err)?;
                match &summary.failure {
                    None => writeln!(
                        err,
                        "{label}: {} cells ran in {:.1} s -> {}",
                        summary.cells_run,
                        began.elapsed().as_secs_f64(),
                        output.display()
                    )?,
                    Some(failure) => {
                        report_failure(&label, &nb, failure, err)?;
                        writeln!(err, "wrote what ran to {}", output.display())?;
                        if failure.failure == Failure::Interrupted {
                            return Ok(cancelled_exit_code());
                        }
                        failed += 1;
                    }
                }
            }
            Err(KernelError::Interrupted) => {
                writeln!(err, "interrupted: {label}")?;
                return Ok(cancelled_exit_code());
            }
            Err(e) => {
                writeln!(err, "error: {label}: {e}")?;
                if wrote {
                    writeln!(err, "wrote what ran to {}", output.display())?;
                }
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAILURE })
}

fn report_injection(summary: &RunSummary, label: &str, err: &mut dyn Write) -> std::io::Result<()> {
    if summary.injected == Some(Injected::AtTop) {
        writeln!(
            err,
            "warning: {label}: no cell is tagged `parameters`; parameters were injected at the top"
        )?;
    }
    Ok(())
}

/// nbclient-style report: which cell, its source, and the kernel's traceback without colours.
fn report_failure(
    label: &str,
    nb: &Notebook,
    failure: &CellFailure,
    err: &mut dyn Write,
) -> std::io::Result<()> {
    let cell = failure.cell_index + 1;
    let count = failure
        .execution_count
        .map_or_else(String::new, |n| format!(" (In [{n}])"));
    let headline = match &failure.failure {
        Failure::Error { ename, evalue, .. } => {
            format!("error: {label}: cell {cell}{count} raised {ename}: {evalue}")
        }
        Failure::Timeout(t) => format!(
            "error: {label}: cell {cell}{count} timed out after {} s",
            t.as_secs_f64()
        ),
        Failure::KernelDied { reason, .. } => {
            format!("error: {label}: the kernel died while running cell {cell}{count}: {reason}")
        }
        Failure::Interrupted => format!(
            "interrupted: {label}: cell {cell}{count} was interrupted ({})",
            cancelled_by()
        ),
        Failure::NoReply => format!(
            "error: {label}: cell {cell}{count} got no execute_reply from the kernel"
        ),
        Failure::InvalidOutput(why) => {
            format!("error: {label}: cell {cell}{count} wrote an invalid output: {why}")
        }
    };
    writeln!(err, "{headline}")?;
    writeln!(err, "------------------")?;
    writeln!(err, "{}", failure.source.trim_end())?;
    writeln!(err, "------------------")?;
    match &failure.failure {
        Failure::Error { traceback, .. } => {
            let traceback = if traceback.is_empty() {
                error_traceback(nb, failure.cell_index)
            } else {
                traceback.clone()
            };
            writeln!(err, "\n{}", strip_ansi(&traceback.join("\n")))?;
        }
        Failure::KernelDied { output, .. } if !output.trim().is_empty() => {
            writeln!(err, "the kernel's last output:\n{output}")?;
        }
        _ => {}
    }
    Ok(())
}

/// The traceback of the cell's `error` output (the reply may come without one).
fn error_traceback(nb: &Notebook, index: usize) -> Vec<String> {
    nb.cells()[index]["outputs"]
        .as_array()
        .and_then(|outs| outs.iter().rev().find(|o| o["output_type"] == "error"))
        .and_then(|o| o["traceback"].as_array())
        .map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// `--kernel` if given; else the gpushare kernel; else python3 plus gpushare's memory settings.
fn kernel_for_tools(
    env: &Environment,
    name: Option<&str>,
) -> Result<(KernelSpec, &'static [(&'static str, &'static str)])> {
    if let Some(name) = name {
        return Ok((find_kernelspec(env, name)?, &[]));
    }
    match find_kernelspec(env, DEFAULT_KERNEL_NAME) {
        Ok(spec) => Ok((spec, &[])),
        Err(KernelError::KernelNotFound { .. }) => {
            Ok((find_kernelspec(env, "python3")?, &MEMORY_ENV))
        }
        Err(e) => Err(e.into()),
    }
}

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

fn bench_code(src: &str, dst: &str, args: &BenchArgs) -> String {
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
    format!("import gpushare\n_b = gpushare.bench({call})\n")
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
}

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
    // Our bar covers the kernel's start; the sweep then shows its own progress on stderr.
    let bar = progress_bar(config, &format!("{src}->{dst}"));
    let kernel = Kernel::start(&spec, &config.env, &start, cancel).await;
    bar.finish_and_clear();
    let mut kernel = kernel?;
    let result = bench_in(&mut kernel, src, dst, args, cancel, err).await;
    kernel.shutdown().await;
    result
}

async fn bench_in(
    kernel: &mut Kernel,
    src: &str,
    dst: &str,
    args: &BenchArgs,
    cancel: &mut Option<Cancel>,
    err: &mut dyn Write,
) -> Result<BenchResult> {
    let mut found: Option<Value> = None;
    for code in [bench_code(src, dst, args), BENCH_FETCH.to_string()] {
        let outcome = kernel
            .execute(&code, args.timeout, cancel, |m| match m.msg_type.as_str() {
                // The sweep's own prints (progress, warnings) are diagnostics: stderr, live.
                "stream" => {
                    let text = m.content["text"].as_str().unwrap_or_default();
                    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
                }
                "display_data" => {
                    if let Some(v) = m
                        .content
                        .pointer(&format!("/data/{}", BENCH_MIME.replace('/', "~1")))
                    {
                        found = Some(v.clone());
                    }
                }
                _ => {}
            })
            .await?;
        match outcome.failure {
            None => {}
            Some(Failure::Error {
                ename,
                evalue,
                traceback,
            }) => {
                bail!(
                    "{src}->{dst}: {ename}: {evalue}\n{}",
                    strip_ansi(&traceback.join("\n"))
                )
            }
            Some(Failure::Timeout(t)) => {
                bail!("{src}->{dst}: timed out after {} s", t.as_secs_f64())
            }
            Some(Failure::KernelDied { reason, output }) => {
                bail!("{src}->{dst}: the kernel died: {reason}\n{output}")
            }
            Some(Failure::Interrupted) => return Err(KernelError::Interrupted.into()),
            Some(Failure::NoReply) => bail!("{src}->{dst}: the kernel sent no execute_reply"),
            Some(Failure::InvalidOutput(why)) => bail!("{src}->{dst}: {why}"),
        }
    }
    let found = found.context("the kernel did not return the benchmark result")?;
    let text_of = |key: &str| found.get(key).and_then(Value::as_str).map(String::from);
    Ok(BenchResult {
        json: text_of("json").context("the benchmark's to_json() returned nothing")?,
        text: text_of("text").unwrap_or_default(),
        html: text_of("html"),
    })
}

async fn bench(
    args: &BenchArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let mut results = Vec::new();
    for (src, dst) in &args.pairs {
        let result = bench_pair(src, dst, args, config, cancel, err).await?;
        if args.pairs.len() > 1 {
            writeln!(out, "{src}->{dst}")?;
        }
        writeln!(out, "{}", result.text.trim_end())?;
        results.push(result);
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
        std::fs::write(config.env.absolute(path), text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
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
                    html_escape(&format!("{src} → {dst}"))
                )
            })
            .collect();
        let page = format!(
            "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>gpushare bench</title>\n</head>\n<body>\n{}\n</body>\n</html>\n",
            body.join("\n")
        );
        std::fs::write(config.env.absolute(path), page)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn doctor(
    args: &DoctorArgs,
    config: &Config,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let env = &config.env;
    let (spec, extra_env) = match kernel_for_tools(env, args.kernel.as_deref()) {
        Ok((spec, extra)) => (Some(spec), extra),
        Err(_) if args.kernel.is_none() => (None, &MEMORY_ENV[..]),
        Err(e) => return Err(e),
    };
    let python = match spec.as_ref().and_then(|s| s.python(env)) {
        Some(python) => python,
        None => env.python()?,
    };
    writeln!(out, "python:     {}", python.display())?;
    match &spec {
        Some(spec) if spec.name == DEFAULT_KERNEL_NAME => {
            writeln!(out, "kernelspec: {} ({})", spec.name, spec.dir.display())?
        }
        Some(spec) => writeln!(
            out,
            "kernelspec: {} ({}); the gpushare kernel is not installed (gpushare kernel install --sys-prefix)",
            spec.name,
            if spec.dir.as_os_str().is_empty() {
                "ipykernel built-in".into()
            } else {
                spec.dir.display().to_string()
            }
        )?,
        None => writeln!(
            out,
            "kernelspec: none found (gpushare kernel install --sys-prefix)"
        )?,
    }
    let mut command = Process::new(&python);
    command
        .args(["-c", "import gpushare; print(repr(gpushare.gpuinfo()))"])
        .env_clear()
        .envs(env.vars())
        .stdin(Stdio::null());
    if let Some(spec) = &spec {
        command.envs(&spec.env);
    }
    for (key, value) in extra_env {
        if env.get(key).is_none() {
            command.env(key, value);
        }
    }
    let output = command
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    out.write_all(&output.stdout)?;
    err.write_all(&output.stderr)?;
    Ok(if output.status.success() {
        0
    } else {
        output.status.code().unwrap_or(EXIT_FAILURE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["gpushare", "run"].iter().chain(args)).unwrap();
        match cli.command {
            Command::Run(args) => args,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn output_defaults_beside_input_and_directories_for_several() {
        let env = Environment::empty();
        assert_eq!(
            output_paths(&run_args(&["a/x.ipynb"]), &env).unwrap(),
            [PathBuf::from("a/x.executed.ipynb")]
        );
        assert_eq!(
            output_paths(&run_args(&["x.ipynb", "-o", "y.ipynb"]), &env).unwrap(),
            [PathBuf::from("y.ipynb")]
        );
        assert_eq!(
            output_paths(&run_args(&["a/x.ipynb", "b/y.ipynb", "-o", "out"]), &env).unwrap(),
            [PathBuf::from("out/x.ipynb"), PathBuf::from("out/y.ipynb")]
        );
        assert!(output_paths(&run_args(&["a/x.ipynb", "b/x.ipynb", "-o", "out"]), &env).is_err());
        assert_eq!(
            output_paths(&run_args(&["x.ipynb", "--inplace"]), &env).unwrap(),
            [PathBuf::from("x.ipynb")]
        );
    }

    #[test]
    fn usage_errors_exit_2_and_say_why() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let config = Config::with_env(Environment::empty());
        let bad: [&[&str]; 4] = [
            &["gpushare", "run"],
            &["gpushare", "run", "x.ipynb", "--timeout", "-1"],
            &["gpushare", "kernel", "install", "--user", "--sys-prefix"],
            &["gpushare", "bench", "torch"],
        ];
        for args in bad {
            let code = run_with(args.iter().map(|a| a.to_string()).collect(), &config, &mut out, &mut err);
            assert_eq!(code, EXIT_USAGE, "{args:?}");
        }
        assert!(String::from_utf8_lossy(&err).contains("NOTEBOOK"));
    }

    #[test]
    fn help_goes_to_stdout_and_exits_0() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(
            vec!["gpushare".into(), "--help".into()],
            &Config::with_env(Environment::empty()),
            &mut out,
            &mut err,
        );
        assert_eq!(code, 0);
        assert!(String::from_utf8_lossy(&out).contains("kernel"));
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
        assert_eq!(
            bench_code("torch", "jax", &args),
            "import gpushare\n_b = gpushare.bench('torch', 'jax', sizes=['4KiB', 1024], dtype='float32', device='cuda:0', paths=['dlpack', 'host'])\n"
        );
    }

    #[test]
    fn pairs_are_checked() {
        assert_eq!(parse_pair("torch->jax"), Ok(("torch".into(), "jax".into())));
        assert!(parse_pair("torch").is_err());
        assert!(parse_pair("torch->ja'x").is_err());
    }
}
