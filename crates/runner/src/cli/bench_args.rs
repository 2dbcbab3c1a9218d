//! Checks on `gpushare bench`'s arguments, made by clap before any kernel starts.
//!
//! Each parser accepts exactly what the Python side (`gpushare.bench` in the kernel) accepts, so a
//! typo is a one-line usage error (exit 2) instead of a kernel start and a Python traceback. The
//! names are copies of the Python side's; `crates/runner/tests/cli.rs` checks them against the installed
//! package so the two cannot drift apart unnoticed.

use std::sync::LazyLock;

use crate::paths::PathKind;
use crate::route::Route;
use crate::shared::{Device, parse_dtype};

/// Framework names and aliases `gpushare.adapters.framework()` knows: (name, aliases), in the
/// registry's order. Generated from the adapters themselves by `build.rs`, so that adding a
/// framework touches its adapter alone.
pub const FRAMEWORKS: &[(&str, &[&str])] = include!(concat!(env!("OUT_DIR"), "/frameworks.rs"));

/// Transfer paths `gpushare.lab.parse_paths` knows: the path table's share paths plus `auto`
/// (`crate::paths`, which the Python side reads too); `all`, alone, means every path.
pub static PATHS: LazyLock<Vec<&'static str>> = LazyLock::new(|| known(PathKind::Share));

/// Process paths `gpushare.processes.parse_process_paths` knows (the table's process paths plus
/// `auto`), for `--across processes`.
pub static PROCESS_PATHS: LazyLock<Vec<&'static str>> = LazyLock::new(|| known(PathKind::Process));

fn known(kind: PathKind) -> Vec<&'static str> {
    crate::paths::names(kind).chain([crate::paths::AUTO.name]).collect()
}

/// `--across`: where the arrays go: `processes` (a worker process of this host) or `HOST:PORT` of a
/// worker on another host (`gpushare worker --listen HOST:PORT`), read as the Python side reads it
/// (`gpushare.arguments.across_option`) and as `--listen` is.
pub fn parse_across(s: &str) -> Result<String, String> {
    match s.trim() {
        "processes" | "process" => Ok("processes".to_string()),
        other if other.contains(':') => {
            super::worker::check_address("--across", "10.0.0.2:29600", other)?;
            Ok(other.to_string())
        }
        other => Err(format!(
            "unknown --across `{other}`; known: processes, or HOST:PORT of a worker on another host \
             (`gpushare worker --listen HOST:PORT`)"
        )),
    }
}

/// Whether a parsed `--across` names a worker on another host.
pub fn is_remote(across: &str) -> bool {
    across != "processes"
}

/// With `--across processes` the paths are process paths, without it transfer paths: a name of the
/// other kind is a usage error, made before any kernel starts.
pub fn check_paths_across(paths: &str, across: bool) -> Result<(), String> {
    let (kind, what) = if across {
        (PathKind::Process, "with --across processes the paths are")
    } else {
        (PathKind::Share, "without --across the paths are")
    };
    match crate::paths::parse_list(kind, [paths]) {
        Ok(_) => Ok(()),
        Err(_) => {
            let known = if across { &PROCESS_PATHS[..] } else { &PATHS[..] };
            let name = paths.split(',').map(str::trim).find(|n| !n.is_empty() && !known.contains(n)).unwrap_or(paths);
            Err(format!("path `{name}`: {what} {}, all", known.join(", ")))
        }
    }
}


/// The canonical name of a framework name or alias (case and spaces ignored, as Python does).
pub fn framework(name: &str) -> Option<&'static str> {
    let name = name.trim().to_ascii_lowercase();
    FRAMEWORKS
        .iter()
        .find(|(canonical, aliases)| *canonical == name || aliases.contains(&name.as_str()))
        .map(|(canonical, _)| *canonical)
}

