//! Why a domain operation refused or failed.
//!
//! A `thiserror` enum rather than the HTTP layer's `ApiError`: callers that are not HTTP need to
//! tell the cases apart without reading status codes (the lifecycle executor skips a workspace
//! whose build is already active; the dashboard shows validations beside form fields and a
//! not-found page for [`Error::NotFound`]), and the domain stays free of axum. The messages are
//! written for the person who asked; `coderd_http::error` maps each variant to Coder's
//! `{message, detail, validations}` with the matching status.

use codersdk::ValidationError;

use coderd_authz::Denied;
use coderd_store as store;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller is not (or no longer) authenticated.
    #[error("{message}")]
    Unauthorized { message: String, detail: String },
    /// The object does not exist, or the subject may not see it: the two are never told apart.
    #[error("not found")]
    NotFound,
    /// The subject sees the object but may not do this to it.
    #[error("forbidden{}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Forbidden { detail: String },
    /// The request can never succeed as asked.
    #[error("{message}")]
    BadRequest { message: String, detail: String },
    /// Named fields are invalid.
    #[error("validation failed: {}", describe(.0))]
    Validation(Vec<ValidationError>),
    /// The request conflicts with the current state (a name taken, a build already active).
    #[error("{message}")]
    Conflict { message: String, detail: String },
    /// The object existed and was deleted; the caller may still see it by asking for deleted
    /// objects.
    #[error("{message}")]
    Gone { message: String },
    /// The database failed or an invariant broke; the cause is logged, never shown.
    #[error("{0}")]
    Internal(String),
}

fn describe(validations: &[ValidationError]) -> String {
    validations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Error {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            detail: String::new(),
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::Unauthorized {
            message: message.into(),
            detail: String::new(),
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict {
            message: message.into(),
            detail: String::new(),
        }
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::Forbidden {
            detail: detail.into(),
        }
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }

    /// Adds a detail to the variants that carry one.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        match &mut self {
            Self::Unauthorized { detail: d, .. }
            | Self::BadRequest { detail: d, .. }
            | Self::Conflict { detail: d, .. }
            | Self::Forbidden { detail: d } => *d = detail.into(),
            Self::NotFound | Self::Validation(_) | Self::Gone { .. } | Self::Internal(_) => {}
        }
        self
    }
}

impl From<Denied> for Error {
    fn from(d: Denied) -> Self {
        match d {
            Denied::NotFound => Self::NotFound,
            Denied::Forbidden => Self::forbidden(""),
        }
    }
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::NotFound => Self::NotFound,
            store::Error::Conflict { constraint } => {
                Self::conflict("The request conflicts with existing data.")
                    .with_detail(format!("violates {constraint}"))
            }
            store::Error::Database(e) => Self::Internal(format!("database: {e}")),
        }
    }
}
