//! Kernelspecs: where Jupyter keeps them, reading one, and installing gpushare's.
//!
//! The search order follows `jupyter_core.paths.jupyter_path()` rather than
//! `jupyter_zmq_client::data_dirs()`, which treats `$JUPYTER_PATH` as a single directory and
//! leaves out `{sys.prefix}/share/jupyter`, where `pip install`ed kernels live.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use serde_json::Value;

use super::KernelError;
use super::env::{Environment, SYS_PREFIX_VAR};

/// The kernelspec shipped in `kernelspec/`; `argv[0]` is replaced at install time.
const KERNEL_JSON_TEMPLATE: &str = include_str!("../../../../kernelspec/kernel.json");
const LOGOS: [(&str, &[u8]); 2] = [
    (
        "logo-32x32.png",
        include_bytes!("../../../../kernelspec/logo-32x32.png"),
    ),
    (
        "logo-64x64.png",
        include_bytes!("../../../../kernelspec/logo-64x64.png"),
    ),
];

/// The name `gpushare kernel install` uses unless told otherwise.
pub const DEFAULT_KERNEL_NAME: &str = "gpushare";

/// How a kernel wants to be interrupted (`interrupt_mode` in kernel.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterruptMode {
    /// SIGINT to the kernel's process group (the default).
    Signal,
    /// An `interrupt_request` on the control channel.
    Message,
}

/// A kernelspec found on disk (or synthesised for the stock `python3` kernel).
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// The name it was found under (its directory name).
    pub name: String,
    /// Its directory; `{resource_dir}` in argv expands to this.
    pub dir: PathBuf,
    pub argv: Vec<String>,
    pub display_name: String,
    pub language: String,
    pub env: BTreeMap<String, String>,
    pub interrupt_mode: InterruptMode,
}

#[derive(Deserialize)]
struct KernelJson {
    argv: Vec<String>,
    display_name: String,
    #[serde(default)]
    language: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    interrupt_mode: Option<String>,
}

