//! Starting a kernel process from its kernelspec, and stopping it.

use std::collections::VecDeque;
use std::fs;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jupyter_protocol::ConnectionInfo;
use jupyter_protocol::connection_info::Transport;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::{Child, Command};

use super::KernelError;
use super::env::Environment;
use super::kernelspec::{InterruptMode, KernelSpec, is_bare_python};

/// How many lines of the kernel's own stdout/stderr to keep for error reports.
const OUTPUT_TAIL_LINES: usize = 40;
/// The most of one line kept for those reports, in bytes: a kernel that writes megabytes
/// without a newline must not grow our memory, and a report needs only the start of a line.
const OUTPUT_TAIL_LINE_BYTES: usize = 4096;

/// The connection file; removed when dropped, so no exit path leaves a key lying around.
#[derive(Debug)]
struct ConnectionFile(PathBuf);

impl Drop for ConnectionFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// What a kernel prints when a port chosen for it was taken before it bound it (ZMQError).
pub const ADDRESS_IN_USE: &str = "Address already in use";

/// A running kernel process.
#[derive(Debug)]
pub struct KernelProcess {
    child: Child,
    /// Process id, which is also its process-group id (the kernel runs in its own group).
    pid: Option<u32>,
    pub info: ConnectionInfo,
    pub interrupt_mode: InterruptMode,
    connection_file: ConnectionFile,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// The tasks copying stdout/stderr into `tail`: a process that has exited may still have
    /// its last lines (the start-up error) in the pipes, so readers of the tail after an exit
    /// wait for these first.
    tail_readers: Vec<tokio::task::JoinHandle<()>>,
    exit: Option<ExitStatus>,
    /// The group was killed after the kernel had exited: it is empty from then on, and its id
    /// must not be signalled again (it could be reused).
    group_killed: bool,
}

/// Where connection files go: `$JUPYTER_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/jupyter` (per-user,
/// mode 0700 by definition), else the temp dir.
pub fn runtime_dir(env: &Environment) -> PathBuf {
    if let Some(dir) = env.get("JUPYTER_RUNTIME_DIR") {
        return env.absolute(Path::new(dir));
    }
    if let Some(dir) = env.get("XDG_RUNTIME_DIR") {
        return PathBuf::from(dir).join("jupyter");
    }
    env.temp_dir()
}

/// The kernel's command line: `{connection_file}` and `{resource_dir}` substituted, and a bare
/// `python` replaced by `python` (the interpreter running gpushare), as `jupyter_client` does.
pub fn kernel_argv(
    spec: &KernelSpec,
    connection_file: &Path,
    python: Option<&Path>,
) -> Vec<String> {
    let mut argv: Vec<String> = spec
        .argv
        .iter()
        .map(|a| {
            a.replace("{connection_file}", &connection_file.to_string_lossy())
                .replace("{resource_dir}", &spec.dir.to_string_lossy())
        })
        .collect();
    if let Some(python) = python
        && is_bare_python(&argv[0])
    {
        argv[0] = python.to_string_lossy().into_owned();
    }
    if spec.is_ipykernel() {
        // As nbclient does: a throwaway history keeps parallel kernels from contending for
        // ~/.ipython's SQLite file and spares the kernel opening it.
        argv.push("--HistoryManager.hist_file=:memory:".into());
    }
    argv
}

