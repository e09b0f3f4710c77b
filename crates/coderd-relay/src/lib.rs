//! The relay: the one path from a client into a workspace. A client asks for one stream (SSH,
//! TCP or UDP to a port, a reconnecting PTY, a ping, the listening ports) over a WebSocket; the
//! relay authorises it on the agent's workspace, opens a stream on the agent's yamux
//! connection, waits for the agent's [`StreamOpen`] answer, and only then accepts the upgrade
//! and splices the two with back-pressure end to end.
//!
//! [`open`] is the hop: "a stream to agent X, or why not". Today it only knows the agents
//! connected to this process; with several replicas it will also open the stream through the
//! replica that holds the agent (see docs/architecture.md, Relay), and everything above it
//! stays as it is. [`dial`] is HTTP over it, for coderd's own clients of servers inside a
//! workspace, and [`apps`] is the workspace-app reverse proxy on top of it.

pub mod apps;
pub mod dial;
pub mod routes;
mod splice;
mod terminal;

use std::time::Duration;

use codersdk::agentsdk::{StreamHeader, StreamOpen, read_frame, write_frame};
use tokio::sync::watch;
use tokio_yamux::StreamHandle;
use uuid::Uuid;

pub use routes::routes;
pub use terminal::{OpenPty, PtyError, PtyRequest, open_pty};

use coderd_core::agents::Registry;

/// How long the agent may take to answer a stream (it dials the target first: a TCP port, its
/// SSH server, a new PTY's shell).
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a stream to an agent could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The agent has no connection to this coderd.
    #[error("the agent is not connected")]
    NotConnected,
    /// The agent answered, and said no.
    #[error("{0}")]
    Refused(String),
    /// The connection is there but the agent did not answer in time or went away.
    #[error("the agent did not answer: {0}")]
    Unreachable(String),
}

/// Opens a stream of kind `header` to `agent` and waits for the agent's answer, so that a
/// stream that cannot open fails here, before the client's upgrade is answered.
/// Besides the stream, returns a flag that flips when the agent's whole connection ends, so a
/// stream's end can be told apart from its agent's.
pub async fn open(
    registry: &Registry,
    agent: Uuid,
    header: &StreamHeader,
) -> Result<(StreamHandle, watch::Receiver<bool>), OpenError> {
    let (mut control, closed) = registry.connection(agent).ok_or(OpenError::NotConnected)?;
    let attempt = async {
        let mut stream = control
            .open_stream()
            .await
            .map_err(|e| OpenError::Unreachable(e.to_string()))?;
        write_frame(&mut stream, header)
            .await
            .map_err(|e| OpenError::Unreachable(e.to_string()))?;
        match read_frame::<_, StreamOpen>(&mut stream).await {
            Ok(Some(StreamOpen::Ok)) => Ok((stream, closed)),
            Ok(Some(StreamOpen::Refused { reason })) => Err(OpenError::Refused(reason)),
            Ok(None) => Err(OpenError::Unreachable(
                "it closed the stream without an answer (an older agent that does not serve \
                 this kind of stream?)"
                    .into(),
            )),
            Err(e) => Err(OpenError::Unreachable(e.to_string())),
        }
    };
    tokio::time::timeout(OPEN_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(OpenError::Unreachable(format!(
                "no answer within {} s",
                OPEN_TIMEOUT.as_secs()
            )))
        })
}

/// The kind of a stream, as metrics and logs name it.
pub fn kind(header: &StreamHeader) -> &'static str {
    match header {
        StreamHeader::Rpc(_) => "rpc",
        StreamHeader::Tcp { .. } => "tcp",
        StreamHeader::Udp { .. } => "udp",
        StreamHeader::Ssh => "ssh",
        StreamHeader::Pty { .. } => "pty",
        StreamHeader::ListeningPorts => "listening_ports",
        StreamHeader::Ping => "ping",
    }
}
