//! `gpushare kernel install`.

use std::io::Write;

use anyhow::{Context as _, Result};

use super::{Config, InstallArgs};
use crate::kernel::InstallTarget;
use crate::kernel::kernelspec;

pub(super) fn kernel_install(args: &InstallArgs, config: &Config, out: &mut dyn Write) -> Result<()> {
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
    // The install itself needs no ipykernel, but every kernel started from the spec does: say so
    // now rather than when `gpushare run` or Jupyter fails with "No module named ipykernel_launcher".
    if let Ok(python) = config.env.python()
        && !kernelspec::has_ipykernel(&python)
    {
        eprintln!(
            "warning: {} cannot import ipykernel, so kernels started from this spec will fail.\n\
             hint: install it into that environment with `{} -m pip install 'gpushare-dlpack[kernel]'`",
            python.display(),
            python.display()
        );
    }
    Ok(())
}
