//! `gpushare worker --listen HOST:PORT`: serves handoffs from a peer on another host. The worker is
//! Python (python/gpushare/processes/remote.py: the same worker loop as a worker of one host, over a
//! TCP connection), run by the Python running gpushare.

use std::io::Write;
use std::process::Stdio;

use anyhow::{Context as _, Result};

use super::{Config, EXIT_FAILURE, WorkerArgs};

/// The worker's entry point. Called, not run as `-m gpushare.processes.remote`: importing the
/// package imports that module first, and runpy would then run a second copy of it.
const ENTRY: &str = "import sys; from gpushare.processes.remote import main; sys.exit(main(sys.argv[1:]))";

/// The Python arguments for `args`.
fn module_args(args: &WorkerArgs) -> Vec<String> {
    let mut argv = vec!["-c".into(), ENTRY.into(), "--listen".into(), args.listen.clone()];
    argv.extend(["--timeout".into(), format!("{}", args.timeout.as_secs_f64())]);
    if let Some(device) = &args.device {
        argv.extend(["--device".into(), device.clone()]);
    }
    if let Some(iface) = &args.iface {
        argv.extend(["--iface".into(), iface.clone()]);
    }
    if args.once {
        argv.push("--once".into());
    }
    argv
}

/// `HOST:PORT` (`[v6]:PORT` for IPv6), checked before Python starts.
pub(super) fn check_listen(listen: &str) -> std::result::Result<(), String> {
    check_address("--listen", "0.0.0.0:29600", listen)
}

/// `HOST:PORT` (`[v6]:PORT` for IPv6) given to `option`: `--listen` here, `--across` of `bench`
/// and `calibrate` (the address a worker listens on); `example` is shown in the error.
pub(crate) fn check_address(option: &str, example: &str, text: &str) -> std::result::Result<(), String> {
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (h, p),
        _ => return Err(format!("{option} is HOST:PORT (e.g. {example}), got {text:?}")),
    };
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("{option}: write an IPv6 address in brackets, [ADDR]:PORT, got {text:?}"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{option}: {port:?} is not a port (1-65535)")),
    }
}

pub(super) fn worker(args: &WorkerArgs, config: &Config, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32> {
    let python = config.env.python()?;
    let mut command = std::process::Command::new(&python);
    command.args(module_args(args)).env_clear().envs(config.env.vars()).stdin(Stdio::null());
    if config.handle_ctrl_c {
        // A command line: the worker replaces this process, so its pid is the command's, and
        // Ctrl-C, SIGTERM or `kill` reach the worker itself.
        use std::os::unix::process::CommandExt as _;
        let error = command.exec();
        return Err(error).with_context(|| format!("running {}", python.display()));
    }
    let output = command.output().with_context(|| format!("running {}", python.display()))?;
    out.write_all(&output.stdout)?;
    err.write_all(&output.stderr)?;
    Ok(if output.status.success() { 0 } else { output.status.code().unwrap_or(EXIT_FAILURE) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_checked() {
        assert!(check_listen("0.0.0.0:29600").is_ok());
        assert!(check_listen("[::1]:29600").is_ok());
        assert!(check_listen("node7:1").is_ok());
        for bad in ["29600", ":29600", "host:", "host:0", "host:70000", "::1:29600"] {
            assert!(check_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_module_gets_every_option() {
        let args = WorkerArgs {
            listen: "10.0.0.2:29600".into(),
            device: Some("cuda:1".into()),
            timeout: std::time::Duration::from_secs(8),
            iface: Some("eth1".into()),
            once: true,
        };
        let argv = module_args(&args);
        assert_eq!(argv[..2], ["-c".to_string(), ENTRY.to_string()]);
        assert_eq!(argv[2..].join(" "), "--listen 10.0.0.2:29600 --timeout 8 --device cuda:1 --iface eth1 --once");
    }
}
