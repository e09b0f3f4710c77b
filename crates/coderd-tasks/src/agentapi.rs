//! A client of AgentAPI (github.com/coder/agentapi), the HTTP server a task's app runs in the
//! workspace in front of the AI agent's terminal: `GET /status`, `GET /messages` and
//! `POST /message`, as its OpenAPI document describes them. It speaks HTTP/1.1 over one relay
//! stream to the app's port on the agent's loopback (`relay::dial`), the same path as the app
//! proxy. Requests are built here from nothing but their path and body: no header or cookie of
//! the caller's ever reaches the app.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt as _, Limited};
use hyper::client::conn::http1::SendRequest;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::time::Duration;
use uuid::Uuid;

use coderd_core::state::AppState;
use coderd_relay::{self as relay, OpenError};

/// How long one exchange may take. `POST /message` answers once the agent has started on the
/// message, which takes a moment; a hung app must still not pin the request.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response body read from the app (a long conversation is a few MiB at most).
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Why an exchange with the app failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No stream to the app's port: the agent is gone, or nothing listens there.
    #[error("{0}")]
    Unreachable(String),
    /// The app answered with an error status; the body says why (AgentAPI's problem JSON).
    #[error("the task app answered {status}: {body}")]
    Refused { status: StatusCode, body: String },
    /// The app answered something that is not AgentAPI's.
    #[error("{0}")]
    Invalid(String),
}

/// `GET /status`: whether the agent is working on a message (`running`) or waits for input
/// (`stable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    Running,
    Stable,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stable => "stable",
        }
    }
}

#[derive(Debug, Deserialize)]
struct StatusBody {
    status: AgentStatus,
}

/// The author of a conversation message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

/// One message of the conversation (`GET /messages`).
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: i64,
    pub content: String,
    pub role: Role,
    pub time: DateTime<Utc>,
}

#[derive(Debug, Deserialize)]
struct MessagesBody {
    messages: Vec<Message>,
}

/// `POST /message`: a `user` message is logged in the conversation and submitted to the agent.
#[derive(Debug, Serialize)]
struct MessageRequest<'a> {
    content: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Deserialize)]
struct MessageResponse {
    ok: bool,
}

/// A connection to one task app.
pub struct Client {
    sender: SendRequest<Body>,
    port: u16,
}

impl Client {
    /// Opens a connection to the app listening on `port` of `agent`'s loopback; the stream
    /// counts as use of `workspace`.
    pub async fn connect(
        state: &AppState,
        agent: Uuid,
        workspace: Uuid,
        port: u16,
    ) -> Result<Self, Error> {
        let stream = relay::dial::tcp(state, agent, workspace, port, "task_app")
            .await
            .map_err(|e| match e {
                OpenError::NotConnected => {
                    Error::Unreachable("the workspace agent is not connected".into())
                }
                OpenError::Refused(reason) | OpenError::Unreachable(reason) => {
                    Error::Unreachable(reason)
                }
            })?;
        let sender = relay::dial::http1(stream)
            .await
            .map_err(|e| Error::Unreachable(e.to_string()))?;
        Ok(Self { sender, port })
    }

    pub async fn status(&mut self) -> Result<AgentStatus, Error> {
        let body: StatusBody = self.exchange(Method::GET, "/status", None).await?;
        Ok(body.status)
    }

    pub async fn messages(&mut self) -> Result<Vec<Message>, Error> {
        let body: MessagesBody = self.exchange(Method::GET, "/messages", None).await?;
        Ok(body.messages)
    }

    /// Submits `content` to the agent as the user's message.
    pub async fn post_user_message(&mut self, content: &str) -> Result<(), Error> {
        let body = serde_json::to_vec(&MessageRequest {
            content,
            kind: "user",
        })
        .map_err(|e| Error::Invalid(e.to_string()))?;
        let answer: MessageResponse = self.exchange(Method::POST, "/message", Some(body)).await?;
        if answer.ok {
            Ok(())
        } else {
            Err(Error::Invalid(
                "the task app did not confirm the message (\"ok\": false)".into(),
            ))
        }
    }

    async fn exchange<T: DeserializeOwned>(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, Error> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, format!("127.0.0.1:{}", self.port))
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(body.map_or_else(Body::empty, Body::from))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let sender = &mut self.sender;
        let exchange = async move {
            sender
                .ready()
                .await
                .map_err(|e| Error::Unreachable(e.to_string()))?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| Error::Unreachable(e.to_string()))?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(|e| Error::Unreachable(e.to_string()))?
                .to_bytes();
            Ok::<_, Error>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                Error::Unreachable(format!("no answer within {} s", EXCHANGE_TIMEOUT.as_secs()))
            })??;
        if !status.is_success() {
            return Err(Error::Refused {
                status,
                body: String::from_utf8_lossy(&bytes).trim().to_owned(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Invalid(format!("{path}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agentapi_shapes_decode() -> Result<(), serde_json::Error> {
        let status: StatusBody =
            serde_json::from_str(r#"{"$schema":"x","agent_type":"claude","status":"running"}"#)?;
        assert_eq!(status.status, AgentStatus::Running);
        let messages: MessagesBody = serde_json::from_str(
            r#"{"messages":[{"id":0,"content":"hi","role":"agent","time":"2025-01-02T03:04:05.6Z"},
                {"id":1,"content":"do it","role":"user","time":"2025-01-02T03:04:06Z"}]}"#,
        )?;
        assert_eq!(messages.messages.len(), 2);
        assert_eq!(messages.messages[1].role, Role::User);
        assert!(serde_json::from_str::<MessagesBody>(r#"{"messages":[{"id":0,"content":"","role":"system","time":"2025-01-02T03:04:05Z"}]}"#).is_err());
        let sent = serde_json::to_value(MessageRequest {
            content: "go",
            kind: "user",
        })?;
        assert_eq!(sent, serde_json::json!({"content": "go", "type": "user"}));
        Ok(())
    }
}
