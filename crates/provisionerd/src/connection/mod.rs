//! The daemon's one connection to coderd, whatever carries it: a WebSocket for external daemons
//! ([`websocket`]), in-memory channels for daemons built into `coder server` ([`Connection::pair`]).
//!
//! A connection is two channels. Dropping the [`Connection`] hangs up; when the other side
//! hangs up (or the transport dies), `incoming` closes.

use std::future::Future;

use codersdk::provisionerd::{DaemonMessage, ServeParams, ServerMessage};
use tokio::sync::mpsc;

pub mod websocket;

/// The daemon's end of a connection.
#[derive(Debug)]
pub struct Connection {
    pub outgoing: mpsc::Sender<DaemonMessage>,
    pub incoming: mpsc::Receiver<ServerMessage>,
}

/// coderd's end of an in-memory connection.
#[derive(Debug)]
pub struct ServerSide {
    pub incoming: mpsc::Receiver<DaemonMessage>,
    pub outgoing: mpsc::Sender<ServerMessage>,
}

impl Connection {
    /// Both ends of an in-memory connection, each direction buffering `capacity` messages.
    pub fn pair(capacity: usize) -> (Connection, ServerSide) {
        let (daemon_tx, server_rx) = mpsc::channel(capacity.max(1));
        let (server_tx, daemon_rx) = mpsc::channel(capacity.max(1));
        (
            Connection {
                outgoing: daemon_tx,
                incoming: daemon_rx,
            },
            ServerSide {
                incoming: server_rx,
                outgoing: server_tx,
            },
        )
    }
}

/// Opens connections to coderd. The runner calls it again after every lost connection, with the
/// same parameters, so a reconnecting daemon keeps its identity.
pub trait Connector: Send + Sync {
    fn connect(
        &self,
        params: &ServeParams,
    ) -> impl Future<Output = Result<Connection, ConnectError>> + Send;
}

/// Why a connection could not be opened. All but `Transient` stop the daemon.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("incompatible: {0}")]
    Incompatible(String),
    #[error("{0}")]
    Transient(String),
}