/// The frameworks as `--help` and errors list them: `torch (pytorch, pt), tf (tensorflow), …`.
pub fn known_frameworks() -> String {
    FRAMEWORKS
        .iter()
        .map(|(name, aliases)| {
            if aliases.is_empty() {
                name.to_string()
            } else {
                format!("{name} ({})", aliases.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `SRC->DST` (or `SRC→DST`), with or without spaces around the arrow, read by the core's one
/// parser of routes; both must be frameworks gpushare knows.
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    if !Route::has_arrow(s) {
        return Err(unquoted_pair_hint(s).unwrap_or_else(|| format!("`{s}` is not of the form SRC->DST (e.g. torch->jax)")));
    }
    let (src, dst) = Route::pair(s)?;
    let (src, dst) = (src.as_str(), dst.as_str());
    // The names are checked later (bench_checks::check_frameworks), by the adapters' own code in
    // the kernel's Python, which suggests the closest name for a typo; here only that they are
    // names, so a quote or a space cannot reach the kernel's code.
    for name in [src, dst] {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(format!(
                "`{name}` is not a framework name; known: {}",
                known_frameworks()
            ));
        }
    }
    Ok((src.to_string(), dst.to_string()))
}

/// An unquoted `torch->jax` reaches us as `torch-`: the shell took `>jax` as a redirection and
/// wrote our output to a file named `jax`. Say so, or the user hunts for a framework named
/// `torch-` and never looks for that file.
fn unquoted_pair_hint(s: &str) -> Option<String> {
    let src = s.trim().strip_suffix('-')?.trim();
    let example = if framework(src).is_some() { src } else { "torch" };
    Some(format!(
        "`{s}` looks like a pair that lost its quotes: the shell reads `>` as a redirection (and \
         wrote a file named after the target framework, which you can delete); quote the pair: \
         gpushare bench '{example}->jax'"
    ))
}

pub use crate::render::units::parse_size;

/// `--sizes`: a comma-separated list with at least one size. Kept as written (the kernel parses
/// it again), only checked here.
pub fn parse_sizes(s: &str) -> Result<String, String> {
    let sizes: Vec<&str> = s.split(',').map(str::trim).filter(|x| !x.is_empty()).collect();
    if sizes.is_empty() {
        return Err("no sizes to sweep: write e.g. 4KiB,1MiB".into());
    }
    for size in sizes {
        parse_size(size)?;
    }
    Ok(s.to_string())
}

/// `--paths`: `all` (or nothing, which Python reads as `all`), or a comma-separated list of known
/// paths.
pub fn parse_paths(s: &str) -> Result<String, String> {
    // Either kind's names, read by the core's one parser of path lists: which kind applies is
    // known once --across is read (check_paths_across); `all` stands alone.
    let of_kind = |k: PathKind, text: &str| crate::paths::parse_list(k, [text]).is_ok();
    let of_a_kind = |name: &str| name != "all" && (of_kind(PathKind::Share, name) || of_kind(PathKind::Process, name));
    if of_kind(PathKind::Share, s) || of_kind(PathKind::Process, s) {
        return Ok(s.to_string());
    }
    if let Some(name) = s.split(',').map(str::trim).filter(|n| !n.is_empty()).find(|n| !of_a_kind(n)) {
        // The first line lists the transfer paths (crates/runner/tests/cli.rs compares it with Python's).
        return Err(format!(
            "unknown transfer path `{name}`; known paths: {}, all (with --across processes: {})",
            PATHS.join(", "),
            PROCESS_PATHS.join(", ")
        ));
    }
    Ok(s.to_string())
}

/// `--device`: cpu, cpu:0, cuda, cuda:N, gpu or gpu:N, read by the core's one parser of device names
/// (the kernel side reads them with the same one).
pub fn parse_device(s: &str) -> Result<String, String> {
    Device::parse(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

/// `--dtype`: a dtype name SharedBuffer knows (the kernel side checks with the same parser).
pub fn parse_dtype_name(s: &str) -> Result<String, String> {
    parse_dtype(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::units::MAX_SIZE;

    #[test]
    fn pairs_take_known_names_and_aliases_with_or_without_spaces() {
        assert_eq!(parse_pair("torch->jax"), Ok(("torch".into(), "jax".into())));
        assert_eq!(parse_pair("pt -> np"), Ok(("pt".into(), "np".into())));
        assert_eq!(parse_pair("torch ->tf"), Ok(("torch".into(), "tf".into())));
        assert_eq!(parse_pair("TensorFlow-> cupy"), Ok(("TensorFlow".into(), "cupy".into())));
        assert_eq!(parse_pair("torch→jax"), Ok(("torch".into(), "jax".into())));
        for bad in ["torch", "torch->", "->jax", "torch->jax->tf", "torch->ja'x", "torch->ja x"] {
            assert!(parse_pair(bad).is_err(), "{bad}");
        }
        assert!(parse_pair("torch->ja'x").unwrap_err().contains("known: torch (pytorch, pt)"));
        // A misspelt name is a name: the kernel's Python says which one was meant.
        assert!(parse_pair("torch->jaxx").is_ok());
        assert_eq!(parse_pair("paddle->pd"), Ok(("paddle".into(), "pd".into())));
        // `torch->jax` unquoted: the shell hands us `torch-` and redirects to a file `jax`.
        for unquoted in ["torch-", "pt -", "-"] {
            let e = parse_pair(unquoted).unwrap_err();
            assert!(e.contains("lost its quotes") && e.contains("'") && e.contains("->jax'"), "{e}");
        }
        assert!(parse_pair("torch-").unwrap_err().contains("gpushare bench 'torch->jax'"));
        assert!(!parse_pair("torch").unwrap_err().contains("quotes"));
    }

    #[test]
    fn sizes_read_as_python_reads_them() {
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1.5 MB"), Ok(1_500_000));
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size(" 64gib "), Ok(64 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        for bad in ["", "KiB", "4 KiBs", "-1", "1.", ".5", "1.2.3", "4 KiB x"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_sizes("4KiB, 1MiB").is_ok());
        assert!(parse_sizes(" , ").is_err());
        assert!(parse_sizes("4KiB,lots").is_err());
        // Past what an array can hold: a usage error here, not a traceback in the kernel.
        for huge in ["18446744073709551616", &"9".repeat(400), "9223372036854775808", "9000000TiB", "1e400"] {
            assert!(parse_size(huge).is_err(), "{huge}");
        }
        assert!(parse_size(&"9".repeat(400)).unwrap_err().contains("beyond any memory"));
        assert_eq!(parse_size("9223372036854775807"), Ok(MAX_SIZE));
    }

    #[test]
    fn paths_devices_and_dtypes_are_checked() {
        assert!(parse_paths("all").is_ok());
        assert!(parse_paths("dlpack, copy,auto").is_ok());
        assert!(parse_paths("bogus").is_err());
        assert!(parse_paths("all,dlpack").is_err(), "Python reads `all` only alone");
        for good in ["cpu", "cuda", "cuda:1", "gpu", "GPU:0"] {
            assert!(parse_device(good).is_ok(), "{good}");
        }
        for bad in ["gpu9", "cuda:", "cuda:-1", "tpu", ""] {
            assert!(parse_device(bad).is_err(), "{bad}");
        }
        assert!(parse_dtype_name("float32").is_ok());
        assert!(parse_dtype_name("float7").is_err());
    }
}
