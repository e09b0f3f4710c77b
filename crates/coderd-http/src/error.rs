//! The one error type HTTP handlers return, rendered as Coder's `{message, detail, validations}`.
//!
//! Client mistakes carry a message (and detail) meant for the caller. Internal failures are
//! logged with their cause here and answered with a generic message: the cause never leaks.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use codersdk::{Response as Body, ValidationError};

use coderd_authz::Denied;
use coderd_store as store;

pub const NOT_FOUND_MESSAGE: &str = "Resource not found or you do not have access to this resource";

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: Body,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: Body::new(message),
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.body.detail = detail.into();
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 400 with one entry per invalid field.
    pub fn validation(validations: Vec<ValidationError>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            body: Body {
                message: "Validation failed.".into(),
                detail: String::new(),
                validations,
            },
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn forbidden() -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden.")
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, NOT_FOUND_MESSAGE)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// Logs `cause` and answers 500 without revealing it.
    #[track_caller]
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let location = std::panic::Location::caller();
        tracing::error!(%cause, at = %location, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "An internal error occurred. It has been logged; contact your administrator if it persists.",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

impl From<Denied> for ApiError {
    fn from(d: Denied) -> Self {
        match d {
            Denied::NotFound => Self::not_found(),
            Denied::Forbidden => Self::forbidden(),
        }
    }
}

impl From<store::Error> for ApiError {
    #[track_caller]
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::NotFound => Self::not_found(),
            store::Error::Conflict { constraint } => {
                Self::conflict("The request conflicts with existing data.")
                    .with_detail(format!("violates {constraint}"))
            }
            store::Error::Database(e) => Self::internal(e),
        }
    }
}

impl From<coderd_core::domain::Error> for ApiError {
    #[track_caller]
    fn from(e: coderd_core::domain::Error) -> Self {
        use coderd_core::domain::Error as E;
        match e {
            E::Unauthorized { message, detail } => Self::unauthorized(message).with_detail(detail),
            E::NotFound => Self::not_found(),
            E::Forbidden { detail } => Self::forbidden().with_detail(detail),
            E::BadRequest { message, detail } => Self::bad_request(message).with_detail(detail),
            E::Validation(validations) => Self::validation(validations),
            E::Conflict { message, detail } => Self::conflict(message).with_detail(detail),
            E::Gone { message } => Self::new(StatusCode::GONE, message),
            E::Internal(cause) => Self::internal(cause),
        }
    }
}

impl From<coderd_core::secrets::Error> for ApiError {
    #[track_caller]
    fn from(e: coderd_core::secrets::Error) -> Self {
        use coderd_core::secrets::Error;
        match e {
            Error::Domain(e) => e.into(),
            Error::InUse { field, detail } => {
                let mut error = ApiError::validation(vec![codersdk::ValidationError {
                    field: field.into(),
                    detail: detail.into(),
                }]);
                error.status = StatusCode::CONFLICT;
                error
            }
            Error::Sealed(e) => ApiError::internal(e),
        }
    }
}

impl From<coderd_authz::auth::Error> for ApiError {
    #[track_caller]
    fn from(e: coderd_authz::auth::Error) -> Self {
        Self::internal(e)
    }
}

/// Collects per-field validation failures, then turns them into one 400.
#[derive(Debug, Default)]
pub struct Validator(Vec<ValidationError>);

impl Validator {
    pub fn check(&mut self, ok: bool, field: &str, detail: impl Into<String>) -> &mut Self {
        if !ok {
            self.0.push(ValidationError {
                field: field.into(),
                detail: detail.into(),
            });
        }
        self
    }

    pub fn push(&mut self, field: &str, result: Result<(), String>) -> &mut Self {
        if let Err(detail) = result {
            self.0.push(ValidationError {
                field: field.into(),
                detail,
            });
        }
        self
    }

    pub fn finish(&mut self) -> ApiResult<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::validation(std::mem::take(&mut self.0)))
        }
    }
}
