//! Forwarding over SSH: `ssh -L` (`direct-tcpip` channels dialled from inside the workspace),
//! `ssh -R` (listeners inside the workspace whose connections go back as `forwarded-tcpip`
//! channels) and `ssh -A` (a per-session unix socket whose connections go back as
//! `auth-agent@openssh.com` channels, exported as `SSH_AUTH_SOCK`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use russh::server::{ChannelOpenHandle, Handle, Msg};
use russh::{Channel, ChannelOpenFailure};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinHandle;

use crate::stats::{SessionKind, Stats};
use crate::streams::{copy, ports};

const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// `ssh -L`: connects to `host:port` from inside the workspace and joins the channel to it.
/// A connection to a JetBrains IDE backend counts as a JetBrains session while it lasts: the
/// Gateway client keeps exactly one such tunnel open, and opens SSH sessions by the hundred.
pub(super) async fn direct(
    channel: Channel<Msg>,
    reply: ChannelOpenHandle,
    host: String,
    port: u32,
    stats: Arc<Stats>,
) {
    let Ok(port) = u16::try_from(port) else {
        return reply.reject(ChannelOpenFailure::ConnectFailed).await;
    };
    let target =
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(target)) => target,
            Ok(Err(error)) => {
                tracing::debug!(%host, port, %error, "ssh -L: cannot connect");
                return reply.reject(ChannelOpenFailure::ConnectFailed).await;
            }
            Err(_) => {
                tracing::debug!(%host, port, "ssh -L: connecting timed out");
                return reply.reject(ChannelOpenFailure::ConnectFailed).await;
            }
        };
    let _ = target.set_nodelay(true);
    reply.accept().await;
    let jetbrains = match target.peer_addr() {
        Ok(peer) if peer.ip().is_loopback() => is_jetbrains(port).await,
        _ => false,
    };
    let _session = jetbrains.then(|| stats.session(SessionKind::Jetbrains));
    bridge(channel.into_stream(), target).await;
}

/// Whether the process listening on `port` is a JetBrains IDE backend (its command line
/// names the vendor, as Coder checks).
async fn is_jetbrains(port: u16) -> bool {
    tokio::task::spawn_blocking(move || {
        ports::listener_cmdlines(std::path::Path::new("/proc"), port)
            .iter()
            .any(|cmdline| cmdline.contains("idea.vendor.name=JetBrains"))
    })
    .await
    .unwrap_or(false)
}

/// Copies both ways until both sides are done; half-closes pass through.
pub(super) async fn bridge(
    a: impl AsyncRead + AsyncWrite + Send,
    b: impl AsyncRead + AsyncWrite + Send,
) {
    let (a_read, a_write) = tokio::io::split(a);
    let (b_read, b_write) = tokio::io::split(b);
    if let Err(error) =
        tokio::try_join!(copy(a_read, b_write, |_| {}), copy(b_read, a_write, |_| {}))
    {
        tracing::debug!(%error, "a forwarded SSH connection ended with an error");
    }
}

/// An `ssh -R` listener inside the workspace.
pub(super) struct Listener {
    /// The address as the client named it: it matches forwarded connections by it.
    address: String,
    listener: TcpListener,
}

/// Listens on `address:port` in the workspace (port 0: any free port). An empty address or
/// `*` means every interface, `localhost` the IPv4 loopback, as OpenSSH's clients expect.
pub(super) async fn listen(address: &str, port: u16) -> io::Result<Listener> {
    let host = match address {
        "" | "*" => "0.0.0.0",
        "localhost" => "127.0.0.1",
        other => other,
    };
    let listener = TcpListener::bind((host, port)).await?;
    Ok(Listener {
        address: address.to_string(),
        listener,
    })
}

impl Listener {
    pub(super) fn port(&self) -> u16 {
        self.listener.local_addr().map_or(0, |a| a.port())
    }

    /// Accepts until the forward is cancelled (the task aborted) or the connection is gone,
    /// sending each connection to the client as a `forwarded-tcpip` channel.
    pub(super) async fn serve(self, handle: Handle) {
        let port = u32::from(self.port());
        loop {
            let (socket, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::debug!(%error, "ssh -R: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let handle = handle.clone();
            let address = self.address.clone();
            tokio::spawn(async move {
                let channel = handle
                    .channel_open_forwarded_tcpip(
                        address,
                        port,
                        peer.ip().to_string(),
                        u32::from(peer.port()),
                    )
                    .await;
                match channel {
                    Ok(channel) => bridge(channel.into_stream(), socket).await,
                    Err(error) => {
                        tracing::debug!(%error, "ssh -R: the client refused a connection")
                    }
                }
            });
        }
    }
}

/// The longest unix socket path the kernel takes is 107 bytes (`sun_path`); a workspace's
/// `TMPDIR` can be deep inside its home (the `local-process` template puts it there), which
/// would leave `-A` silently without a socket.
const MAX_SOCKET_PATH: usize = 107;

/// Where the agent sockets go: the temporary directory when a socket fits under it, else
/// `/tmp`.
fn socket_parent(temp: &Path) -> PathBuf {
    // "/coder-ssh-agent-XXXXXX/agent.sock"
    let suffix = 1 + "coder-ssh-agent-".len() + 6 + "/agent.sock".len();
    if temp.as_os_str().len() + suffix <= MAX_SOCKET_PATH {
        temp.to_path_buf()
    } else {
        PathBuf::from("/tmp")
    }
}

/// The `SSH_AUTH_SOCK` of one session: a unix socket in a private directory, removed with it.
pub(super) struct AgentSocket {
    dir: tempfile::TempDir,
    task: JoinHandle<()>,
}

impl AgentSocket {
    pub(super) fn create(handle: Handle) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("coder-ssh-agent-")
            .tempdir_in(socket_parent(&std::env::temp_dir()))?;
        let listener = UnixListener::bind(dir.path().join("agent.sock"))?;
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let handle = handle.clone();
                tokio::spawn(async move {
                    match handle.channel_open_agent().await {
                        Ok(channel) => bridge(channel.into_stream(), socket).await,
                        Err(error) => {
                            tracing::debug!(%error, "ssh -A: the client refused an agent channel");
                        }
                    }
                });
            }
        });
        Ok(Self { dir, task })
    }

    pub(super) fn path(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }
}

impl Drop for AgentSocket {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listeners_bind_what_openssh_clients_name() -> anyhow::Result<()> {
        let local = listen("localhost", 0).await?;
        assert_ne!(local.port(), 0);
        assert_eq!(local.listener.local_addr()?.ip().to_string(), "127.0.0.1");
        let all = listen("", 0).await?;
        assert!(all.listener.local_addr()?.ip().is_unspecified());
        Ok(())
    }

    #[test]
    fn agent_sockets_leave_a_deep_temporary_directory_for_tmp() {
        let shallow = Path::new("/home/dev/.cache/tmp");
        assert_eq!(socket_parent(shallow), shallow);
        let deep = PathBuf::from(format!("/tmp/{}/{}/tmp", "w".repeat(40), "x".repeat(36)));
        assert_eq!(socket_parent(&deep), Path::new("/tmp"));
    }
}
