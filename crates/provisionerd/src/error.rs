//! Why the daemon stopped for good. Everything else (lost connections, failed jobs) is handled
//! inside the runner and never surfaces here.

use crate::connection::ConnectError;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// coderd refused the credentials (HTTP 401); retrying cannot help.
    #[error("coderd rejected the daemon's credentials: {0}")]
    Unauthorized(String),
    /// The credentials are valid but may not run a daemon here (HTTP 403).
    #[error("the daemon is not allowed to serve this organization: {0}")]
    Forbidden(String),
    /// coderd does not accept this daemon as configured (protocol version, organization, tags).
    #[error("coderd refused the daemon: {0}")]
    Incompatible(String),
    #[error("invalid provisioner daemon configuration: {0}")]
    Config(String),
}

impl DaemonError {
    /// The fatal counterpart of a connection error; `None` for transient ones.
    pub(crate) fn from_connect(err: ConnectError) -> Option<Self> {
        match err {
            ConnectError::Unauthorized(m) => Some(Self::Unauthorized(m)),
            ConnectError::Forbidden(m) => Some(Self::Forbidden(m)),
            ConnectError::Incompatible(m) => Some(Self::Incompatible(m)),
            ConnectError::Transient(_) => None,
        }
    }
}
