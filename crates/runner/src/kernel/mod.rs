//! Jupyter client: kernelspecs, launching a kernel, talking to it over ZeroMQ, and running
//! notebooks against it.
//!
//! Built on `jupyter-protocol` and `jupyter-zmq-client` (pure-Rust `zeromq`, no libzmq).
//! Kernel output is read as raw frames and kept as JSON, so every MIME bundle reaches the
//! notebook exactly as the kernel sent it.
//!
//! - [`env`]: the environment a command runs in, as a value (tests run in parallel).
//! - [`kernelspec`]: Jupyter's data dirs, finding and installing kernelspecs.
//! - [`launch`]: connection file and kernel process.
//! - [`client`]: sockets, message pumps and the kernel_info handshake.
//! - [`session`]: a started kernel: execute with timeout, death and Ctrl-C handling; shutdown.
//! - [`notebook`]: `.ipynb` read/write like nbformat, and recording outputs into cells.
//!   - [`nbformat_json`]: the text `nbformat.write` writes (lines split, keys sorted).
//!   - [`output_recorder`]: kernel output recorded into cells as nbclient does, within a limit.
//!   - [`output_message`]: an iopub output message as a valid nbformat output.
//! - [`output_file`]: writing a result file where the user pointed, failures included.
//! - [`params`]: `-p key=value` as Python literals in an `injected-parameters` cell.
//! - [`widgets`]: widget state and `ipywidgets.Output`, as nbclient handles them.
//! - [`timing`]: a cell's `metadata.execution`, as nbclient records it.
//! - [`runner`]: running a whole notebook.

use std::path::{Path, PathBuf};

pub mod client;
pub mod env;
pub mod kernelspec;
pub mod launch;
pub mod nbformat_json;
pub mod notebook;
pub mod output_file;
pub mod output_message;
pub mod output_recorder;
pub mod params;
pub mod runner;
pub mod session;
pub mod timing;
pub mod widgets;

pub use env::Environment;
pub use kernelspec::{InstallTarget, KernelSpec, find_kernelspec};
pub use notebook::Notebook;
pub use params::{Parameter, PyLiteral};
pub use runner::{CellFailure, RunOptions, run_notebook};
pub use session::{Failure, Kernel, StartOptions};

/// Errors of the kernel client. Cell errors are not among them: a cell that raises is an
/// outcome of a run ([`Failure`]), not a failure to run.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid notebook: {detail}")]
    InvalidNotebook { path: PathBuf, detail: String },
    #[error("{path}: not a valid kernelspec: {detail}")]
    InvalidKernelspec { path: PathBuf, detail: String },
    #[error(
        "no kernel named `{name}` (available: {}); searched {}{}",
        list_or_none(available),
        paths(searched),
        install_hint(name)
    )]
    KernelNotFound {
        name: String,
        available: Vec<String>,
        searched: Vec<PathBuf>,
    },
    #[error("`{0}` is not a valid kernel name (letters, digits, `.`, `_` and `-` only)")]
    InvalidKernelName(String),
    #[error("cannot find the home directory ($HOME is not set)")]
    NoHome,
    #[error("no Python found: set GPUSHARE_PYTHON or put python3 on PATH")]
    PythonNotFound,
    #[error("{}: {detail}", python.display())]
    Python { python: PathBuf, detail: String },
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    #[error("the kernel exited during start-up ({status}){}", with_output(output))]
    DiedAtStartup { status: String, output: String },
    #[error(
        "the kernel did not answer within {seconds} s of starting{}",
        with_output(output)
    )]
    StartupTimeout { seconds: u64, output: String },
    #[error("interrupted")]
    Interrupted,
    #[error("kernel protocol: {0}")]
    Protocol(#[from] jupyter_zmq_client::RuntimeError),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl KernelError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn paths(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn install_hint(name: &str) -> &'static str {
    if name == kernelspec::DEFAULT_KERNEL_NAME {
        "\nhint: install it with `gpushare kernel install --sys-prefix` (or --user)"
    } else {
        ""
    }
}

fn with_output(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!("; its last output:\n{output}{}", missing_ipykernel_hint(output))
    }
}

/// The fix for the commonest start-up failure: the kernelspec's Python has no ipykernel (it is an
/// extra of gpushare's distribution, not a dependency: `%load_ext gpushare` needs only IPython).
pub fn missing_ipykernel_hint(output: &str) -> &'static str {
    if lacks_ipykernel(output) {
        "\nhint: the kernel's Python has no ipykernel; install it into that environment with \
         `python -m pip install 'gpushare-dlpack[kernel]'` (or `pip install ipykernel`)"
    } else {
        ""
    }
}

/// Whether a kernel's start-up output says its Python cannot import ipykernel.
pub fn lacks_ipykernel(output: &str) -> bool {
    output.contains("No module named ipykernel") || output.contains("No module named 'ipykernel")
}

/// Remove ANSI escape sequences (IPython colours its tracebacks) for plain-text reports.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates up to a final byte in @..~
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC (hyperlinks, titles): up to BEL or ESC \
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kernel_without_ipykernel_gets_the_install_hint() {
        let died = KernelError::DiedAtStartup {
            status: "exit status 1".into(),
            output: "/usr/bin/python3: No module named ipykernel_launcher".into(),
        };
        assert!(died.to_string().contains("gpushare-dlpack[kernel]"), "{died}");
        let other = KernelError::DiedAtStartup { status: "exit status 1".into(), output: "ImportError: numpy".into() };
        assert!(!other.to_string().contains("hint"), "{other}");
    }

    use super::*;

    #[test]
    fn strips_colour_and_hyperlinks() {
        assert_eq!(
            strip_ansi("\x1b[0;31mZeroDivisionError\x1b[0m: x"),
            "ZeroDivisionError: x"
        );
        assert_eq!(
            strip_ansi("\x1b]8;;file:///a.py\x1b\\a.py\x1b]8;;\x1b\\:3"),
            "a.py:3"
        );
        assert_eq!(strip_ansi("plain ünï"), "plain ünï");
    }

    #[test]
    fn kernel_not_found_says_where_it_looked() {
        let e = KernelError::KernelNotFound {
            name: "k".into(),
            available: vec![],
            searched: vec!["/a".into()],
        };
        assert_eq!(
            e.to_string(),
            "no kernel named `k` (available: none); searched /a"
        );
    }
}
