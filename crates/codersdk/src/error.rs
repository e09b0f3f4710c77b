//! The error body every coderd endpoint returns, and the client's error type.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Coder's generic response body: used for errors and for plain acknowledgements.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Response {
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<ValidationError>,
}

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ValidationError {
    pub field: String,
    pub detail: String,
}

impl Response {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..Self::default()
        }
    }
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// coderd answered with an error status and Coder's error body.
    #[error(
        "{status}: {}{}{}",
        .response.message,
        detail_suffix(&.response.detail),
        validations_suffix(&.response.validations)
    )]
    Api { status: u16, response: Response },
    #[error("request to coderd failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("websocket to coderd failed: {0}")]
    WebSocket(#[from] Box<tokio_tungstenite::tungstenite::Error>),
    #[error("unexpected response from coderd: {0}")]
    Decode(String),
    #[error("invalid URL: {0}")]
    Url(#[from] url::ParseError),
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

/// The invalid fields, so a person reading the error knows which and why.
fn validations_suffix(validations: &[ValidationError]) -> String {
    if validations.is_empty() {
        return String::new();
    }
    let fields: Vec<String> = validations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.detail))
        .collect();
    format!(" [{}]", fields.join("; "))
}

impl ClientError {
    /// The HTTP status coderd answered with, if it answered at all.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            Self::Http(e) => e.status().map(|s| s.as_u16()),
            _ => None,
        }
    }
}
