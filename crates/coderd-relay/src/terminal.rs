//! The reconnecting PTY for callers inside this process (the dashboard's terminal page): the
//! same authorisation, stream and splice as `GET /workspaceagents/{id}/pty`, without a hop
//! over HTTP, so the relay stays the one path into a workspace. The caller brings its own
//! WebSocket (and its own checks on where the request came from).

use axum::extract::ws::WebSocket;
use codersdk::agentsdk::StreamHeader;
use tokio::sync::watch;
use tokio_yamux::StreamHandle;
use uuid::Uuid;

use super::splice::Inbound;
use super::{OpenError, kind, routes};
use coderd_authz::{Action, Subject};
use coderd_core::domain::{self, resolve};
use coderd_core::state::AppState;

/// Which terminal to attach to, and its size (a zero size means the agent's default, 80×24).
#[derive(Debug, Clone, Default)]
pub struct PtyRequest {
    /// Names the terminal: attaching again with the same id replays what it printed.
    pub reconnect: Uuid,
    pub width: u16,
    pub height: u16,
    /// The command to run instead of the login shell (only when the terminal is new).
    pub command: String,
}

impl PtyRequest {
    pub(super) fn header(&self) -> StreamHeader {
        let or = |v: u16, default: u16| if v > 0 { v } else { default };
        StreamHeader::Pty {
            id: self.reconnect,
            width: or(self.width, 80),
            height: or(self.height, 24),
            command: self.command.clone(),
        }
    }
}

/// Why a terminal could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    /// The caller may not connect to the agent's workspace (or cannot see it: `NotFound`).
    #[error(transparent)]
    Denied(#[from] domain::Error),
    /// The agent is not connected, refused, or did not answer.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// A terminal the agent has accepted, waiting for the caller's WebSocket.
pub struct OpenPty {
    stream: StreamHandle,
    agent_closed: watch::Receiver<bool>,
    workspace: Uuid,
    header: StreamHeader,
}

/// Authorises `subject` to connect to `agent`'s workspace and opens the terminal.
pub async fn open_pty(
    state: &AppState,
    subject: &Subject,
    agent: Uuid,
    request: &PtyRequest,
) -> Result<OpenPty, PtyError> {
    let target = resolve::agent(state, subject, agent, Action::Connect).await?;
    let header = request.header();
    let (stream, agent_closed) = routes::open_counted(state, agent, &header).await?;
    Ok(OpenPty {
        stream,
        agent_closed,
        workspace: target.workspace.id,
        header,
    })
}

impl OpenPty {
    /// Splices the terminal onto `socket` until either side ends. Client messages are Coder's
    /// reconnecting-PTY JSON; server messages are the terminal's raw output.
    pub async fn serve(self, state: AppState, socket: WebSocket) {
        routes::serve(
            state,
            socket,
            (self.stream, self.agent_closed),
            self.workspace,
            kind(&self.header),
            Inbound::Pty,
        )
        .await;
    }
}
