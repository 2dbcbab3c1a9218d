//! A started kernel: run code on it with a timeout, notice when it dies, interrupt it, shut it
//! down.

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout};

use super::KernelError;
use super::client::{KernelClient, Message};
use super::env::Environment;
use super::kernelspec::{InterruptMode, KernelSpec};
use super::launch::KernelProcess;
use super::timing::{ExecTiming, nbclient_timestamp};

/// After an interrupt (timeout, Ctrl-C), how long to wait for the cell to wind down so its
/// traceback is recorded.
const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// After the kernel reports idle, how long to wait for the `execute_reply` on shell.
const REPLY_GRACE: Duration = Duration::from_secs(5);
/// How long a kernel gets to exit after `shutdown_request` before it is killed
/// (`jupyter_client`'s `shutdown_wait_time` is 5 s as well).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Heartbeat: one ping this often, each allowed this long; this many misses in a row mean the
/// kernel is gone even though its process still exists.
const HB_INTERVAL: Duration = Duration::from_secs(3);
const HB_TIMEOUT: Duration = Duration::from_secs(5);
const HB_MISSES: u32 = 3;

/// Ctrl-C, SIGTERM, SIGHUP or SIGQUIT, as a flag that turns true once (see [`ctrl_c_watch`]).
pub type Cancel = watch::Receiver<bool>;

/// The signal that cancelled this process's run (0: none yet). Signals are process-wide, so
/// this is too; it only picks the exit status and the wording of the report.
static CANCELLED_BY: AtomicI32 = AtomicI32::new(0);

/// A [`Cancel`] that turns true on the first SIGINT (Ctrl-C), SIGTERM (`kill`, a CI job's
/// timeout, a container stop), SIGHUP (the terminal or SSH session closed) or SIGQUIT (Ctrl-\\)
/// to this process. All are handled the same way: the kernel is interrupted and shut down, its
/// connection file removed, and what ran is written. The default action of SIGHUP and SIGQUIT
/// would kill us on the spot and leave the connection file (with its key) behind and the
/// notebook unwritten.
pub fn ctrl_c_watch() -> Cancel {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hangup = signal(SignalKind::hangup()).ok();
        let mut quit = signal(SignalKind::quit()).ok();
        let signal = tokio::select! {
            r = tokio::signal::ctrl_c() => if r.is_ok() { libc::SIGINT } else { return },
            () = next_signal(&mut term) => libc::SIGTERM,
            () = next_signal(&mut hangup) => libc::SIGHUP,
            () = next_signal(&mut quit) => libc::SIGQUIT,
        };
        CANCELLED_BY.store(signal, Ordering::SeqCst);
        let _ = tx.send(true);
        // Keep the sender alive so receivers see `true` rather than a closed channel.
        std::future::pending::<()>().await;
    });
    rx
}

/// Resolves when `stream` delivers its signal; never when it could not be set up.
async fn next_signal(stream: &mut Option<tokio::signal::unix::Signal>) {
    match stream.as_mut() {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// The exit status after a cancelled run: 128 + the signal, as shells report it (130 for
/// Ctrl-C, 143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT).
pub fn cancelled_exit_code() -> i32 {
    match CANCELLED_BY.load(Ordering::SeqCst) {
        0 => 128 + libc::SIGINT,
        signal => 128 + signal,
    }
}

/// What cancelled the run, for reports: "Ctrl-C", "SIGTERM", "SIGHUP" or "SIGQUIT".
pub fn cancelled_by() -> &'static str {
    match CANCELLED_BY.load(Ordering::SeqCst) {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        _ => "Ctrl-C",
    }
}

/// Resolves once `cancel` is true; never without one.
async fn cancelled(cancel: &mut Option<Cancel>) {
    if let Some(rx) = cancel
        && rx.wait_for(|&v| v).await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await;
}

/// Why code did not finish normally.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// It raised (`execute_reply` status `error`). The traceback keeps the kernel's ANSI colours.
    Error {
        ename: String,
        evalue: String,
        traceback: Vec<String>,
    },
    /// It ran past the timeout and was interrupted.
    Timeout(Duration),
    /// The kernel process exited, or stopped answering its heartbeat.
    KernelDied { reason: String, output: String },
    /// Ctrl-C, SIGTERM, SIGHUP or SIGQUIT: it was interrupted on the user's request.
    Interrupted,
    /// The kernel went idle (or its iopub closed) without an `execute_reply`: it may have run
    /// the code or not, so the cell cannot count as a success.
    NoReply,
    /// The kernel sent an output that nbformat rejects (nbclient raises
    /// `NotebookValidationError`); it was left out of the notebook.
    InvalidOutput(String),
}

