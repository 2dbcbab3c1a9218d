//! The `gpushare` command: `kernel install`, `run`, `bench` and `doctor`.
//!
//! [`run`] is what both the cargo binary and the Python console script (through pyo3) call.
//! [`run_with`] takes the environment and output streams explicitly so tests can run commands
//! in parallel without touching the process environment.
//!
//! The clap definitions and the dispatch live here; each command has its own module
//! ([`install`], [`run`](mod@run), [`bench`](mod@bench), [`doctor`](mod@doctor)) and
//! [`output`] holds the terminal handling they share.

mod bench;
mod bench_args;
mod bench_checks;
mod calibrate;
mod doctor;
mod install;
mod output;
mod run;
mod worker;

use std::ffi::OsString;
use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::kernel::kernelspec::DEFAULT_KERNEL_NAME;
use crate::kernel::session::{cancelled_exit_code, ctrl_c_watch};
use crate::kernel::{Environment, KernelError, KernelSpec, find_kernelspec};

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
    /// Draw progress on stderr (one bar: the kernel's start, then cells or a sweep's points).
    /// Only on a terminal, where `NO_COLOR` does not ask for plain output (the README's promise):
    /// in a file or pipe, `\r` frames are noise.
    pub progress: bool,
    /// Turn Ctrl-C into "interrupt the kernel, shut it down, exit 130".
    pub handle_ctrl_c: bool,
    /// Let clap colour usage errors (stderr) and help (stdout).
    pub color: bool,
}

impl Config {
    /// This process's environment, terminal and signals: progress when stderr is a terminal,
    /// colour when the stream written to is a terminal and `NO_COLOR` is unset.
    pub fn from_process() -> Self {
        let env = Environment::from_process();
        let stderr_is_terminal = std::io::stderr().is_terminal();
        Self {
            progress: stderr_is_terminal && !output::no_color(&env),
            handle_ctrl_c: true,
            color: output::color_wanted(&env),
            env,
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
    /// Fit this machine's cost model: each path's fixed cost and bandwidth per framework pair
    ///
    /// A short sweep of every path of every installed pair at three or more sizes (seconds on a
    /// CPU), fitted as time = fixed + bytes / bandwidth and cached in the user's cache directory
    /// with the devices, driver and versions it was made for. gpushare.advise and the tables'
    /// predicted times read it.
    Calibrate(CalibrateArgs),
    /// Serve handoffs from a peer on another host (gpushare.Worker(host="HOST:PORT") reaches it)
    ///
    /// Each peer is served by a worker process of its own; the bytes go by torch.distributed (gloo
    /// for host tensors, NCCL for device tensors), over the interface that reaches the peer.
    Worker(WorkerArgs),
}

#[derive(Args, Debug)]
struct WorkerArgs {
    /// The address to listen on, HOST:PORT (0.0.0.0:PORT: every interface)
    #[arg(long, value_name = "HOST:PORT")]
    listen: String,
    /// The GPU the worker receives device tensors on [default: none: host tensors only]
    #[arg(long, value_name = "cuda:N", value_parser = bench_args::parse_device)]
    device: Option<String>,
    /// Seconds a peer may stay silent before its handoff fails [default: 60]
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    timeout: Duration,
    /// The interface the engines use [default: the one holding the address the peer reached]
    #[arg(long, value_name = "NAME")]
    iface: Option<String>,
    /// Exit after serving one peer
    #[arg(long)]
    once: bool,
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
// Only where to install is one choice among several; a `#[group]` on the struct would make every
// field a member, and refused `--user --name X`, which Jupyter allows.
#[command(group(clap::ArgGroup::new("target").multiple(false)))]
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
    /// Kernelspec name: letters, digits, `.`, `_` and `-` (not `.` or `..`)
    #[arg(long, default_value = DEFAULT_KERNEL_NAME, value_parser = parse_kernel_name)]
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
                        still written up to that cell), 130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP (a closed \
                        terminal), 131 after SIGQUIT."
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
    // The frameworks come from the table the parser checks against, so help cannot omit one.
    #[arg(required = true, value_name = "SRC->DST", value_parser = bench_args::parse_pair,
          help = format!("Framework pairs such as torch->jax; each pair runs in a fresh kernel \
                          (frameworks: {})", bench_args::known_frameworks()))]
    pairs: Vec<(String, String)>,
    // The defaults shown are gpushare.bench's (crates/runner/tests/cli_checks.rs compares them), which the
    // kernel applies: passing them from here would hide which ones the user chose.
    /// Comma-separated sizes, e.g. 4KiB,64MiB,1GiB [default: 4KiB,1MiB,256MiB]
    #[arg(long, value_name = "SIZES", value_parser = bench_args::parse_sizes)]
    sizes: Option<String>,
    /// Element type, e.g. float16 [default: float32]
    #[arg(long, value_parser = bench_args::parse_dtype_name)]
    dtype: Option<String>,
    /// Device: cpu, cuda, cuda:N, gpu or gpu:N [default: cuda:0 when CUDA is usable, else cpu]
    #[arg(long, value_parser = bench_args::parse_device)]
    device: Option<String>,
    /// Comma-separated transfer paths (dlpack, capsule, cai, host, pinned, copy, shared, auto) or all
    /// [default: all]
    #[arg(long, value_name = "PATHS", value_parser = bench_args::parse_paths)]
    paths: Option<String>,
    /// Hand the arrays to a worker process instead (`processes`), or to the worker on another host
    /// at HOST:PORT (`gpushare worker --listen HOST:PORT`): paths are then the process paths ipc,
    /// torch_mp, shm, nccl, nccl_socket, gloo, remote, auto or all
    #[arg(long, value_name = "WHERE", value_parser = bench_args::parse_across)]
    across: Option<String>,
    /// With --across processes: the worker's device (default: the source's), e.g. cuda:1
    #[arg(long, value_name = "DEVICE", value_parser = bench_args::parse_device, requires = "across")]
    worker_device: Option<String>,
    /// Write the results as JSON (an array when there are several pairs); `-` is stdout
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the results as an HTML page; `-` is stdout
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Kernel to use [default: gpushare, else python3 with gpushare's memory settings]
    #[arg(short, long, value_name = "NAME")]
    kernel: Option<String>,
    /// Time limit for each sweep, in seconds [default: none]
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
    /// Import every installed framework first, so the report shows their DLPack support (like
    /// `%gpuinfo --import`); slower, and their import errors show
    #[arg(long = "import")]
    import_frameworks: bool,
}