impl KernelSpec {
    /// Read `DIR/kernel.json`.
    pub fn read(name: &str, dir: &Path) -> Result<Self, KernelError> {
        let path = dir.join("kernel.json");
        let text = fs::read_to_string(&path).map_err(|source| KernelError::io(&path, source))?;
        let json: KernelJson =
            serde_json::from_str(&text).map_err(|e| KernelError::InvalidKernelspec {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        if json.argv.is_empty() {
            return Err(KernelError::InvalidKernelspec {
                path,
                detail: "argv is empty".into(),
            });
        }
        let interrupt_mode = match json.interrupt_mode.as_deref() {
            Some("message") => InterruptMode::Message,
            _ => InterruptMode::Signal,
        };
        Ok(Self {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            argv: json.argv,
            display_name: json.display_name,
            language: json.language,
            env: json.env,
            interrupt_mode,
        })
    }

    /// The stock ipykernel spec for `python`, the way `jupyter_client` falls back to ipykernel's
    /// built-in `python3` kernel when none is installed.
    pub fn native_python(python: &Path) -> Self {
        Self {
            name: "python3".into(),
            dir: PathBuf::new(),
            argv: [
                python.to_string_lossy().as_ref(),
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ]
            .map(String::from)
            .to_vec(),
            display_name: "Python 3 (ipykernel)".into(),
            language: "python".into(),
            env: BTreeMap::new(),
            interrupt_mode: InterruptMode::Signal,
        }
    }

    /// Whether the kernel loads gpushare's extension at start (`--ext=gpushare`, as the spec
    /// `gpushare kernel install` writes does); any other kernel needs `%load_ext gpushare`.
    pub fn loads_gpushare(&self) -> bool {
        self.argv.iter().any(|a| a == "--ext=gpushare")
            || self.argv.windows(2).any(|w| w[0] == "--ext" && w[1] == "gpushare")
    }

    /// Whether this is an IPython kernel, whose command line takes IPython's traitlets options.
    pub fn is_ipykernel(&self) -> bool {
        self.argv
            .iter()
            .any(|a| a == "ipykernel_launcher" || a == "ipykernel")
    }

    /// The interpreter the kernel runs, when it is a Python kernel (a bare `python` is the
    /// environment's Python, as at launch).
    pub fn python(&self, env: &Environment) -> Option<PathBuf> {
        if !self.language.eq_ignore_ascii_case("python") {
            return None;
        }
        if is_bare_python(&self.argv[0]) {
            return env.python().ok();
        }
        Some(PathBuf::from(&self.argv[0]))
    }
}

/// Whether `argv[0]` names "the" Python rather than a particular one: `jupyter_client` runs
/// such kernels with its own `sys.executable`, and the stock `python3` kernelspec says `python`.
pub fn is_bare_python(program: &str) -> bool {
    let Some(version) = program.strip_prefix("python") else {
        return false;
    };
    version.is_empty()
        || version
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Ask a Python for its `sys.prefix` (`$GPUSHARE_SYS_PREFIX` short-circuits the question).
pub fn sys_prefix(env: &Environment, python: &Path) -> Result<PathBuf, KernelError> {
    if let Some(prefix) = env.get(SYS_PREFIX_VAR) {
        return Ok(env.absolute(Path::new(prefix)));
    }
    let output = Command::new(python)
        .args(["-c", "import sys; print(sys.prefix)"])
        .env_clear()
        .envs(env.vars())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| KernelError::Spawn {
            program: python.to_path_buf(),
            source,
        })?;
    let prefix = String::from_utf8_lossy(&output.stdout)
        .trim_end_matches(['\r', '\n'])
        .to_string();
    if !output.status.success() || prefix.is_empty() {
        return Err(KernelError::Python {
            python: python.to_path_buf(),
            detail: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(PathBuf::from(prefix))
}

/// The per-user Jupyter data dir (`jupyter --data-dir`).
pub fn user_data_dir(env: &Environment) -> Option<PathBuf> {
    if let Some(dir) = env.get("JUPYTER_DATA_DIR") {
        return Some(env.absolute(Path::new(dir)));
    }
    let home = env.home()?;
    if cfg!(target_os = "macos") {
        return Some(home.join("Library/Jupyter"));
    }
    let xdg = env
        .get("XDG_DATA_HOME")
        .map_or_else(|| home.join(".local/share"), PathBuf::from);
    Some(xdg.join("jupyter"))
}

/// System-wide Jupyter data dirs (`SYSTEM_JUPYTER_PATH`).
pub fn system_data_dirs() -> Vec<PathBuf> {
    vec![
        PathBuf::from("/usr/local/share/jupyter"),
        PathBuf::from("/usr/share/jupyter"),
    ]
}

/// `$JUPYTER_PATH`, split on `:` like `jupyter_core` does.
pub fn jupyter_path_dirs(env: &Environment) -> Vec<PathBuf> {
    env.get("JUPYTER_PATH")
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| !d.as_os_str().is_empty())
                .map(|d| env.absolute(&d))
                .collect()
        })
        .unwrap_or_default()
}

/// Jupyter data dirs in priority order: `$JUPYTER_PATH`, then the environment's
/// `{sys.prefix}/share/jupyter` and the user dir, then the system dirs.
///
/// `jupyter_core` puts the environment before the user dir when it runs inside a virtualenv or
/// conda env (or `$JUPYTER_PREFER_ENV_PATH` says so). gpushare is installed into such an
/// environment and launches that environment's Python, so it prefers the environment unless
/// `$JUPYTER_PREFER_ENV_PATH` is set false.
pub fn data_dirs(env: &Environment, sys_prefix: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = jupyter_path_dirs(env);
    let user: Vec<PathBuf> = user_data_dir(env).into_iter().collect();
    let system = system_data_dirs();
    let env_dirs: Vec<PathBuf> = sys_prefix
        .map(|p| p.join("share/jupyter"))
        .filter(|d| !system.contains(d))
        .into_iter()
        .collect();
    if env.flag("JUPYTER_PREFER_ENV_PATH").unwrap_or(true) {
        dirs.extend(env_dirs);
        dirs.extend(user);
    } else {
        dirs.extend(user);
        dirs.extend(env_dirs);
    }
    dirs.extend(system);
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// Kernel names under `DATA_DIR/kernels`, lower-cased as Jupyter does.
fn kernel_names_in(data_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(data_dir.join("kernels")) else {
        return Vec::new();
    };
    let mut names: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("kernel.json").is_file())
        .filter_map(|e| Some((e.file_name().to_str()?.to_lowercase(), e.path())))
        .collect();
    names.sort();
    names
}

/// Find a kernelspec by name (case-insensitive, as in Jupyter).
///
/// `$JUPYTER_PATH` is searched before asking Python for `sys.prefix`, so a kernel found there
/// costs no interpreter start. When `python3` is asked for and none is installed, ipykernel's
/// built-in spec is used with this environment's Python, as `jupyter_client` does.
pub fn find_kernelspec(env: &Environment, name: &str) -> Result<KernelSpec, KernelError> {
    let wanted = name.to_lowercase();
    let lookup = |dirs: &[PathBuf]| {
        dirs.iter().find_map(|d| {
            kernel_names_in(d)
                .into_iter()
                .find(|(n, _)| *n == wanted)
                .map(|(_, p)| p)
        })
    };
    if let Some(dir) = lookup(&jupyter_path_dirs(env)) {
        return KernelSpec::read(&wanted, &dir);
    }
    let python = env.python().ok();
    let prefix = python.as_deref().and_then(|py| sys_prefix(env, py).ok());
    let dirs = data_dirs(env, prefix.as_deref());
    if let Some(dir) = lookup(&dirs) {
        return KernelSpec::read(&wanted, &dir);
    }
    if wanted == "python3"
        && let Some(python) = python
    {
        return Ok(KernelSpec::native_python(&python));
    }
    let mut available: Vec<String> = dirs
        .iter()
        .flat_map(|d| kernel_names_in(d))
        .map(|(n, _)| n)
        .collect();
    available.sort();
    available.dedup();
    Err(KernelError::KernelNotFound {
        name: name.to_string(),
        available,
        searched: dirs,
    })
}

/// Where `gpushare kernel install` puts the kernelspec (the flags of `python -m ipykernel install`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallTarget {
    /// `/usr/local/share/jupyter` (the default of `ipykernel install`).
    System,
    /// The per-user data dir.
    User,
    /// `{sys.prefix}/share/jupyter` of the Python that runs gpushare.
    SysPrefix,
    /// `PREFIX/share/jupyter`.
    Prefix(PathBuf),
}

/// `[a-z0-9._-]+`, case-insensitive: what `jupyter_client` accepts as a kernel name, less `.`
/// and `..`. Those match the pattern but name the kernels folder itself or the one above it, so
/// `install` would write `kernel.json` outside the kernels folder.
pub fn validate_kernel_name(name: &str) -> Result<(), KernelError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(KernelError::InvalidKernelName(name.to_string()))
    }
}