/// The result of one `execute_request`.
#[derive(Clone, Debug, Default)]
pub struct ExecOutcome {
    pub execution_count: Option<i64>,
    pub failure: Option<Failure>,
    /// When the kernel went busy, echoed the code, replied and went idle.
    pub timing: ExecTiming,
    /// The `execute_reply`'s status (`ok`, `error`, `aborted`), when one came: after an
    /// interrupt it tells whether the code caught it and finished (a sweep that returns the
    /// points it measured) or stopped with a traceback.
    pub reply_status: Option<String>,
}

/// How to start a kernel.
#[derive(Clone, Debug)]
pub struct StartOptions<'a> {
    pub startup_timeout: Duration,
    /// The kernel's working directory.
    pub cwd: Option<&'a Path>,
    /// Variables given to the kernel unless the environment or kernelspec sets them.
    pub extra_env: &'a [(&'a str, &'a str)],
}

impl Default for StartOptions<'_> {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(60),
            cwd: None,
            extra_env: &[],
        }
    }
}

/// A running kernel with connected sockets.
pub struct Kernel {
    process: KernelProcess,
    client: KernelClient,
    heartbeat: JoinHandle<()>,
    hb_dead: watch::Receiver<bool>,
    /// Whether the last execution ended with the kernel idle (it may still be busy after an
    /// interrupt that did not take).
    idle: bool,
    /// `kernel_info_reply` content (its `language_info` goes into notebook metadata).
    pub kernel_info: Value,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(9)) => "killed by signal 9 (SIGKILL)".into(),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => s.to_string(),
        },
        None => "exit status unknown".into(),
    }
}

/// How often a kernel that lost one of its ports before binding it is started again.
const PORT_RACE_RETRIES: usize = 3;

/// Whether a kernel died at start-up because a port chosen for it was taken before it bound it:
/// the ports are held until the kernel is spawned, and another process can take one in the second
/// or two Python needs to reach its bind (seen under load in CI: "Address already in use").
fn lost_a_port(error: &KernelError) -> bool {
    matches!(error, KernelError::DiedAtStartup { output, .. } if output.contains(super::launch::ADDRESS_IN_USE))
}

impl Kernel {
    /// Launch `spec` and wait until it is ready to execute; a kernel that lost a port to another
    /// process before binding it is started again on new ports (as often as [`PORT_RACE_RETRIES`]).
    pub async fn start(
        spec: &KernelSpec,
        env: &Environment,
        options: &StartOptions<'_>,
        cancel: &mut Option<Cancel>,
    ) -> Result<Self, KernelError> {
        let mut attempt = 0;
        loop {
            match Self::start_once(spec, env, options, cancel).await {
                Err(e) if lost_a_port(&e) && attempt < PORT_RACE_RETRIES => attempt += 1,
                other => return other,
            }
        }
    }

    async fn start_once(
        spec: &KernelSpec,
        env: &Environment,
        options: &StartOptions<'_>,
        cancel: &mut Option<Cancel>,
    ) -> Result<Self, KernelError> {
        let mut process = KernelProcess::launch(spec, env, options.extra_env, options.cwd).await?;
        let deadline = Instant::now() + options.startup_timeout;
        let info = process.info.clone();
        let timed_out = |process: &KernelProcess| KernelError::StartupTimeout {
            seconds: options.startup_timeout.as_secs(),
            output: process.output_tail(),
        };
        let lost_port = process.lost_a_port();
        let connected = tokio::select! {
            c = KernelClient::connect(&info, deadline) => c?,
            status = process.wait() => return Err(KernelError::DiedAtStartup {
                status: describe_exit(status),
                output: process.output_tail_after_exit().await,
            }),
            // A kernel that lost a port may stay up without it: stopped here, and started again.
            () = lost_port => {
                process.kill().await;
                return Err(KernelError::DiedAtStartup {
                    status: "stopped: a port chosen for it was taken before it bound it".into(),
                    output: process.output_tail(),
                });
            }
            () = cancelled(cancel) => return Err(KernelError::Interrupted),
        };
        let Some(mut client) = connected else {
            return Err(timed_out(&process));
        };
        let kernel_info = tokio::select! {
            r = client.handshake(deadline) => r?,
            status = process.wait() => return Err(KernelError::DiedAtStartup {
                status: describe_exit(status),
                output: process.output_tail_after_exit().await,
            }),
            () = cancelled(cancel) => return Err(KernelError::Interrupted),
        };
        let Some(kernel_info) = kernel_info else {
            return Err(timed_out(&process));
        };
        let (hb_tx, hb_dead) = watch::channel(false);
        let heartbeat = tokio::spawn(heartbeat(info, hb_tx));
        Ok(Self {
            process,
            client,
            heartbeat,
            hb_dead,
            idle: true,
            kernel_info,
        })
    }