#[derive(Args, Debug)]
struct CalibrateArgs {
    /// Frameworks to pair, comma-separated [default: the installed frameworks whose adapters ask
    /// to be calibrated on that kind of device]
    #[arg(short, long, value_name = "LIST")]
    frameworks: Vec<String>,
    /// Sizes to sweep, comma-separated, at least three [default: gpushare.calibrate's, seven from
    /// 4KiB to 64MiB (gpushare.advice.DEFAULT_SIZES)]
    #[arg(long, value_name = "LIST")]
    sizes: Option<String>,
    /// Device the arrays are made on [default: cuda:0 where CUDA is usable, else cpu]
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Also fit the move paths to this device (e.g. cuda:1)
    #[arg(long, value_name = "DEVICE")]
    to_device: Option<String>,
    /// Also fit the process paths (starts a worker process)
    #[arg(long)]
    processes: bool,
    /// Also fit the remote path to the worker on another host at HOST:PORT (`gpushare worker
    /// --listen HOST:PORT`); `processes` is --processes
    #[arg(long, value_name = "HOST:PORT", value_parser = bench_args::parse_across)]
    across: Option<String>,
    /// With --processes: also fit them to a worker working on this GPU (e.g. cuda:1), where NCCL's
    /// paths apply
    #[arg(long, value_name = "DEVICE", requires = "processes")]
    worker_device: Option<String>,
    /// Timing samples per path and size
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Run in this kernel's Python [default: gpushare, else the Python running gpushare]
    #[arg(short, long, value_name = "NAME")]
    kernel: Option<String>,
}

/// `-` as an output file: standard output.
fn is_stdout(path: Option<&PathBuf>) -> bool {
    path.is_some_and(|p| p.as_os_str() == "-")
}

