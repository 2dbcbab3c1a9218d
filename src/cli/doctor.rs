//! `gpushare doctor`: the environment report, from the kernel's Python.

use std::io::Write;
use std::process::{Command as Process, Stdio};

use anyhow::{Context as _, Result};

use super::{Config, DEFAULT_KERNEL_NAME, DoctorArgs, EXIT_FAILURE, MEMORY_ENV, kernel_for_tools};

pub(super) fn doctor(
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
