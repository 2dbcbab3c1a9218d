//! The client side of the kernel's sockets.
//!
//! Messages are sent typed (`jupyter_protocol`) and read raw: content is kept as JSON instead of
//! being parsed into `jupyter_protocol`'s types, which drop MIME bundles they cannot type (a
//! malformed `application/vnd.dataresource+json` fails the whole message) and lose MIME order.
//! Each receiving socket is drained by its own task into a channel, so waiting on several
//! sockets at once is cancel-safe.

use std::net::SocketAddr;
use std::time::Duration;

use jupyter_protocol::{
    ConnectionInfo, ExecuteRequest, InterruptRequest, JupyterMessage, KernelInfoRequest,
    ShutdownRequest,
};
use jupyter_zmq_client::{ClientControlConnection, DealerSendConnection, RawMessage};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use zeromq::SocketRecv;

use super::KernelError;

/// How often to look for the kernel's ports while it starts.
const PORT_POLL: Duration = Duration::from_millis(10);
/// How long one kernel_info round may take before the request is sent again (the iopub
/// subscription may not have been active for the first one).
const HANDSHAKE_ROUND: Duration = Duration::from_millis(250);

/// A message from the kernel: the header fields we need and the content as JSON.
#[derive(Clone, Debug)]
pub struct Message {
    pub msg_type: String,
    pub parent_id: Option<String>,
    pub content: Value,
    /// Binary buffers after the four JSON frames (widgets send arrays this way).
    pub buffers: Vec<Vec<u8>>,
    /// Size of the content frame as received, for output limits.
    pub size: usize,
    /// The header's `date`, as the kernel wrote it (for `metadata.execution`).
    pub date: Option<String>,
}

/// Parse one JSON frame the way `jupyter_client` does (`bytes.decode("utf8", "replace")`, then
/// `json.loads`): the kernel sends lone surrogates raw (`"bad \udcff"`, non-UTF-8 file names are
/// encoded with `surrogateescape`), and such a message must reach the notebook with replacement
/// characters, not vanish.
fn parse_frame(bytes: &[u8]) -> Option<Value> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text).ok(),
        Err(_) => serde_json::from_str(&String::from_utf8_lossy(bytes)).ok(),
    }
}

impl Message {
    fn from_raw(raw: &RawMessage) -> Option<Self> {
        let header = parse_frame(raw.jparts.first()?)?;
        let parent = raw
            .jparts
            .get(1)
            .and_then(|p| parse_frame(p))
            .unwrap_or(Value::Null);
        let content_frame = raw.jparts.get(3)?;
        let content = parse_frame(content_frame)?;
        Some(Self {
            msg_type: header.get("msg_type")?.as_str()?.to_string(),
            parent_id: parent
                .get("msg_id")
                .and_then(Value::as_str)
                .map(String::from),
            content,
            buffers: raw.jparts.iter().skip(4).map(|b| b.to_vec()).collect(),
            size: content_frame.len(),
            date: header.get("date").and_then(Value::as_str).map(String::from),
        })
    }

    pub fn is_child_of(&self, msg_id: &str) -> bool {
        self.parent_id.as_deref() == Some(msg_id)
    }

    /// `status` message with `execution_state: idle`.
    pub fn is_idle(&self) -> bool {
        self.msg_type == "status"
            && self.content.get("execution_state").and_then(Value::as_str) == Some("idle")
    }
}

/// Connected client sockets.
pub struct KernelClient {
    pub info: ConnectionInfo,
    shell: DealerSendConnection,
    control: ClientControlConnection,
    pub shell_rx: mpsc::UnboundedReceiver<Message>,
    pub iopub_rx: mpsc::UnboundedReceiver<Message>,
    pumps: Vec<JoinHandle<()>>,
}

impl Drop for KernelClient {
    fn drop(&mut self) {
        self.pumps.iter().for_each(JoinHandle::abort);
    }
}

/// Read one socket into a channel until the receiver goes away.
fn pump<S>(
    mut connection: jupyter_zmq_client::Connection<S>,
    tx: mpsc::UnboundedSender<Message>,
) -> JoinHandle<()>
where
    S: SocketRecv + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match connection.socket.recv().await {
                Ok(frames) => {
                    // A message that fails its signature or does not parse is dropped, never trusted.
                    let Ok(raw) = RawMessage::from_multipart(frames, &connection.mac) else {
                        continue;
                    };
                    if let Some(message) = Message::from_raw(&raw)
                        && tx.send(message).is_err()
                    {
                        return;
                    }
                }
                // The peer went away (the kernel died or restarts its socket); the session notices
                // death through the process and the heartbeat, so just avoid spinning.
                Err(_) => {
                    if tx.is_closed() {
                        return;
                    }
                    sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// Poll until something listens on `port`: the kernel binds its sockets as it starts, and a
/// zeromq connect to a closed port backs off exponentially (up to seconds) instead of retrying
/// promptly.
async fn wait_for_port(ip: &str, port: u16, deadline: Instant) -> bool {
    let Ok(addr) = format!("{ip}:{port}").parse::<SocketAddr>() else {
        return false;
    };
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return true;
        }
        sleep(PORT_POLL).await;
    }
    false
}

/// Retry a connect: right after the kernel binds, the first connection is sometimes reset
/// (seen in ~30 % of starts with ipykernel 7).
async fn retry<T, F, Fut>(deadline: Instant, mut connect: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = jupyter_zmq_client::Result<T>>,
{
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok(Ok(connection)) = timeout(left.min(Duration::from_secs(2)), connect()).await {
            return Some(connection);
        }
        sleep(Duration::from_millis(20)).await;
    }
    None
}

