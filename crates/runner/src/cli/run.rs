//! `gpushare run`: execute notebooks in fresh kernels and write them with their outputs.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::output::Progress;
use super::{Config, EXIT_FAILURE, EXIT_USAGE, RunArgs};
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
    let is_dir = env.absolute(out).is_dir();
    let as_dir = inputs.len() > 1 || is_dir || out.as_os_str().to_string_lossy().ends_with('/');
    if !as_dir {
        return Ok(vec![out.clone()]);
    }
    // Several notebooks go into a directory. A path that is a file already, or reads as a
    // notebook's name, was meant for one: made into a directory, `out.ipynb/` held the notebooks
    // where the user (and nbformat.read) looked for one.
    if !is_dir && (env.absolute(out).exists() || out.extension().is_some_and(|e| e == "ipynb")) {
        bail!(
            "-o {}: {} notebooks were given, so -o names the directory each is written into \
             (as DIR/NAME.ipynb), and {} {}; name a directory, or run the notebooks one at a time",
            out.display(),
            inputs.len(),
            out.display(),
            if env.absolute(out).exists() { "is a file" } else { "names a notebook" }
        );
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
    // Arguments that cannot work are usage errors, said before any kernel starts.
    let checked = output_paths(args, env).and_then(|outputs| Ok((outputs, parameters(args)?)));
    let (outputs, params) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            writeln!(err, "error: {e:#}")?;
            return Ok(EXIT_USAGE);
        }
    };
    let options = RunOptions {
        timeout: args.timeout,
        startup_timeout: args.startup_timeout,
        params,
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
        for note in nb.repair_cell_ids() {
            writeln!(err, "warning: {label}: {note}")?;
        }
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
        let mut bar = Progress::new(config, &label, "cells");
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
                started = true;
                bar.count(done as u64, total as u64);
            },
        )
        .await;
        bar.finish();

        // Whatever ran is written, failure or not; a kernel that never started ran nothing.
        // A notebook that could not be written (a full disk, `/dev/full`) fails the run: the
        // outputs exist nowhere else.
        let write_failure = if started {
            nb.write(&env.absolute(output)).err()
        } else {
            None
        };
        let wrote = started && write_failure.is_none();
        if let Some(e) = &write_failure {
            let _ = writeln!(err, "error: {label}: cannot write the executed notebook: {e}");
            failed += 1;
        }
        let wrote_note = |err: &mut dyn Write| {
            if wrote {
                writeln!(err, "wrote what ran to {}", output.display())
            } else {
                Ok(())
            }
        };
        match result {
            Ok(summary) => {
                report_injection(&summary, &label, err)?;
                match &summary.failure {
                    None if wrote => writeln!(
                        err,
                        "{label}: {} cells ran in {:.1} s -> {}",
                        summary.cells_run,
                        began.elapsed().as_secs_f64(),
                        output.display()
                    )?,
                    None => writeln!(
                        err,
                        "{label}: {} cells ran in {:.1} s, but the notebook was not written",
                        summary.cells_run,
                        began.elapsed().as_secs_f64(),
                    )?,
                    Some(failure) => {
                        let reported = report_failure(&label, &nb, failure, &spec, err)
                            .and_then(|()| wrote_note(err));
                        if failure.failure == Failure::Interrupted {
                            // After SIGHUP the terminal is gone and the report cannot be shown;
                            // the notebook is written and the exit status says what happened.
                            return Ok(cancelled_exit_code());
                        }
                        reported?;
                        failed += 1;
                    }
                }
            }
            Err(KernelError::Interrupted) => {
                let _ = writeln!(err, "interrupted: {label}");
                return Ok(cancelled_exit_code());
            }
            Err(e) => {
                writeln!(err, "error: {label}: {e}")?;
                if let Some(hint) = load_ext_after_install_hint(&e, &spec) {
                    writeln!(err, "{hint}")?;
                }
                wrote_note(err)?;
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

/// gpushare's magics, as `%load_ext gpushare` registers them (python/gpushare/magics.py and
/// lab_magics.py).
const MAGICS: [&str; 3] = ["share", "sharebench", "gpuinfo"];

/// A cell that used a gpushare magic the kernel does not know. IPython says only "Line magic
/// function `%share` not found", which does not tell a user who has gpushare installed that the
/// extension is what is missing, nor how to load it.
fn magic_not_loaded_hint(ename: &str, evalue: &str, spec: &KernelSpec) -> Option<String> {
    if ename != "UsageError" || !evalue.contains("not found") {
        return None;
    }
    let magic = evalue.split('`').nth(1)?;
    if !MAGICS.contains(&magic.trim_start_matches('%')) {
        return None;
    }
    Some(if spec.loads_gpushare() {
        format!(
            "hint: `{magic}` is a gpushare magic; the `{}` kernel loads gpushare at start, so the notebook \
             unloaded it (`%unload_ext gpushare`) or the kernel's Python could not import it: \
             `%load_ext gpushare` loads it again, or says why it cannot",
            spec.name
        )
    } else {
        format!(
            "hint: `{magic}` is a gpushare magic, and the `{}` kernel does not load gpushare: add a cell \
             `%load_ext gpushare` before its first use, or run with `--kernel gpushare` (installed by \
             `gpushare kernel install`), which loads it at start",
            spec.name
        )
    })
}

/// The ipykernel hint says to install `gpushare-dlpack[kernel]` into the kernel's environment;
/// in a kernel that is not gpushare's, the magics still need `%load_ext gpushare` after that.
fn load_ext_after_install_hint(e: &KernelError, spec: &KernelSpec) -> Option<String> {
    let (KernelError::DiedAtStartup { output, .. } | KernelError::StartupTimeout { output, .. }) = e else {
        return None;
    };
    (crate::kernel::lacks_ipykernel(output) && !spec.loads_gpushare()).then(|| {
        format!(
            "hint: the `{}` kernel does not load gpushare itself: once it starts, a cell \
             `%load_ext gpushare` turns the magics on (the `gpushare` kernel, from \
             `gpushare kernel install`, loads it at start)",
            spec.name
        )
    })
}

/// nbclient-style report: which cell, its source, and the kernel's traceback without colours.
fn report_failure(
    label: &str,
    nb: &Notebook,
    failure: &CellFailure,
    spec: &KernelSpec,
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
            if let Failure::Error { ename, evalue, .. } = &failure.failure
                && let Some(hint) = magic_not_loaded_hint(ename, evalue, spec)
            {
                writeln!(err, "{hint}")?;
            }
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

    fn spec(loads: bool) -> KernelSpec {
        let mut spec = KernelSpec::native_python(Path::new("/usr/bin/python3"));
        if loads {
            spec.name = "gpushare".into();
            spec.argv.push("--ext=gpushare".into());
        }
        spec
    }

    #[test]
    fn a_gpushare_magic_the_kernel_does_not_know_gets_the_load_ext_hint() {
        let line = "Line magic function `%share` not found.";
        let hint = magic_not_loaded_hint("UsageError", line, &spec(false)).unwrap();
        assert!(hint.contains("`%share` is a gpushare magic") && hint.contains("`python3` kernel"), "{hint}");
        assert!(hint.contains("`%load_ext gpushare`") && hint.contains("--kernel gpushare"), "{hint}");
        let cell = "Cell magic `%%share` not found.";
        assert!(magic_not_loaded_hint("UsageError", cell, &spec(false)).unwrap().contains("`%%share`"));
        let lab = "Line magic function `%sharebench` not found.";
        let hint = magic_not_loaded_hint("UsageError", lab, &spec(true)).unwrap();
        assert!(hint.contains("`%load_ext gpushare`") && !hint.contains("--kernel"), "{hint}");
        // Not gpushare's magic, not a missing magic, not a UsageError: no hint.
        assert!(magic_not_loaded_hint("UsageError", "Line magic function `%tiemit` not found.", &spec(false)).is_none());
        assert!(magic_not_loaded_hint("UsageError", "unknown transfer path 'bogus'", &spec(false)).is_none());
        assert!(magic_not_loaded_hint("NameError", "name `share` not found", &spec(false)).is_none());
    }

    #[test]
    fn a_kernel_without_ipykernel_that_is_not_gpushares_also_gets_the_load_ext_hint() {
        let died = KernelError::DiedAtStartup {
            status: "exit status 1".into(),
            output: "/usr/bin/python3: No module named ipykernel_launcher".into(),
        };
        let hint = load_ext_after_install_hint(&died, &spec(false)).unwrap();
        assert!(hint.contains("`%load_ext gpushare`") && hint.contains("`python3` kernel"), "{hint}");
        assert!(load_ext_after_install_hint(&died, &spec(true)).is_none());
        let other = KernelError::DiedAtStartup { status: "exit status 1".into(), output: "ImportError: numpy".into() };
        assert!(load_ext_after_install_hint(&other, &spec(false)).is_none());
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
        // Two notebooks and an -o that reads as one notebook: not made into a directory.
        let e = output_paths(&run_args(&["a/x.ipynb", "b/y.ipynb", "-o", "out.ipynb"]), &env).unwrap_err();
        assert!(e.to_string().contains("names a notebook"), "{e}");
        assert_eq!(
            output_paths(&run_args(&["x.ipynb", "--inplace"]), &env).unwrap(),
            [PathBuf::from("x.ipynb")]
        );
    }
}
