//! Writing a result file (the executed notebook, `--json`, `--html`) where the user pointed.
//!
//! A regular file is replaced whole: written next to it, flushed to disk, renamed into place, so
//! a crash or a full disk never leaves half a notebook and a failed write is reported. Anything
//! else the path names (a device such as `/dev/full` or `/dev/stdout`, a named pipe) is written
//! into: renaming a file over it would replace the device node itself (running as root) and
//! report success while nothing reached the device.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Write `bytes` to `path` as described above. A symlink keeps pointing where it did: the file
/// it names is replaced, as writing it in place would.
pub fn write_output_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(meta) = fs::metadata(path)
        && !meta.is_file()
        && !meta.is_dir()
    {
        let mut file = fs::OpenOptions::new().write(true).open(path)?;
        file.write_all(bytes)?;
        return file.flush();
    }
    let target = if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    } else {
        path.to_path_buf()
    };
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let tmp = temporary_beside(&target);
    let written = write_synced(&tmp, bytes).and_then(|()| fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// `.NAME.<uuid>.tmp` in the same directory (a rename within one file system is atomic).
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()))
}

/// Write and fsync: some file systems (NFS, quotas, delayed allocation) report a full disk
/// only when the data is flushed, which a plain write followed by close never sees.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpushare-out-{}", uuid::Uuid::new_v4().simple()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_full_device_fails_the_write() {
        assert_eq!(
            write_output_file(Path::new("/dev/full"), b"{}").unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_a_symlink_kept() {
        let dir = scratch();
        let real = dir.join("real.ipynb");
        write_output_file(&real, b"old").unwrap();
        std::os::unix::fs::symlink(&real, dir.join("link.ipynb")).unwrap();
        write_output_file(&dir.join("link.ipynb"), b"new").unwrap();
        assert!(fs::symlink_metadata(dir.join("link.ipynb")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        write_output_file(&dir.join("sub/x.json"), b"x").unwrap();
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "no temporary file is left: {names:?}");
        fs::remove_dir_all(dir).unwrap();
    }
}