/// Checks clap cannot express: two outputs cannot both take stdout, paths of the other kind,
/// and arguments this machine cannot satisfy (see [`bench_checks`]).
fn check(cli: &Cli) -> Result<(), clap::Error> {
    if let Command::Worker(args) = &cli.command
        && let Err(why) = worker::check_listen(&args.listen)
    {
        return Err(clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{why}\n")));
    }
    if let Command::Bench(args) = &cli.command
        && is_stdout(args.json.as_ref())
        && is_stdout(args.html.as_ref())
    {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "--json - and --html - would both write to stdout; send one of them to a file\n",
        ));
    }
    if let Command::Bench(args) = &cli.command
        && let Some(paths) = &args.paths
        && let Err(why) = bench_args::check_paths_across(paths, args.across.is_some())
    {
        return Err(clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{why}\n")));
    }
    if let Command::Bench(args) = &cli.command
        && args.worker_device.is_some()
        && args.across.as_deref().is_some_and(bench_args::is_remote)
    {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "--worker-device goes with --across processes (a remote worker's device is its own: \
             `gpushare worker --listen HOST:PORT --device cuda:N`)\n",
        ));
    }
    if let Command::Bench(args) = &cli.command
        && let Err(why) = bench_checks::check_machine(args)
    {
        return Err(clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{why}\n")));
    }
    Ok(())
}

/// `--name`: a usage error (exit 2) before anything is written, for a name that is not a
/// kernel name or that would put the spec outside the kernels folder (`..`).
fn parse_kernel_name(s: &str) -> Result<String, String> {
    crate::kernel::kernelspec::validate_kernel_name(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
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

/// Run the command line `args` (`args[0]` is the program name) in this process's environment.
///
/// Arguments are OS strings: a notebook path need not be UTF-8 (it is a file name), and a
/// value that must be text (`-p`) and is not is clap's usage error, exit 2.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    run_with_os(
        args.into_iter().map(Into::into).collect(),
        &Config::from_process(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
}

/// Run the command line `args` with an explicit configuration and output streams.
pub fn run_with(args: Vec<String>, config: &Config, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    run_with_os(args.into_iter().map(OsString::from).collect(), config, out, err)
}

/// [`run_with`] on OS strings, as [`run`] gets them.
pub fn run_with_os(args: Vec<OsString>, config: &Config, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args).and_then(|cli| check(&cli).map(|()| cli)) {
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
        // The commands that run kernels or Python take over Ctrl-C, to stop those quietly and
        // exit 130; elsewhere it keeps killing us.
        let mut cancel = (config.handle_ctrl_c
            && matches!(
                cli.command,
                Command::Run(_) | Command::Bench(_) | Command::Doctor(_) | Command::Calibrate(_)
            ))
        .then(ctrl_c_watch);
        match cli.command {
            Command::Kernel(KernelCommand::Install(args)) => {
                install::kernel_install(&args, config, out).map(|()| 0)
            }
            Command::Run(args) => run::run_notebooks(&args, config, &mut cancel, err).await,
            Command::Bench(args) => bench::bench(&args, config, &mut cancel, out, err).await,
            Command::Doctor(args) => doctor::doctor(&args, config, &mut cancel, out, err).await,
            Command::Calibrate(args) => calibrate::calibrate(&args, config, &mut cancel, out, err).await,
            Command::Worker(args) => worker::worker(&args, config, out, err),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_and_say_why() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let config = Config::with_env(Environment::empty());
        let bad: [&[&str]; 11] = [
            &["gpushare", "run"],
            &["gpushare", "run", "x.ipynb", "--timeout", "-1"],
            &["gpushare", "kernel", "install", "--user", "--sys-prefix"],
            &["gpushare", "bench", "torch"],
            // Process paths go with --across processes, transfer paths without it.
            &["gpushare", "bench", "torch->torch", "--paths", "ipc"],
            &["gpushare", "bench", "torch->torch", "--across", "processes", "--paths", "dlpack"],
            &["gpushare", "bench", "torch->torch", "--across", "planets"],
            &["gpushare", "bench", "torch->torch", "--worker-device", "cuda:1"],
            &["gpushare", "worker"],
            &["gpushare", "worker", "--listen", "29600"],
            &["gpushare", "worker", "--listen", "0.0.0.0:29600", "--timeout", "0"],
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
    fn pairs_are_checked() {
        use bench_args::parse_pair;
        assert_eq!(parse_pair("torch->jax"), Ok(("torch".into(), "jax".into())));
        assert!(parse_pair("torch").is_err());
        assert!(parse_pair("torch->ja'x").is_err());
    }
}
