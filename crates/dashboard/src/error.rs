//! How a page fails: a `thiserror` enum every handler returns, rendered as an HTML error page
//! with the matching status. Internal causes are logged, never shown.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Absent, or not visible to the viewer: the two are never told apart.
    #[error("not found")]
    NotFound,
    /// The viewer may see the object but not do this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The request cannot succeed as sent.
    #[error("{0}")]
    BadRequest(String),
    /// A POST without a valid CSRF token, or from another site.
    #[error("the form expired or came from another site")]
    Csrf,
    /// The request conflicts with the current state (a build already running).
    #[error("{0}")]
    Conflict(String),
    #[error("domain: {0}")]
    Domain(coderd_core::domain::Error),
    #[error("rendering: {0}")]
    Render(#[from] askama::Error),
}

pub type PageResult<T> = Result<T, PageError>;

impl From<coderd_core::domain::Error> for PageError {
    fn from(e: coderd_core::domain::Error) -> Self {
        use coderd_core::domain::Error as E;
        match e {
            E::NotFound => Self::NotFound,
            E::Forbidden { detail } => Self::Forbidden(detail),
            E::BadRequest { message, detail } | E::Conflict { message, detail }
                if !detail.is_empty() =>
            {
                Self::BadRequest(format!("{message} {detail}"))
            }
            E::BadRequest { message, .. } => Self::BadRequest(message),
            E::Conflict { message, .. } => Self::Conflict(message),
            other => Self::Domain(other),
        }
    }
}

impl From<coderd_store::Error> for PageError {
    fn from(e: coderd_store::Error) -> Self {
        Self::from(coderd_core::domain::Error::from(e))
    }
}

impl PageError {
    fn status(&self) -> StatusCode {
        match self {
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Forbidden(_) | Self::Csrf => StatusCode::FORBIDDEN,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Domain(coderd_core::domain::Error::Unauthorized { .. }) => {
                StatusCode::UNAUTHORIZED
            }
            Self::Domain(coderd_core::domain::Error::Validation(_)) => StatusCode::BAD_REQUEST,
            Self::Domain(coderd_core::domain::Error::Gone { .. }) => StatusCode::GONE,
            Self::Domain(_) | Self::Render(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the person is told: internal causes stay in the log.
    fn public_message(&self) -> String {
        match self {
            Self::Domain(coderd_core::domain::Error::Internal(_)) | Self::Render(_) => {
                "Something went wrong on the server.".into()
            }
            Self::NotFound => "This page does not exist, or you do not have access to it.".into(),
            other => other.to_string(),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, "dashboard page failed");
        }
        let page = crate::view::ErrorPage {
            chrome: crate::view::Chrome::anonymous(),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            message: self.public_message(),
            status: status.as_u16(),
        };
        match crate::view::html(&page) {
            Ok(body) => (status, body).into_response(),
            Err(_) => (status, self.public_message()).into_response(),
        }
    }
}
