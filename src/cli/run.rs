//! `gpushare run`: execute notebooks in fresh kernels and write them with their outputs.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::output::progress_bar;
use super::{Config, EXIT_FAILURE, RunArgs};
use crate::kernel::session::{cancelled_by, cancelled_exit_code};
use crate::kernel::notebook::default_output_path;
use crate::kernel::params::Injected;
use crate::kernel::runner::RunSummary;
use crate::kernel::session::Cancel;
use crate::kernel::{
    CellFailure, Environment, Failure, KernelError, KernelSpec, Notebook, Parameter, RunOptions,
    find_kernelspec, run_notebook, strip_ansi,
};

/// Where each notebook's result goes.
pub(super) fn output_paths(args: &RunArgs, env: &Environment) -> Result<Vec<PathBuf>> {
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

fn parameters(args: &RunArgs) -> Result<Vec<Parameter>> {
    let plain = args.parameters.iter().map(|p| Parameter::parse(p, false));
    let raw = args
        .raw_parameters
        .iter()
        .map(|p| Parameter::parse(p, true));
    Ok(plain.chain(raw).collect::<Result<_, _>>()?)
}

pub(super) async fn run_notebooks(
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
        Failure::NoReply => format!("error: {label}: cell {cell}{count} got no execute_reply from the kernel"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

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
}
