//! The environment a command runs in, as an explicit value.
//!
//! Everything that reads an environment variable (kernelspec search, the Python to launch, the
//! runtime dir, the kernel's own environment) reads it from an [`Environment`] rather than from
//! the process. Tests run in parallel threads of one process, so each builds its own
//! `Environment` instead of mutating the shared process environment.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::KernelError;

/// Names the Python console-script shim sets (see `python/gpushare`): the interpreter that runs
/// the command and its `sys.prefix`.
pub const PYTHON_VAR: &str = "GPUSHARE_PYTHON";
pub const SYS_PREFIX_VAR: &str = "GPUSHARE_SYS_PREFIX";

/// A snapshot of environment variables.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    vars: BTreeMap<OsString, OsString>,
    cwd: Option<PathBuf>,
}

impl Environment {
    /// The variables and working directory of this process.
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars_os().collect(),
            cwd: std::env::current_dir().ok(),
        }
    }

    /// No variables at all (a kernel started from it gets only what its kernelspec sets).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Set (or replace) one variable.
    #[must_use]
    pub fn with(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.vars.insert(key.into(), value.into());
        self
    }

    /// Remove one variable.
    #[must_use]
    pub fn without(mut self, key: impl AsRef<OsStr>) -> Self {
        self.vars.remove(key.as_ref());
        self
    }

    /// A variable's value; an empty value counts as unset, as in `jupyter_core`.
    pub fn get(&self, key: &str) -> Option<&OsStr> {
        self.vars
            .get(OsStr::new(key))
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    pub fn vars(&self) -> impl Iterator<Item = (&OsString, &OsString)> {
        self.vars.iter()
    }

    /// The home directory (`$HOME`), used for the per-user Jupyter data dir.
    pub fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }

    /// Make a relative path absolute against the working directory this environment recorded.
    pub fn absolute(&self, path: &Path) -> PathBuf {
        match &self.cwd {
            Some(cwd) if path.is_relative() => cwd.join(path),
            _ => path.to_path_buf(),
        }
    }

    /// The Python that runs this command: `$GPUSHARE_PYTHON` (set by the console-script shim to
    /// `sys.executable`), else `python3` on `$PATH`.
    ///
    /// The path is made absolute but never canonicalised: resolving a virtualenv's `python`
    /// symlink would land on the base interpreter and lose the venv.
    pub fn python(&self) -> Result<PathBuf, KernelError> {
        if let Some(python) = self.get(PYTHON_VAR) {
            return Ok(self.absolute(Path::new(python)));
        }
        self.which("python3").ok_or(KernelError::PythonNotFound)
    }

    /// Look a program up on this environment's `$PATH`.
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        let path = self.get("PATH")?;
        std::env::split_paths(path)
            .map(|dir| self.absolute(&dir).join(program))
            .find(|candidate| is_executable(candidate))
    }

    /// Truthiness of a flag variable the way `jupyter_core.paths.envset` reads it.
    pub fn flag(&self, key: &str) -> Option<bool> {
        let value = self.get(key)?.to_string_lossy().to_ascii_lowercase();
        Some(!matches!(
            value.as_str(),
            "0" | "false" | "no" | "off" | "n" | "f"
        ))
    }

    /// Directory for private temporary files (`$TMPDIR`, else `/tmp`).
    pub fn temp_dir(&self) -> PathBuf {
        self.get("TMPDIR")
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_count_as_unset() {
        let env = Environment::empty().with("JUPYTER_PATH", "");
        assert!(env.get("JUPYTER_PATH").is_none());
    }

    #[test]
    fn python_prefers_the_shim_variable_and_makes_it_absolute() {
        let env = Environment {
            cwd: Some(PathBuf::from("/work")),
            ..Environment::empty()
        }
        .with(PYTHON_VAR, "venv/bin/python");
        assert_eq!(
            env.python().ok(),
            Some(PathBuf::from("/work/venv/bin/python"))
        );
    }

    #[test]
    fn python_not_found_without_path() {
        assert!(matches!(
            Environment::empty().python(),
            Err(KernelError::PythonNotFound)
        ));
    }

    #[test]
    fn flags_read_like_jupyter_core() {
        let env = Environment::empty()
            .with("A", "0")
            .with("B", "yes")
            .with("C", "False");
        assert_eq!(env.flag("A"), Some(false));
        assert_eq!(env.flag("B"), Some(true));
        assert_eq!(env.flag("C"), Some(false));
        assert_eq!(env.flag("D"), None);
    }
}
