//! `gpushare calibrate`: fits this machine's cost model in the kernel's Python, with
//! `gpushare.calibrate` (through `gpushare._cli.calibrate_command`), and prints what it holds.
//! What it measures goes to stderr a line per sweep as it goes (a minute or more on a small
//! machine). The sweep itself is the lab's, the fit the core's.
//!
//! Arguments that cannot work are usage errors (exit 2, one line) before any Python sweeps: sizes
//! that are not sizes or give fewer than three points, devices that are not devices or are not
//! here, frameworks gpushare does not know or the kernel's Python lacks, one framework with
//! nothing else to measure. Without these, each ended in a Python traceback, or in a run that
//! fitted nothing and exited 0.

use std::io::Write;

use anyhow::Result;

use super::bench_args::{parse_device, parse_size};
use super::bench_checks::{check_cuda_device, check_frameworks};
use super::doctor::{python_code, tool_python};
use super::{CalibrateArgs, Config, EXIT_USAGE};
use crate::cuda::driver_status;
use crate::kernel::session::Cancel;
use crate::shared::Device;

/// The Python that runs it. The arguments travel as JSON in an environment variable, so no value
/// a user typed is ever pasted into code.
const CODE: &str = "import sys\nfrom gpushare._cli import calibrate_command\nsys.exit(calibrate_command())\n";

/// The frameworks `-f` lists (repeated or comma-separated).
fn frameworks(args: &CalibrateArgs) -> Vec<&str> {
    args.frameworks
        .iter()
        .flat_map(|f| f.split(','))
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect()
}

/// The checks that need no Python; `Err` is the line to show.
fn check_arguments(args: &CalibrateArgs) -> Result<(), String> {
    if let Some(given) = &args.sizes {
        let mut sizes = Vec::new();
        for text in given.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let size = parse_size(text)?;
            if size == 0 {
                return Err(format!("--sizes {given}: a size of 0 bytes moves nothing to time"));
            }
            if !sizes.contains(&size) {
                sizes.push(size);
            }
        }
        if sizes.len() < 3 {
            return Err(format!(
                "--sizes needs at least three different sizes (a fit of two numbers checks itself \
                 against the third), got {given:?}"
            ));
        }
    }
    for (option, device) in [
        ("--device", &args.device),
        ("--to-device", &args.to_device),
        ("--worker-device", &args.worker_device),
    ] {
        let Some(text) = device else { continue };
        parse_device(text).map_err(|e| format!("{option}: {e}"))?;
        if let Ok(Device::Cuda(ordinal)) = Device::parse(text) {
            check_cuda_device(option, text, ordinal, driver_status())?;
        }
    }
    Ok(())
}

/// One framework sweeps nothing unless moves or process handoffs are asked for: every share is
/// between two frameworks (checked after the names, so a misspelt one is named as such).
fn check_something_to_time(args: &CalibrateArgs) -> Result<(), String> {
    match frameworks(args)[..] {
        [only] if args.to_device.is_none() && !args.processes && args.across.is_none() => Err(format!(
            "-f {only}: one framework makes no pair to time; name two or more (-f {only},numpy), \
             or add --to-device, --processes or --across HOST:PORT"
        )),
        _ => Ok(()),
    }
}

pub(super) async fn calibrate(
    args: &CalibrateArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let (python, spec, extra_env) = tool_python(config, args.kernel.as_deref())?;
    let frameworks = frameworks(args);
    let checked = check_arguments(args)
        .and_then(|()| match frameworks.is_empty() {
            true => Ok(()),
            false => check_frameworks(&frameworks, Some(&python), &config.env),
        })
        .and_then(|()| check_something_to_time(args));
    if let Err(why) = checked {
        writeln!(err, "error: {why}")?;
        return Ok(EXIT_USAGE);
    }
    // None: gpushare.calibrate's own sizes, so the command and the function sweep the same.
    let sizes: Option<Vec<&str>> = args
        .sizes
        .as_deref()
        .map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).collect());
    let payload = serde_json::json!({
        "frameworks": frameworks,
        "sizes": sizes,
        "device": args.device,
        "to_device": args.to_device,
        "processes": args.processes || args.across.as_deref() == Some("processes"),
        "across": args.across.as_deref().filter(|a| super::bench_args::is_remote(a)),
        "worker_device": args.worker_device,
        "repeat": args.repeat,
    });
    let vars = [("GPUSHARE_CALIBRATE_ARGS", payload.to_string())];
    python_code(&python, spec.as_ref(), extra_env, CODE, &vars, config, cancel, out, err).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn checked(argv: &[&str]) -> Result<(), String> {
        let cli = Cli::try_parse_from(["gpushare", "calibrate"].iter().chain(argv)).unwrap();
        let Command::Calibrate(args) = cli.command else { panic!() };
        check_arguments(&args).and_then(|()| check_something_to_time(&args))
    }

    #[test]
    fn arguments_that_cannot_fit_a_model_are_refused_in_one_line() {
        let digits = "9".repeat(400);
        for (argv, says) in [
            (&["--sizes", "0,0,0"][..], "0 bytes"),
            (&["--sizes", "4KiB,4KiB,4096"], "three different sizes"),
            (&["--sizes", "a,b,c"], "cannot read size `a`"),
            (&["--sizes", &format!("{digits},1,2")], "beyond any memory"),
            (&["--device", "bogus"], "--device: unknown device \"bogus\""),
            (&["--to-device", "tpu:1"], "--to-device: unknown device"),
            (&["-f", "torch"], "one framework makes no pair"),
        ] {
            let e = checked(argv).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{argv:?}: {e}");
        }
        assert!(checked(&["--sizes", "4KiB,1MiB,2MiB", "-f", "torch,numpy", "--device", "cpu"]).is_ok());
        assert!(checked(&["-f", "torch", "--processes"]).is_ok(), "a process sweep needs one framework");
        assert!(checked(&["-f", "torch", "--across", "10.0.0.2:29600"]).is_ok(), "nor does a remote one");
        for bad in ["nowhere", "10.0.0.2:0", "::1:29600"] {
            assert!(Cli::try_parse_from(["gpushare", "calibrate", "--across", bad]).is_err(), "{bad}");
        }
    }
}
