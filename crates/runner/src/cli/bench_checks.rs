//! Checks of `gpushare bench`'s arguments against this machine, made before any kernel starts.
//!
//! `bench_args` checks what the arguments say; this checks whether they can work here: a CUDA
//! device that is not there, sizes larger than the memory that must hold them. Without these a
//! kernel started, every point of the sweep failed with the same long error, and the user read it
//! once per point.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::cuda::{DriverStatus, device_info, driver_status};
use crate::kernel::Environment;
use crate::render::units::bytes as human_bytes;
use crate::shared::Device;

use super::BenchArgs;
use super::bench_args::parse_size;

/// What one device of the sweep can hold, and what to call it in a message.
struct Capacity {
    what: String,
    bytes: u64,
}

/// Every check; the first that fails is the one error the user sees.
pub(super) fn check_machine(args: &BenchArgs) -> Result<(), String> {
    for (option, device) in [("--device", &args.device), ("--worker-device", &args.worker_device)] {
        if let Some(text) = device
            && let Ok(Device::Cuda(ordinal)) = Device::parse(text)
        {
            check_cuda_device(option, text, ordinal, driver_status())?;
        }
    }
    let Some(sizes) = &args.sizes else {
        return Ok(());
    };
    let largest = sizes
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| parse_size(s).ok().map(|n| (s, n)))
        .max_by_key(|&(_, n)| n);
    let Some((text, size)) = largest else {
        return Ok(());
    };
    match capacity(args.device.as_deref()) {
        Some(capacity) => check_size(text, size, &capacity),
        None => Ok(()),
    }
}

/// Asks the kernel's Python about each framework name through the adapters' own code
/// (`gpushare.adapters.framework`, whose error suggests the closest name, as the magics do)
/// and whether it is installed there. It exits 3 with the problem on stdout; any other failure
/// (no gpushare in that Python) means it could not tell.
const FRAMEWORKS_CODE: &str = r#"import json, os, sys
from gpushare.adapters import framework
from gpushare.exceptions import GpushareError
for name in json.loads(os.environ['GPUSHARE_CHECK_FRAMEWORKS']):
    try:
        a = framework(name)
    except GpushareError as e:
        print(e)
        sys.exit(3)
    if not a.installed():
        print(f"{a.name} is not installed in the kernel's Python ({sys.executable}); pip install {a.pip_name()}")
        sys.exit(3)
"#;

/// Checks, in about the time Python takes to start rather than a kernel's, that every framework
/// `names` lists is one gpushare knows and is installed in `python`. `Err` holds the one line to
/// show; where `python` cannot run gpushare, names gpushare does not know are still refused,
/// without a suggestion, and the rest is left to the kernel.
pub(super) fn check_frameworks(names: &[&str], python: Option<&Path>, env: &Environment) -> Result<(), String> {
    let output = python.map(|python| {
        Command::new(python)
            .args(["-c", FRAMEWORKS_CODE])
            .env_clear()
            .envs(env.vars())
            .env("GPUSHARE_CHECK_FRAMEWORKS", serde_json::to_string(names).unwrap_or_default())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    });
    if let Some(Ok(output)) = &output
        && output.status.code() == Some(3)
    {
        return Err(String::from_utf8_lossy(&output.stdout).trim().to_string());
    }
    match names.iter().find(|n| super::bench_args::framework(n).is_none()) {
        Some(name) => Err(format!(
            "unknown framework `{name}`; known: {}",
            super::bench_args::known_frameworks()
        )),
        None => Ok(()),
    }
}

pub(super) fn check_cuda_device(option: &str, text: &str, ordinal: i32, status: &DriverStatus) -> Result<(), String> {
    match status {
        DriverStatus::Unavailable { reason } => Err(format!(
            "{option} {text}: no CUDA device is usable here ({reason}); {}",
            if option == "--device" { "sweep on the host with --device cpu".to_string() } else { format!("leave out {option}") }
        )),
        DriverStatus::Available { device_count, .. } if ordinal >= *device_count => {
            let known = (0..*device_count).map(|n| format!("cuda:{n}")).collect::<Vec<_>>().join(", ");
            Err(format!(
                "{option} {text}: this machine has {device_count} CUDA device{} ({known})",
                if *device_count == 1 { "" } else { "s" }
            ))
        }
        DriverStatus::Available { .. } => Ok(()),
    }
}

fn check_size(text: &str, size: u64, capacity: &Capacity) -> Result<(), String> {
    if size <= capacity.bytes {
        return Ok(());
    }
    Err(format!(
        "--sizes {text}: {} ({size} bytes) is more than the {} of {} that must hold it; \
         sweep sizes below that",
        human_bytes(size),
        human_bytes(capacity.bytes),
        capacity.what
    ))
}

/// The memory the sweep's arrays live in: the device's when `--device` names a CUDA device (or
/// none is named and the kernel would pick cuda:0, as `gpushare.bench` does when CUDA is usable),
/// else the host's. `None` when the size is not known, which skips the check.
fn capacity(device: Option<&str>) -> Option<Capacity> {
    let device = match device {
        Some(text) => Device::parse(text).ok()?,
        None if driver_status().device_count() > 0 => Device::Cuda(0),
        None => Device::Cpu,
    };
    match device {
        Device::Cpu => host_memory().map(|bytes| Capacity { what: "this machine's memory".into(), bytes }),
        Device::Cuda(ordinal) => device_info(ordinal).ok().map(|info| Capacity {
            what: format!("cuda:{ordinal}'s memory ({})", info.name),
            bytes: info.total_memory,
        }),
    }
}

/// Physical memory, or the container's limit when that is lower (cgroup v2 `memory.max`, v1
/// `memory.limit_in_bytes`): what a process here can hold at most.
fn host_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; it returns -1 for a name it does not know.
    let (pages, page_size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGE_SIZE)) };
    let physical = u64::try_from(pages).ok()?.checked_mul(u64::try_from(page_size).ok()?)?;
    let limit = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .filter_map(|text| text.trim().parse::<u64>().ok())
        .min();
    Some(limit.map_or(physical, |l| l.min(physical)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_absent_cuda_device_is_named_with_the_way_out() {
        let none = DriverStatus::Unavailable { reason: "no libcuda".into() };
        let e = check_cuda_device("--device", "cuda", 0, &none).unwrap_err();
        assert!(e.contains("no libcuda") && e.contains("--device cpu"), "{e}");
        let two = DriverStatus::Available { version: 13000, device_count: 2 };
        assert!(check_cuda_device("--device", "cuda:1", 1, &two).is_ok());
        let e = check_cuda_device("--worker-device", "cuda:2", 2, &two).unwrap_err();
        assert!(e.starts_with("--worker-device cuda:2") && e.contains("2 CUDA devices (cuda:0, cuda:1)"), "{e}");
    }

    #[test]
    fn a_size_larger_than_its_memory_is_refused_with_both_numbers() {
        let host = Capacity { what: "this machine's memory".into(), bytes: 16 << 30 };
        assert!(check_size("16GiB", 16 << 30, &host).is_ok());
        let e = check_size("1TB", 1_000_000_000_000, &host).unwrap_err();
        assert!(e.contains("--sizes 1TB") && e.contains("931 GiB") && e.contains("16 GiB"), "{e}");
        assert!(host_memory().is_some_and(|b| b > 0));
    }
}