    /// Interrupt the running code the way the kernelspec asks.
    pub async fn interrupt(&mut self) {
        match self.process.interrupt_mode {
            InterruptMode::Message => {
                let _ = self.client.interrupt().await;
            }
            InterruptMode::Signal => self.process.signal(libc::SIGINT),
        }
    }

    /// Run `code`; every iopub message it causes (other than status) goes to `on_output`.
    ///
    /// Returns when the kernel is idle and has replied, or when the run fails: past `timeout`
    /// (the kernel is interrupted), on Ctrl-C (`cancel`; interrupted too), or when the kernel
    /// dies. After an interrupt, output is still recorded for a short grace period so the
    /// traceback of where it stopped ends up in the notebook.
    pub async fn execute(
        &mut self,
        code: &str,
        timeout_after: Option<Duration>,
        cancel: &mut Option<Cancel>,
        mut on_output: impl FnMut(&Message),
    ) -> Result<ExecOutcome, KernelError> {
        let msg_id = self.client.execute(code).await?;
        self.idle = false;
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let deadline = timeout_after.map_or(far, |t| Instant::now() + t);
        let mut grace: Option<Instant> = None;
        let mut idle_at: Option<Instant> = None;
        let mut reply: Option<Value> = None;
        let mut outcome = ExecOutcome::default();
        loop {
            if idle_at.is_some() && reply.is_some() {
                break;
            }
            // Timers and the kernel's death come first: with iopub listed first, a kernel that
            // floods output keeps that branch ready forever and the timeout never fires.
            tokio::select! {
                biased;
                status = self.process.wait() => {
                    // Output the kernel sent before it died may already be queued: keep it.
                    while let Ok(m) = self.client.iopub_rx.try_recv() {
                        if m.is_child_of(&msg_id) && m.msg_type != "status" {
                            on_output(&m);
                        }
                    }
                    outcome.failure = Some(Failure::KernelDied {
                        reason: format!("the kernel process exited ({})", describe_exit(status)),
                        output: self.process.output_tail_after_exit().await,
                    });
                    return Ok(outcome);
                }
                () = flatlined(&mut self.hb_dead) => {
                    self.process.kill().await;
                    outcome.failure = Some(Failure::KernelDied {
                        reason: "the kernel stopped answering its heartbeat".into(),
                        output: self.process.output_tail_after_exit().await,
                    });
                    return Ok(outcome);
                }
                () = sleep_until(deadline), if grace.is_none() => {
                    outcome.failure = Some(Failure::Timeout(timeout_after.unwrap_or_default()));
                    self.interrupt().await;
                    grace = Some(Instant::now() + INTERRUPT_GRACE);
                }
                () = cancelled(cancel), if grace.is_none() => {
                    outcome.failure = Some(Failure::Interrupted);
                    self.interrupt().await;
                    grace = Some(Instant::now() + INTERRUPT_GRACE);
                }
                () = sleep_until(grace.unwrap_or(far)), if grace.is_some() => break,
                () = sleep_until(idle_at.map_or(far, |t| t + REPLY_GRACE)), if idle_at.is_some() => break,
                Some(m) = self.client.shell_rx.recv(), if reply.is_none() => {
                    if m.msg_type == "execute_reply" && m.is_child_of(&msg_id) {
                        outcome.timing.reply = Some(nbclient_timestamp(m.date.as_deref()));
                        reply = Some(m.content);
                    }
                }
                m = self.client.iopub_rx.recv() => {
                    let Some(m) = m else { break };
                    if m.is_child_of(&msg_id) {
                        let at = || Some(nbclient_timestamp(m.date.as_deref()));
                        if m.is_idle() {
                            idle_at = Some(Instant::now());
                            outcome.timing.idle = at();
                        } else if m.msg_type == "status" {
                            if m.content.get("execution_state").and_then(Value::as_str) == Some("busy") {
                                outcome.timing.busy = at();
                            }
                        } else {
                            if m.msg_type == "execute_input" {
                                outcome.execution_count = m.content.get("execution_count").and_then(Value::as_i64);
                                outcome.timing.execute_input = at();
                            }
                            on_output(&m);
                        }
                    }
                }
            }
        }
        self.idle = idle_at.is_some();
        if reply.is_none() && outcome.failure.is_none() {
            // Without an execute_reply nothing says the code succeeded (nbclient waits for it
            // too, and fails the cell when it never comes).
            outcome.failure = Some(Failure::NoReply);
        }
        if let Some(reply) = reply {
            if let Some(n) = reply.get("execution_count").and_then(Value::as_i64) {
                outcome.execution_count = Some(n);
            }
            let status = reply.get("status").and_then(Value::as_str).unwrap_or("ok");
            outcome.reply_status = Some(status.to_string());
            if outcome.failure.is_none() && status != "ok" {
                let text = |key: &str, default: &str| {
                    reply
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or(default)
                        .to_string()
                };
                outcome.failure = Some(Failure::Error {
                    ename: text(
                        "ename",
                        if status == "aborted" {
                            "Aborted"
                        } else {
                            "Error"
                        },
                    ),
                    evalue: text("evalue", ""),
                    traceback: reply
                        .get("traceback")
                        .and_then(Value::as_array)
                        .map(|t| {
                            t.iter()
                                .filter_map(Value::as_str)
                                .map(String::from)
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
        }
        Ok(outcome)
    }

    /// Ask the kernel to shut down; kill its process group if it has not exited after a grace
    /// period. The connection file goes with the process.
    pub async fn shutdown(mut self) {
        if self.process.exited().is_none() {
            let asked = timeout(
                Duration::from_secs(1),
                self.client.request_shutdown(self.idle),
            )
            .await
            .is_ok_and(|r| r.is_ok());
            let grace = if asked {
                SHUTDOWN_GRACE
            } else {
                Duration::ZERO
            };
            if timeout(grace, self.process.wait()).await.is_err() {
                self.process.kill().await;
            }
        }
        // The kernel is gone (it exited, died or was killed); what it started must not outlive it.
        self.process.kill_group();
    }

    /// Send a `comm_msg` to the kernel on shell, as a front end's widget manager does.
    pub async fn send_comm(
        &mut self,
        comm_id: String,
        data: serde_json::Map<String, Value>,
    ) -> Result<(), KernelError> {
        let message = jupyter_protocol::CommMsg {
            comm_id: jupyter_protocol::CommId(comm_id),
            data,
        };
        self.client.send_shell(message.into()).await.map(drop)
    }

    /// The kernel's own last lines of stdout/stderr.
    pub fn output_tail(&self) -> String {
        self.process.output_tail()
    }
}

/// Resolves once the heartbeat task has declared the kernel dead (never if the task is gone).
async fn flatlined(dead: &mut watch::Receiver<bool>) {
    if dead.wait_for(|&d| d).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn heartbeat(info: jupyter_protocol::ConnectionInfo, dead: watch::Sender<bool>) {
    let mut connection = None;
    let mut misses = 0;
    loop {
        sleep(HB_INTERVAL).await;
        if connection.is_none() {
            connection = timeout(
                HB_TIMEOUT,
                jupyter_zmq_client::create_client_heartbeat_connection(&info),
            )
            .await
            .ok()
            .and_then(Result::ok);
        }
        let answered = match connection.as_mut() {
            Some(c) => timeout(HB_TIMEOUT, c.single_heartbeat())
                .await
                .is_ok_and(|r| r.is_ok()),
            None => false,
        };
        if answered {
            misses = 0;
        } else {
            // A REQ socket that missed its reply cannot send again: start a fresh one.
            connection = None;
            misses += 1;
            if misses >= HB_MISSES {
                let _ = dead.send(true);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_that_lost_a_port_is_told_from_one_that_failed() {
        let died = |output: &str| KernelError::DiedAtStartup { status: "exit code 1".into(), output: output.into() };
        assert!(lost_a_port(&died("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:35833')")));
        assert!(!lost_a_port(&died("ModuleNotFoundError: No module named 'ipykernel'")));
        assert!(!lost_a_port(&KernelError::StartupTimeout { seconds: 60, output: "Address already in use".into() }));
    }
}
