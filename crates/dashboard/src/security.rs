//! Headers every dashboard response carries, and the CSRF tokens of its forms.
//!
//! SameSite=Lax alone does not stop cross-site form posts from a workspace app on a sibling
//! subdomain (same site), so every POST form also carries a token: an HMAC of the session's key
//! id keyed by that key's stored hash. The hash never leaves the server, differs per session,
//! and every replica has it, so no extra secret has to be shared or rotated. The login and setup
//! forms, which have no session yet, use a random token echoed in a cookie (double submit).

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::error::PageError;

pub const CSP: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The cookie holding the pre-session CSRF token of the login and setup forms.
pub const PRE_SESSION_COOKIE: &str = "coder_dashboard_csrf";

/// Adds the security headers; HTML is never cached (it shows per-user state).
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    // A page that needs a looser policy (the terminal's inline styles) sets its own.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    let is_html = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if is_html {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The session's form token.
pub fn session_token(key_id: &str, hashed_secret: &[u8]) -> String {
    // HMAC accepts keys of any length; this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(hashed_secret) else {
        return String::new();
    };
    mac.update(b"coder-dashboard-csrf:");
    mac.update(key_id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// A fresh random token for the pre-session forms.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

/// Compares a submitted token with the expected one in constant time.
pub fn tokens_match(expected: &str, submitted: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(submitted.as_bytes()))
}

/// A browser sends its page's origin; a socket opened by another site's page is refused (the
/// cookie would be sent along, so SameSite does not stop it).
pub fn same_origin(headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest == host),
        // Non-browser clients send no Origin; they hold the cookie themselves.
        (None, _) => true,
        _ => false,
    }
}

/// Refuses a state-changing request a browser says came from another site.
pub fn check_origin(method: &Method, headers: &HeaderMap) -> Result<(), PageError> {
    if method == Method::GET || method == Method::HEAD {
        return Ok(());
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if site == "cross-site" {
        return Err(PageError::Csrf);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_per_session_and_compare_exactly() {
        let a = session_token("key-a", b"secret-a");
        let b = session_token("key-b", b"secret-a");
        assert_ne!(a, b);
        assert!(tokens_match(&a, &a.clone()));
        assert!(!tokens_match(&a, &b));
        assert!(!tokens_match(&a, ""));
        assert!(!tokens_match("", ""));
    }

    #[test]
    fn cross_site_posts_are_refused() {
        let mut h = HeaderMap::new();
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(check_origin(&Method::POST, &h).is_err());
        assert!(check_origin(&Method::GET, &h).is_ok());
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(check_origin(&Method::POST, &h).is_ok());
    }
}
