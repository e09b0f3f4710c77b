//! Who is looking: the session cookie checked by coderd's `domain::session` (the same check the
//! API makes), or a redirect to `/login?redirect=…` back to the page asked for.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_core::domain::session::{self, Session};
use coderd_core::state::AppState;
use codersdk::client::SESSION_TOKEN_COOKIE;

use crate::error::PageError;
use crate::security;

/// A signed-in person, with the CSRF token their forms carry.
pub struct Viewer {
    pub session: Session,
    pub csrf: String,
}

impl Viewer {
    pub fn username(&self) -> &str {
        &self.session.user.username
    }

    pub fn subject(&self) -> &coderd_authz::Subject {
        &self.session.subject
    }

    /// Checks a POST: not from another site, and carrying this session's form token.
    pub fn check_form(&self, headers: &HeaderMap, submitted: &str) -> Result<(), PageError> {
        security::check_origin(&Method::POST, headers)?;
        if security::tokens_match(&self.csrf, submitted) {
            Ok(())
        } else {
            Err(PageError::Csrf)
        }
    }
}

/// The login URL that returns to `parts`' page afterwards.
fn login_redirect(parts: &Parts) -> Response {
    let back = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let query = serde_urlencoded::to_string([("redirect", back)]).unwrap_or_default();
    Redirect::to(&format!("/login?{query}")).into_response()
}

/// The session token a request carries in its cookie, if any.
pub fn token(headers: &HeaderMap) -> Option<&str> {
    coderd_http::cookies::value(headers, SESSION_TOKEN_COOKIE).filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(token) = token(&parts.headers) else {
            return Err(login_redirect(parts));
        };
        match session::authenticate(state, token).await {
            Ok(session) => {
                let csrf = security::session_token(&session.key.id, &session.key.hashed_secret);
                Ok(Self { session, csrf })
            }
            Err(coderd_core::domain::Error::Unauthorized { .. }) => Err(login_redirect(parts)),
            Err(e) => Err(PageError::from(e).into_response()),
        }
    }
}

/// Whether a `redirect` target stays on this site: a path, not `//host` or `/\host` (which
/// browsers treat as another origin), nor a scheme.
pub fn safe_redirect(target: &str) -> Option<&str> {
    let ok = target.starts_with('/')
        && !target.starts_with("//")
        && !target.starts_with("/\\")
        && !target.chars().any(|c| c.is_control());
    ok.then_some(target)
}

/// The `Set-Cookie` value of a session cookie (an empty value and age 0 clear it).
pub fn session_cookie(state: &AppState, value: &str, max_age: u64) -> String {
    let secure = if state.options.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{SESSION_TOKEN_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    )
}

#[cfg(test)]
mod tests {
    use super::safe_redirect;

    #[test]
    fn only_relative_paths_are_followed() {
        assert_eq!(safe_redirect("/workspaces?x=1"), Some("/workspaces?x=1"));
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "evil",
            "",
        ] {
            assert_eq!(safe_redirect(bad), None, "{bad}");
        }
    }
}
