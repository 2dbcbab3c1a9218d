//! `gpushare doctor`: the environment report, from the kernel's Python.

use std::io::Write;
use std::process::Stdio;

use anyhow::{Context as _, Result};
use tokio::process::Command as Process;

use super::{
    Config, DEFAULT_KERNEL_NAME, DoctorArgs, EXIT_FAILURE, MEMORY_ENV, kernel_for_tools,
};
use crate::kernel::KernelError;
use crate::kernel::session::Cancel;

/// The report's Python code: `gpushare.gpuinfo(import_frameworks=…)`, as `%gpuinfo [--import]`,
/// then gpushare's version there and the verdict (`gpushare._cli.doctor_command`). A gpushare
/// too old to have the verdict still gives the report.
fn report_code(import_frameworks: bool) -> String {
    let flag = if import_frameworks { "True" } else { "False" };
    format!(
        "import sys\n\
         try:\n    import gpushare\n\
         except ImportError as e:\n    print(f'error: {{e}}', file=sys.stderr)\n    sys.exit({NO_GPUSHARE})\n\
         try:\n    from gpushare._cli import doctor_command\n\
         except ImportError:\n    print(repr(gpushare.gpuinfo(import_frameworks={flag})))\n    sys.exit(0)\n\
         sys.exit(doctor_command({flag}))\n"
    )
}

/// `doctor_command`'s exit status for "not ready" (gpushare._cli.NOT_READY): its verdict says why.
const NOT_READY: i32 = 3;
/// The report's exit status when that Python cannot import gpushare.
const NO_GPUSHARE: i32 = 4;

/// Resolves once Ctrl-C was pressed; never without a watch.
async fn ctrl_c(cancel: &mut Option<Cancel>) {
    if let Some(rx) = cancel
        && rx.wait_for(|&pressed| pressed).await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await;
}

pub(super) async fn doctor(
    args: &DoctorArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let (python, spec, extra_env) = tool_python(config, args.kernel.as_deref())?;
    let kernelspec = match &spec {
        Some(spec) if spec.name == DEFAULT_KERNEL_NAME => format!("{} ({})", spec.name, spec.dir.display()),
        Some(spec) => format!(
            "{} ({}); the gpushare kernel is not installed (gpushare kernel install --sys-prefix)",
            spec.name,
            if spec.dir.as_os_str().is_empty() {
                "ipykernel built-in".into()
            } else {
                spec.dir.display().to_string()
            }
        ),
        None => "none found (gpushare kernel install --sys-prefix)".into(),
    };
    let version = env!("CARGO_PKG_VERSION");
    writeln!(out, "gpushare:   {version} (this command)\npython:     {}\nkernelspec: {kernelspec}", python.display())
        .context("writing the report to stdout")?;
    let vars = [("GPUSHARE_CLI_VERSION", version.to_string())];
    let code = python_code(&python, spec.as_ref(), extra_env, &report_code(args.import_frameworks), &vars, config, cancel, out, err).await?;
    Ok(match code {
        0 => 0,
        NOT_READY => EXIT_FAILURE,
        NO_GPUSHARE => {
            writeln!(
                out,
                "not ready: {} cannot import gpushare ({} -m pip install gpushare-dlpack)",
                python.display(),
                python.display()
            )
            .context("writing the report to stdout")?;
            EXIT_FAILURE
        }
        code => {
            // The report itself failed (its error is on stderr): the verdict is still one line.
            writeln!(
                out,
                "not ready: {} could not make the report (exit status {code}; its error is above)",
                python.display()
            )
            .context("writing the report to stdout")?;
            EXIT_FAILURE
        }
    })
}

/// The interpreter, its kernelspec (where a kernel's), and the memory settings to add where unset.
pub(super) type ToolPython = (std::path::PathBuf, Option<crate::kernel::kernelspec::KernelSpec>, &'static [(&'static str, &'static str)]);

/// The Python a tool command runs code in: the kernel's (`--kernel`, default gpushare's), else
/// the Python running gpushare; its kernelspec, and the memory settings to add where unset.
pub(super) fn tool_python(config: &Config, kernel: Option<&str>) -> Result<ToolPython> {
    let env = &config.env;
    let (spec, extra_env) = match kernel_for_tools(env, kernel) {
        Ok((spec, extra)) => (Some(spec), extra),
        Err(_) if kernel.is_none() => (None, &MEMORY_ENV[..]),
        Err(e) => return Err(e),
    };
    let python = match spec.as_ref().and_then(|s| s.python(env)) {
        Some(python) => python,
        None => env.python()?,
    };
    Ok((python, spec, extra_env))
}

/// Runs `code` in `python` (the kernel's, with its kernelspec's environment and the memory
/// settings), `vars` added to its environment; its stdout and stderr are passed on, Ctrl-C stops it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn python_code(
    python: &std::path::Path,
    spec: Option<&crate::kernel::kernelspec::KernelSpec>,
    extra_env: &[(&str, &str)],
    code: &str,
    vars: &[(&str, String)],
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let env = &config.env;
    let mut command = Process::new(python);
    command
        .args(["-c", code])
        .env_clear()
        .envs(env.vars())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: Ctrl-C reaches us alone, and we end the report quietly instead
        // of letting Python print a KeyboardInterrupt traceback from inside an import.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(spec) = spec {
        command.envs(&spec.env);
    }
    command.envs(vars.iter().map(|(k, v)| (*k, v.as_str())));
    for (key, value) in extra_env {
        if env.get(key).is_none() {
            command.env(key, value);
        }
    }
    let child = command
        .spawn()
        .with_context(|| format!("running {}", python.display()))?;
    let output = tokio::select! {
        output = child.wait_with_output() => output.with_context(|| format!("running {}", python.display()))?,
        // Dropping the child kills it (kill_on_drop).
        () = ctrl_c(cancel) => return Err(KernelError::Interrupted.into()),
    };
    // Flushed here, so a report that cannot be written (stdout on a full disk) fails the command
    // instead of being dropped when the process exits.
    out.write_all(&output.stdout)
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    err.write_all(&output.stderr)?;
    Ok(if output.status.success() {
        0
    } else {
        output.status.code().unwrap_or(EXIT_FAILURE)
    })
}