impl KernelClient {
    /// Connect iopub, shell and control. Returns `None` if the kernel did not come up by `deadline`.
    pub async fn connect(
        info: &ConnectionInfo,
        deadline: Instant,
    ) -> Result<Option<Self>, KernelError> {
        for port in [info.shell_port, info.control_port, info.iopub_port] {
            if !wait_for_port(&info.ip, port, deadline).await {
                return Ok(None);
            }
        }
        let session = uuid::Uuid::new_v4().to_string();
        let identity = jupyter_zmq_client::peer_identity_for_session(&session)?;
        let Some(iopub) = retry(deadline, || {
            jupyter_zmq_client::create_client_iopub_connection(info, "", &session)
        })
        .await
        else {
            return Ok(None);
        };
        let Some(shell) = retry(deadline, || {
            jupyter_zmq_client::create_client_shell_connection_with_identity(
                info,
                &session,
                identity.clone(),
            )
        })
        .await
        else {
            return Ok(None);
        };
        let Some(control) = retry(deadline, || {
            jupyter_zmq_client::create_client_control_connection(info, &session)
        })
        .await
        else {
            return Ok(None);
        };
        let (shell_send, shell_recv) = shell.split();
        let (iopub_tx, iopub_rx) = mpsc::unbounded_channel();
        let (shell_tx, shell_rx) = mpsc::unbounded_channel();
        let pumps = vec![pump(iopub, iopub_tx), pump(shell_recv, shell_tx)];
        Ok(Some(Self {
            info: info.clone(),
            shell: shell_send,
            control,
            shell_rx,
            iopub_rx,
            pumps,
        }))
    }

    /// Send on shell; returns the request's msg_id.
    pub async fn send_shell(&mut self, message: JupyterMessage) -> Result<String, KernelError> {
        let id = message.header.msg_id.clone();
        self.shell.send(message).await?;
        Ok(id)
    }

    /// Send an `execute_request` (no stdin: `input()` raises in the kernel instead of hanging).
    pub async fn execute(&mut self, code: &str) -> Result<String, KernelError> {
        let request = ExecuteRequest {
            code: code.to_string(),
            silent: false,
            store_history: true,
            user_expressions: None,
            allow_stdin: false,
            stop_on_error: true,
        };
        self.send_shell(request.into()).await
    }

    /// Wait until the kernel answers `kernel_info` on shell *and* its iopub messages reach us.
    ///
    /// A SUB socket misses whatever is published before its subscription arrives (the slow
    /// joiner problem), so seeing our request's status on iopub is what proves we will see the
    /// outputs of the cells. Returns the `kernel_info_reply` content.
    pub async fn handshake(&mut self, deadline: Instant) -> Result<Option<Value>, KernelError> {
        let mut reply: Option<Value> = None;
        let mut seen_iopub = false;
        let mut pending: Vec<String> = Vec::new();
        while Instant::now() < deadline {
            pending.push(self.send_shell(KernelInfoRequest {}.into()).await?);
            // Until shell answers at all the kernel is still starting: no point in re-sending.
            // Once it has, give iopub one short round before asking again.
            let mut round_end = reply.as_ref().map(|_| Instant::now() + HANDSHAKE_ROUND);
            loop {
                if reply.is_some() && seen_iopub {
                    return Ok(reply);
                }
                tokio::select! {
                    Some(m) = self.shell_rx.recv() => {
                        if m.msg_type == "kernel_info_reply" && pending.iter().any(|id| m.is_child_of(id)) {
                            reply = Some(m.content);
                            round_end.get_or_insert_with(|| Instant::now() + HANDSHAKE_ROUND);
                        }
                    }
                    Some(m) = self.iopub_rx.recv() => {
                        // Leftover status messages of these requests are harmless later: every
                        // wait filters on its own request's msg_id.
                        seen_iopub |= pending.iter().any(|id| m.is_child_of(id));
                    }
                    () = sleep_until(round_end.unwrap_or(deadline).min(deadline)) => break,
                }
            }
        }
        Ok(None)
    }

    /// Send on control and wait (bounded) for the reply.
    async fn control_request(
        &mut self,
        message: JupyterMessage,
        wait: Duration,
    ) -> Result<Option<Value>, KernelError> {
        let id = message.header.msg_id.clone();
        self.control.send(message).await?;
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(frames) = timeout(left, self.control.socket.recv()).await else {
                return Ok(None);
            };
            let frames = frames.map_err(jupyter_zmq_client::RuntimeError::from)?;
            let Ok(raw) = RawMessage::from_multipart(frames, &self.control.mac) else {
                continue;
            };
            if let Some(m) = Message::from_raw(&raw)
                && m.is_child_of(&id)
            {
                return Ok(Some(m.content));
            }
        }
    }

    /// `interrupt_request` on control (for kernels with `interrupt_mode: message`).
    pub async fn interrupt(&mut self) -> Result<(), KernelError> {
        self.control_request(InterruptRequest {}.into(), Duration::from_secs(2))
            .await
            .map(drop)
    }

    /// Send `shutdown_request`; does not wait for the reply (the caller waits for the process
    /// to exit instead).
    ///
    /// An idle kernel is asked on shell: ipykernel 7 answers a shutdown on control, then races
    /// its own teardown (the control thread flushes stdout into the already-stopped iopub
    /// thread) and hangs for its 10 s flush timeout in about one exit in ten. On shell the
    /// request is handled by the main thread before teardown starts. A busy kernel is asked on
    /// control, the only channel it still reads.
    pub async fn request_shutdown(&mut self, idle: bool) -> Result<(), KernelError> {
        let request: JupyterMessage = ShutdownRequest { restart: false }.into();
        if idle {
            self.shell.send(request).await?;
        } else {
            self.control.send(request).await?;
        }
        Ok(())
    }
}
