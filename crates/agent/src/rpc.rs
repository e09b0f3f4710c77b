//! The one thing the reporting loops need from a connection: a call and its answer. A trait so
//! that the loops can be tested against a scripted peer.

use std::future::Future;

use codersdk::ClientError;
use codersdk::agentsdk::{AgentConnection, Request, Response};

pub(crate) trait Rpc: Sync {
    fn call(&self, request: Request) -> impl Future<Output = Result<Response, ClientError>> + Send;
}

impl Rpc for AgentConnection {
    fn call(&self, request: Request) -> impl Future<Output = Result<Response, ClientError>> + Send {
        AgentConnection::call(self, request)
    }
}

/// Why a call did not go through.
#[derive(Debug)]
pub(crate) enum CallError {
    /// coderd answered with an error: sending the same again would be refused again.
    Refused(String),
    /// No answer (connection lost or broken): worth sending again later.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(message) => write!(f, "coderd refused: {message}"),
            Self::Transport(message) => f.write_str(message),
        }
    }
}

pub(crate) async fn call(rpc: &impl Rpc, request: Request) -> Result<Response, CallError> {
    match rpc.call(request).await {
        Ok(Response::Error { message }) => Err(CallError::Refused(message)),
        Ok(response) => Ok(response),
        Err(ClientError::Api { response, .. }) => Err(CallError::Refused(response.message)),
        Err(other) => Err(CallError::Transport(other.to_string())),
    }
}
