//! What the browser round trips through an OAuth provider share — sign-in (`coderd-sso`) and
//! linking a git provider (external auth): the sealed state cookie, redirects, and which
//! redirect targets are allowed.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The sealed attempt in flight; only the callback it was started for receives it.
pub const STATE_COOKIE: &str = "oauth_state";

/// What a provider's redirect back (or the start of an attempt) carries.
#[derive(Debug, Default, serde::Deserialize)]
pub struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
    /// Where to go afterwards (a path on this deployment).
    pub redirect: Option<String>,
}

/// Where a person may be sent afterwards: only paths on this deployment; anything else
/// (`//evil`, `https://…`) would make a callback an open redirect.
pub fn safe_redirect(redirect: Option<&str>) -> String {
    match redirect {
        Some(r)
            if r.starts_with('/')
                && !r.starts_with("//")
                && !r.starts_with("/\\")
                && !r.chars().any(char::is_control) =>
        {
            r.to_string()
        }
        _ => "/".into(),
    }
}

pub fn redirect_to(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, value)]).into_response(),
        Err(e) => ApiError::internal(format!("redirect location: {e}")).into_response(),
    }
}

pub fn with_cookie(mut response: Response, cookie: HeaderValue) -> Response {
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

pub fn state_cookie(value: &str, max_age: i64, path: &str, secure: bool) -> HeaderValue {
    let max_age = u64::try_from(max_age).unwrap_or_default();
    cookie(STATE_COOKIE, value, path, max_age, secure)
}

/// `SameSite=Lax`: the provider's redirect back is a top-level navigation from another site,
/// which Lax lets through and `Strict` would not.
pub fn cookie(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_redirect_targets() {
        assert_eq!(safe_redirect(Some("/workspaces?x=1")), "/workspaces?x=1");
        for bad in [
            None,
            Some(""),
            Some("//evil.example"),
            Some("/\\evil.example"),
            Some("https://evil.example"),
            Some("evil"),
            Some("/a\r\nSet-Cookie: x=y"),
        ] {
            assert_eq!(safe_redirect(bad), "/", "{bad:?}");
        }
    }
}
