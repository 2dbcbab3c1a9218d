//! `gpushare calibrate`: fits this machine's cost model (issue 26.2) in the kernel's Python, with
//! `gpushare.calibrate`, and prints what it holds. What it measures goes to stderr a line per
//! sweep as it goes (a minute or more on a small machine). The sweep itself is the lab's, the fit the core's.

use std::io::Write;

use anyhow::Result;

use super::doctor::{python_code, tool_python};
use super::{CalibrateArgs, Config};
use crate::kernel::session::Cancel;

/// The Python that runs it. The arguments travel as JSON in an environment variable, so no value
/// a user typed is ever pasted into code.
const CODE: &str = "import json, os, gpushare\n\
a = json.loads(os.environ['GPUSHARE_CALIBRATE_ARGS'])\n\
m = gpushare.calibrate(a['frameworks'] or None, sizes=a['sizes'] or gpushare.advice.DEFAULT_SIZES, device=a['device'], to_device=a['to_device'], processes=a['processes'], worker_device=a['worker_device'], repeat=a['repeat'], progress='lines')\n\
print(repr(m))\n\
from gpushare import advice\n\
print(advice.summary())\n";

pub(super) async fn calibrate(
    args: &CalibrateArgs,
    config: &Config,
    cancel: &mut Option<Cancel>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let (python, spec, extra_env) = tool_python(config, args.kernel.as_deref())?;
    let frameworks: Vec<&str> = args.frameworks.iter().flat_map(|f| f.split(',')).map(str::trim).filter(|f| !f.is_empty()).collect();
    // None: gpushare.calibrate's own sizes, so the command and the function sweep the same.
    let sizes: Option<Vec<&str>> = args.sizes.as_deref().map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).collect());
    if let (Some(given), Some(sizes)) = (&args.sizes, &sizes)
        && sizes.len() < 3
    {
        writeln!(err, "gpushare calibrate: --sizes needs at least three sizes (a fit of two numbers checks itself against the third), got {given:?}")?;
        return Ok(super::EXIT_USAGE);
    }
    let payload = serde_json::json!({
        "frameworks": frameworks,
        "sizes": sizes,
        "device": args.device,
        "to_device": args.to_device,
        "processes": args.processes,
        "worker_device": args.worker_device,
        "repeat": args.repeat,
    });
    let vars = [("GPUSHARE_CALIBRATE_ARGS", payload.to_string())];
    python_code(&python, spec.as_ref(), extra_env, CODE, &vars, config, cancel, out, err).await
}
