//! HTTP over the relay, for coderd's own clients of servers inside a workspace (the app proxy,
//! the tasks' AgentAPI client): a byte stream to a port on the agent's loopback, and an
//! HTTP/1.1 connection on it. Both ride [`super::open`], so they are authorised, counted and
//! routed like every other stream into a workspace.

use axum::body::Body;
use codersdk::agentsdk::StreamHeader;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::DuplexStream;
use uuid::Uuid;

use super::OpenError;
use coderd_core::state::AppState;

/// Largest response head accepted from a server in a workspace.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The buffer between the caller and the relay stream (see [`tcp`]).
const PIPE_BYTES: usize = 64 * 1024;

/// A stream to `port` on `agent`'s loopback, counted as activity of `workspace` under `kind`.
/// An HTTP client stops reading a stream whose body nobody consumes, and an unread yamux
/// stream stalls its whole agent connection (see docs/architecture.md, Relay), so the stream
/// is served by the agent SDK's pipe, which keeps its frames moving, and the caller gets the
/// other end of an in-memory duplex.
pub async fn tcp(
    state: &AppState,
    agent: Uuid,
    workspace: Uuid,
    port: u16,
    kind: &'static str,
) -> Result<DuplexStream, OpenError> {
    let (stream, _closed) = super::open(&state.agents, agent, &StreamHeader::Tcp { port }).await?;
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let active = state.relay_usage.begin(workspace, kind);
    tokio::spawn(async move {
        if let Ok((down, up)) = codersdk::agentsdk::pipe(stream, theirs).await {
            active.to_client(usize::try_from(down).unwrap_or(usize::MAX));
            active.to_agent(usize::try_from(up).unwrap_or(usize::MAX));
        }
    });
    Ok(ours)
}

/// An HTTP/1.1 client connection over `io` (a [`tcp`] stream, or TLS on one), driven by a task
/// of its own until either side closes it; upgrades are allowed.
pub async fn http1<T>(io: T) -> Result<SendRequest<Body>, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake(TokioIo::new(io))
        .await?;
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(error = %e, "HTTP connection into a workspace ended");
        }
    });
    Ok(sender)
}