/// The kernel.json gpushare installs: the shipped template with `argv[0]` set to `python`.
pub fn kernel_json(python: &Path, display_name: Option<&str>) -> Result<Value, KernelError> {
    let mut spec: Value =
        serde_json::from_str(KERNEL_JSON_TEMPLATE).map_err(|e| KernelError::InvalidKernelspec {
            path: "kernelspec/kernel.json".into(),
            detail: e.to_string(),
        })?;
    if let Some(argv0) = spec.pointer_mut("/argv/0") {
        *argv0 = Value::String(python.to_string_lossy().into_owned());
    }
    if let Some(name) = display_name {
        spec["display_name"] = Value::String(name.to_string());
    }
    Ok(spec)
}

/// Whether `python` can import ipykernel (its kernel launcher is what the kernelspec runs).
pub fn has_ipykernel(python: &Path) -> bool {
    std::process::Command::new(python)
        .args(["-c", "import ipykernel_launcher"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Install gpushare's kernelspec; returns the directory written.
pub fn install(
    env: &Environment,
    target: &InstallTarget,
    name: &str,
    display_name: Option<&str>,
) -> Result<PathBuf, KernelError> {
    validate_kernel_name(name)?;
    let python = env.python()?;
    let data_dir = match target {
        InstallTarget::System => system_data_dirs().remove(0),
        InstallTarget::User => user_data_dir(env).ok_or(KernelError::NoHome)?,
        InstallTarget::SysPrefix => sys_prefix(env, &python)?.join("share/jupyter"),
        InstallTarget::Prefix(prefix) => env.absolute(prefix).join("share/jupyter"),
    };
    // Whatever the name check lets through, the spec goes into a folder of its own directly
    // under `kernels`, never into `kernels` itself, beside or above it.
    let lower = name.to_lowercase();
    let mut parts = Path::new(&lower).components();
    if !matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None)) {
        return Err(KernelError::InvalidKernelName(name.to_string()));
    }
    let dir = data_dir.join("kernels").join(&lower);
    fs::create_dir_all(&dir).map_err(|source| KernelError::io(&dir, source))?;
    let spec = kernel_json(&python, display_name)?;
    let path = dir.join("kernel.json");
    fs::write(&path, super::notebook::to_nbformat_json(&spec))
        .map_err(|source| KernelError::io(&path, source))?;
    for (file, bytes) in LOGOS {
        let path = dir.join(file);
        fs::write(&path, bytes).map_err(|source| KernelError::io(&path, source))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpushare-ks-{tag}-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn data_dirs_split_jupyter_path_and_prefer_the_environment() {
        let env = Environment::empty()
            .with("JUPYTER_PATH", "/a:/b:")
            .with("HOME", "/home/u");
        let dirs = data_dirs(&env, Some(Path::new("/venv")));
        let expected: Vec<PathBuf> = [
            "/a",
            "/b",
            "/venv/share/jupyter",
            "/home/u/.local/share/jupyter",
            "/usr/local/share/jupyter",
            "/usr/share/jupyter",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(dirs, expected);
    }

    #[test]
    fn user_dir_first_when_the_environment_is_not_preferred() {
        let env = Environment::empty()
            .with("HOME", "/home/u")
            .with("JUPYTER_DATA_DIR", "/data")
            .with("JUPYTER_PREFER_ENV_PATH", "0");
        let dirs = data_dirs(&env, Some(Path::new("/venv")));
        assert_eq!(dirs[0], PathBuf::from("/data"));
        assert_eq!(dirs[1], PathBuf::from("/venv/share/jupyter"));
    }

    #[test]
    fn system_prefix_is_not_listed_twice() {
        let env = Environment::empty();
        let dirs = data_dirs(&env, Some(Path::new("/usr")));
        assert_eq!(dirs, system_data_dirs());
    }

    #[test]
    fn finds_a_kernel_on_jupyter_path_case_insensitively() {
        let root = scratch("find");
        let dir = root.join("kernels/mykernel");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("kernel.json"),
            r#"{"argv": ["/py", "-f", "{connection_file}"], "display_name": "Mine", "language": "python",
                "interrupt_mode": "message", "env": {"A": "1"}}"#,
        )
        .unwrap();
        let env = Environment::empty()
            .with("JUPYTER_PATH", &root)
            .with("GPUSHARE_SYS_PREFIX", "/nonexistent");
        let spec = find_kernelspec(&env, "MyKernel").unwrap();
        assert_eq!(spec.name, "mykernel");
        assert_eq!(spec.interrupt_mode, InterruptMode::Message);
        assert_eq!(spec.env.get("A").map(String::as_str), Some("1"));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn missing_kernel_lists_what_was_searched() {
        let env = Environment::empty()
            .with("JUPYTER_PATH", "/nonexistent-a")
            .with("GPUSHARE_SYS_PREFIX", "/nonexistent-b");
        match find_kernelspec(&env, "nope") {
            Err(KernelError::KernelNotFound { searched, .. }) => {
                assert!(searched.contains(&PathBuf::from("/nonexistent-a")));
            }
            other => panic!("expected KernelNotFound, got {other:?}"),
        }
    }

    #[test]
    fn python3_falls_back_to_ipykernel_builtin() {
        let env = Environment::empty()
            .with("GPUSHARE_PYTHON", "/venv/bin/python")
            .with("GPUSHARE_SYS_PREFIX", "/nonexistent");
        let spec = find_kernelspec(&env, "python3").unwrap();
        assert_eq!(spec.argv[0], "/venv/bin/python");
        assert!(spec.is_ipykernel());
    }

    #[test]
    fn installed_spec_runs_the_given_python_with_the_extension_and_memory_settings() {
        let root = scratch("install");
        let env = Environment::empty().with("GPUSHARE_PYTHON", "/venv/bin/python");
        let dir = install(&env, &InstallTarget::Prefix(root.clone()), "gpushare", None).unwrap();
        assert_eq!(dir, root.join("share/jupyter/kernels/gpushare"));
        let spec = KernelSpec::read("gpushare", &dir).unwrap();
        assert_eq!(spec.argv[0], "/venv/bin/python");
        assert!(spec.argv.iter().any(|a| a == "--ext=gpushare"));
        assert!(spec.loads_gpushare());
        assert!(!KernelSpec::native_python(Path::new("/usr/bin/python3")).loads_gpushare());
        assert!(spec.argv.iter().any(|a| a == "{connection_file}"));
        assert_eq!(
            spec.env
                .get("XLA_PYTHON_CLIENT_PREALLOCATE")
                .map(String::as_str),
            Some("false")
        );
        assert_eq!(
            spec.env
                .get("TF_FORCE_GPU_ALLOW_GROWTH")
                .map(String::as_str),
            Some("true")
        );
        assert!(dir.join("logo-64x64.png").is_file());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn kernel_names_are_checked() {
        assert!(validate_kernel_name("gpushare-2.0_x").is_ok());
        assert!(validate_kernel_name("../etc").is_err());
        assert!(validate_kernel_name("a b").is_err());
        assert!(validate_kernel_name("").is_err());
        assert!(validate_kernel_name(".").is_err());
        assert!(validate_kernel_name("..").is_err());
        assert!(validate_kernel_name("...").is_ok(), "a folder named `...` stays inside the kernels folder");
    }

    #[test]
    fn no_name_writes_outside_the_kernels_folder() {
        let root = scratch("escape");
        let env = Environment::empty().with("GPUSHARE_PYTHON", "/venv/bin/python");
        for name in ["..", ".", "../x", "../../x", "a/b", "/abs", ""] {
            let e = install(&env, &InstallTarget::Prefix(root.clone()), name, None).unwrap_err();
            assert!(matches!(e, KernelError::InvalidKernelName(_)), "{name:?}: {e}");
        }
        assert!(!root.join("share/jupyter/kernel.json").exists());
        assert!(!root.join("share/jupyter/kernels/kernel.json").exists());
        fs::remove_dir_all(root).unwrap();
    }
}