impl KernelProcess {
    /// Write a private connection file and start the kernel.
    ///
    /// `extra_env` is added after the kernelspec's own `env` only for variables neither the
    /// spec nor `env` sets (used to give plain kernels gpushare's memory settings). `cwd` is the
    /// kernel's working directory (the notebook's folder, as in Jupyter), else ours.
    pub async fn launch(
        spec: &KernelSpec,
        env: &Environment,
        extra_env: &[(&str, &str)],
        cwd: Option<&Path>,
    ) -> Result<Self, KernelError> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // Hold the ports until the kernel has been spawned so nothing else takes them meanwhile.
        let (ports, listeners) = jupyter_zmq_client::peek_ports_with_listeners(ip, 5).await?;
        let info = ConnectionInfo {
            transport: Transport::TCP,
            ip: ip.to_string(),
            stdin_port: ports[0],
            control_port: ports[1],
            hb_port: ports[2],
            shell_port: ports[3],
            iopub_port: ports[4],
            signature_scheme: "hmac-sha256".into(),
            key: uuid::Uuid::new_v4().to_string(),
            kernel_name: Some(spec.name.clone()),
        };
        let dir = runtime_dir(env);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| KernelError::io(&dir, source))?;
        let path = dir.join(format!("gpushare-kernel-{}.json", uuid::Uuid::new_v4()));
        write_private(&path, &serde_json::to_vec(&info)?)
            .map_err(|source| KernelError::io(&path, source))?;
        let connection_file = ConnectionFile(path);

        let python = is_bare_python(&spec.argv[0])
            .then(|| env.python().ok())
            .flatten();
        let argv = kernel_argv(spec, &connection_file.0, python.as_deref());
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(env.vars())
            .envs(&spec.env)
            // As jupyter_client does: the kernel polls for this parent and exits if we die
            // (even by SIGKILL), so no orphaned kernel keeps a GPU busy.
            .env("JPY_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C in the terminal reaches only us, and we decide
            // whether to interrupt the kernel (as Jupyter's launcher does with start_new_session).
            .process_group(0)
            .kill_on_drop(true);
        for (key, value) in extra_env {
            if env.get(key).is_none() && !spec.env.contains_key(*key) {
                command.env(key, value);
            }
        }
        if let Some(cwd) = cwd {
            command.current_dir(env.absolute(cwd));
        }
        let mut child = command.spawn().map_err(|source| KernelError::Spawn {
            program: PathBuf::from(&argv[0]),
            source,
        })?;
        drop(listeners);

        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut tail_readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            tail_readers.push(tokio::spawn(keep_tail(out, Arc::clone(&tail))));
        }
        if let Some(err) = child.stderr.take() {
            tail_readers.push(tokio::spawn(keep_tail(err, Arc::clone(&tail))));
        }
        Ok(Self {
            pid: child.id(),
            child,
            info,
            interrupt_mode: spec.interrupt_mode,
            connection_file,
            tail,
            tail_readers,
            exit: None,
            group_killed: false,
        })
    }

    pub fn connection_file(&self) -> &Path {
        &self.connection_file.0
    }

    /// Wait for the process to exit (cancel-safe; returns at once once it has).
    pub async fn wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.wait().await.ok();
        }
        self.exit
    }

    /// Whether the process has exited, without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// The last lines the kernel printed to its own stdout/stderr (start-up errors live there).
    pub fn output_tail(&self) -> String {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// Resolves once the kernel's output says one of its ports was taken before it bound it. Such
    /// a kernel does not always exit: ipykernel 7 failing to bind its iopub socket printed the
    /// traceback and stayed up (its other sockets' threads alive), so waiting for the process to
    /// end waited out the whole start-up timeout (CI).
    pub fn lost_a_port(&self) -> impl std::future::Future<Output = ()> + use<> {
        let tail = Arc::clone(&self.tail);
        async move {
            loop {
                if tail.lock().is_ok_and(|t| t.iter().any(|line| line.contains(ADDRESS_IN_USE))) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The tail once the process has exited: `wait()` can return before the readers have
    /// copied the last lines out of the pipes (CI saw "exited during start-up" without the
    /// "No module named ipykernel" that explains it). A child the kernel left running can hold
    /// the pipes open, so the wait is bounded.
    pub async fn output_tail_after_exit(&mut self) -> String {
        let readers = std::mem::take(&mut self.tail_readers);
        let _ = tokio::time::timeout(Duration::from_secs(2), join_all_readers(readers)).await;
        self.output_tail()
    }

    /// Send a signal to the kernel's process group, falling back to the process itself.
    pub fn signal(&mut self, signal: libc::c_int) {
        if self.exited().is_some() {
            return;
        }
        let Some(pid) = self.pid.and_then(|p| libc::pid_t::try_from(p).ok()) else {
            return;
        };
        // SAFETY: kill(2) has no memory-safety preconditions; pid is a child we spawned and have
        // not reaped (exited() is None), so the id cannot have been reused.
        unsafe {
            if libc::kill(-pid, signal) != 0 {
                libc::kill(pid, signal);
            }
        }
    }

    /// SIGKILL whatever is left of the kernel's process group, even once the kernel itself has
    /// exited: a cell's `subprocess.Popen` children stay in the group and would otherwise
    /// outlive a kernel that died (`os._exit`) or was shut down.
    ///
    /// Linux never hands out a pid that is still in use as a process-group id, so while any
    /// member is alive `-pgid` can only name the kernel's group; once it is empty the call
    /// fails with ESRCH and does nothing.
    pub fn kill_group(&mut self) {
        let Some(pgid) = self.pid.and_then(|p| libc::pid_t::try_from(p).ok()) else {
            return;
        };
        if self.group_killed {
            return;
        }
        self.group_killed = self.exited().is_some();
        // SAFETY: kill(2) has no memory-safety preconditions; a negative id names a group only.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }

    /// SIGKILL the kernel's process group and reap it.
    pub async fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.wait()).await;
        self.kill_group();
    }
}

impl Drop for KernelProcess {
    fn drop(&mut self) {
        // kill_on_drop only reaches the kernel itself; take down anything it started as well.
        self.signal(libc::SIGKILL);
        self.kill_group();
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // 0600 from the start and create_new, so the key is never readable by others and a
    // pre-planted symlink cannot redirect the write.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

async fn join_all_readers(handles: Vec<tokio::task::JoinHandle<()>>) {
    for handle in handles {
        let _ = handle.await;
    }
}

/// Copy a kernel's stdout or stderr into `tail`, line by line, until the stream ends.
///
/// The stream is read as bytes and never left unread: native code writes whatever bytes it
/// likes (Latin-1 from a subprocess, a library's logging), and a reader that stopped at the
/// first line it could not decode left the pipe to fill, after which the kernel blocked in
/// `write` and the run stalled until its timeout. Lines are decoded lossily for display only.
async fn keep_tail(mut stream: impl AsyncRead + Unpin, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut chunk = vec![0_u8; 64 * 1024];
    let mut lines = TailLines::default();
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => lines.push_bytes(&chunk[..n], &tail),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    lines.finish(&tail);
}

/// Splits a byte stream into the tail's lines, keeping at most [`OUTPUT_TAIL_LINE_BYTES`] of each.
#[derive(Default)]
struct TailLines {
    line: Vec<u8>,
}

impl TailLines {
    fn push_bytes(&mut self, bytes: &[u8], tail: &Mutex<VecDeque<String>>) {
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let (body, ends_line) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = OUTPUT_TAIL_LINE_BYTES.saturating_sub(self.line.len());
            self.line.extend_from_slice(&body[..body.len().min(room)]);
            if ends_line {
                self.emit(tail);
            }
        }
    }

    /// The last line, when the stream ended without a newline.
    fn finish(&mut self, tail: &Mutex<VecDeque<String>>) {
        if !self.line.is_empty() {
            self.emit(tail);
        }
    }

    fn emit(&mut self, tail: &Mutex<VecDeque<String>>) {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let text = String::from_utf8_lossy(line).into_owned();
        self.line.clear();
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == OUTPUT_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn argv_substitutes_placeholders_and_keeps_history_in_memory() {
        let spec = KernelSpec {
            name: "k".into(),
            dir: PathBuf::from("/specs/k"),
            argv: [
                "/py",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                "--logo={resource_dir}/l.png",
            ]
            .map(String::from)
            .to_vec(),
            display_name: "K".into(),
            language: "python".into(),
            env: BTreeMap::new(),
            interrupt_mode: InterruptMode::Signal,
        };
        let argv = kernel_argv(&spec, Path::new("/run/c.json"), None);
        assert_eq!(argv[4], "/run/c.json");
        assert_eq!(argv[5], "--logo=/specs/k/l.png");
        assert_eq!(
            argv.last().map(String::as_str),
            Some("--HistoryManager.hist_file=:memory:")
        );
    }

    #[test]
    fn a_bare_python_becomes_ours() {
        assert!(
            is_bare_python("python") && is_bare_python("python3") && is_bare_python("python3.11")
        );
        assert!(
            !is_bare_python("/usr/bin/python3")
                && !is_bare_python("python3.")
                && !is_bare_python("pythonista")
        );
        let mut spec = KernelSpec::native_python(Path::new("python"));
        assert_eq!(
            kernel_argv(&spec, Path::new("/c"), Some(Path::new("/venv/bin/python")))[0],
            "/venv/bin/python"
        );
        spec.argv[0] = "/opt/py".into();
        assert_eq!(
            kernel_argv(&spec, Path::new("/c"), Some(Path::new("/venv/bin/python")))[0],
            "/opt/py"
        );
    }

    #[test]
    fn runtime_dir_prefers_jupyter_then_xdg() {
        let env = Environment::empty().with("XDG_RUNTIME_DIR", "/run/user/1");
        assert_eq!(runtime_dir(&env), PathBuf::from("/run/user/1/jupyter"));
        assert_eq!(
            runtime_dir(&env.with("JUPYTER_RUNTIME_DIR", "/rt")),
            PathBuf::from("/rt")
        );
        assert_eq!(runtime_dir(&Environment::empty()), PathBuf::from("/tmp"));
    }

    #[test]
    fn the_tail_keeps_lines_past_bytes_that_are_not_utf8_and_bounds_each_line() {
        let tail = Mutex::new(VecDeque::new());
        let mut lines = TailLines::default();
        lines.push_bytes(b"caf\xe9 \xff\nsplit ", &tail);
        lines.push_bytes(b"line\r\n", &tail);
        lines.push_bytes(&vec![b'a'; 3 * OUTPUT_TAIL_LINE_BYTES], &tail);
        lines.push_bytes(b"\nlast", &tail);
        lines.finish(&tail);
        let tail: Vec<String> = tail.into_inner().unwrap().into();
        assert_eq!(tail[0], "caf\u{fffd} \u{fffd}");
        assert_eq!(tail[1], "split line");
        assert_eq!(tail[2].len(), OUTPUT_TAIL_LINE_BYTES);
        assert_eq!(tail[3], "last");
    }

    #[test]
    fn connection_file_is_private() {
        let path =
            std::env::temp_dir().join(format!("gpushare-conn-{}.json", uuid::Uuid::new_v4()));
        write_private(&path, b"{}").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(write_private(&path, b"{}").is_err(), "never overwrites");
        drop(ConnectionFile(path.clone()));
        assert!(!path.exists());
    }
}
