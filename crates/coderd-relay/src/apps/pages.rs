//! What the proxy answers when it cannot proxy: an HTML page for browsers, Coder's JSON error
//! (`{message, detail}`) for everyone else, and a login redirect for a browser that is not
//! signed in. Messages never carry internal causes (those are logged).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Why a request for an app was not proxied.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No such app, or the caller may not see it (never told apart: existence must not leak).
    #[error("The application was not found.")]
    NotFound,
    /// The app is not public and the caller is not signed in.
    #[error("You must be signed in to open this application.")]
    LoginRequired { redirect: String },
    #[error("The workspace is not running.")]
    WorkspaceStopped { start_link: String },
    #[error("The workspace agent is not connected.")]
    AgentNotConnected { status: String },
    /// The app exists but cannot be reached this way (a command app, a subdomain app without
    /// a wildcard access URL, an upstream this proxy does not speak).
    #[error("{message}")]
    Unavailable { message: String, detail: String },
    /// The app did not answer (nothing listening, a reset, a timeout).
    #[error("The application did not answer.")]
    Upstream { detail: String },
    #[error("Internal error while proxying the application.")]
    Internal,
}

impl AppError {
    pub fn unavailable(message: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::Unavailable {
            message: message.into(),
            detail: detail.into(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::LoginRequired { .. } => StatusCode::UNAUTHORIZED,
            Self::WorkspaceStopped { .. } | Self::AgentNotConnected { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Unavailable { .. } => StatusCode::BAD_REQUEST,
            Self::Upstream { .. } => StatusCode::BAD_GATEWAY,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn detail(&self) -> String {
        match self {
            Self::NotFound => "It does not exist, or you may not open it.".into(),
            Self::LoginRequired { .. } => "Sign in, then open the application again.".into(),
            Self::WorkspaceStopped { start_link } => format!("Start the workspace: {start_link}"),
            Self::AgentNotConnected { status } => {
                format!("The agent is {status}; the application is reachable once it connects.")
            }
            Self::Unavailable { detail, .. } | Self::Upstream { detail } => detail.clone(),
            Self::Internal => "The error was logged.".into(),
        }
    }

    /// The response for a request with these headers.
    pub fn respond(&self, request: &HeaderMap) -> Response {
        let browser = wants_html(request);
        if let (Self::LoginRequired { redirect }, true) = (self, browser) {
            return redirect_to(redirect);
        }
        let (status, message, detail) = (self.status(), self.to_string(), self.detail());
        if browser {
            let body = format!(
                "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
                 <body><h1>{title}</h1><p>{detail}</p></body></html>",
                title = escape(&message),
                detail = escape(&detail),
            );
            let mut response = (status, body).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            return response;
        }
        let body = serde_json::json!({ "message": message, "detail": detail });
        (status, axum::Json(body)).into_response()
    }
}

/// A 307 to `location`: keeps the method, and is never cached.
pub fn redirect_to(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, v)]).into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// Browsers ask for HTML when navigating; API clients and scripts do not.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_get_pages_and_api_clients_json() {
        let mut html = HeaderMap::new();
        html.insert(header::ACCEPT, HeaderValue::from_static("text/html,*/*"));
        let login = AppError::LoginRequired {
            redirect: "/login?redirect=%2F%40a".into(),
        };
        let r = login.respond(&html);
        assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(
            login.respond(&HeaderMap::new()).status(),
            StatusCode::UNAUTHORIZED
        );
        let r = AppError::AgentNotConnected {
            status: "<disconnected>".into(),
        }
        .respond(&html);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
    }
}
