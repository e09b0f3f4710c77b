//! Cross-origin requests to apps, by the template's `cors_behavior` (Coder's two):
//!
//! - `simple` (the default): coderd decides. A subdomain app accepts cross-origin requests,
//!   credentials included, only from another subdomain app of the same user (one user's apps
//!   may talk to each other, nobody else's page may read them); preflights are answered here
//!   without reaching the app, and whatever CORS headers the app sends are dropped, so an app
//!   cannot widen its own exposure (`Access-Control-Allow-Origin: *` with the user's session).
//! - `passthru`: coderd stays out; preflights and the app's own CORS headers go through as they
//!   are, for apps that implement CORS themselves.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;

use super::host::{AppHost, Wildcard};

/// A template's `cors_behavior`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Cors {
    #[default]
    Simple,
    Passthru,
}

impl Cors {
    pub fn parse(value: &str) -> Self {
        match value {
            "passthru" => Self::Passthru,
            _ => Self::Simple,
        }
    }
}

/// Methods a cross-origin request may use (preflighted ones included).
const METHODS: &str = "HEAD, GET, POST, PUT, PATCH, DELETE";

/// Whether `headers` carry a CORS preflight.
pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS
        && headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The request's `Origin` when it is another app host of `app`'s user under the wildcard.
pub fn allowed_origin<'h>(
    wildcard: &Wildcard,
    app: &AppHost,
    headers: &'h HeaderMap,
) -> Option<&'h HeaderValue> {
    let value = headers.get(header::ORIGIN)?;
    let origin = url::Url::parse(value.to_str().ok()?).ok()?;
    if origin.scheme() != wildcard.scheme() {
        return None;
    }
    let host = match (origin.host_str(), origin.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => return None,
    };
    let other = AppHost::parse(wildcard.label(&host)?)?;
    other.user.eq_ignore_ascii_case(&app.user).then_some(value)
}

/// coderd's answer to a preflight under `simple`: permission for an allowed origin, nothing
/// (so the browser refuses) for any other.
pub fn preflight(origin: Option<&HeaderValue>, request: &HeaderMap) -> Response {
    let mut response = Response::new(axum::body::Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    let asked = request
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    let method_allowed = METHODS.split(", ").any(|m| m.eq_ignore_ascii_case(asked));
    if let (Some(origin), true) = (origin, method_allowed) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(METHODS),
        );
        // Any request header the page asks for (credentials are ours to strip anyway).
        if let Some(asked) = request.get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
        }
    }
    response
}

/// Drops the app's own CORS headers (under `simple` coderd decides).
pub fn strip_app_headers(headers: &mut HeaderMap) {
    for name in [
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        header::ACCESS_CONTROL_ALLOW_METHODS,
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        header::ACCESS_CONTROL_MAX_AGE,
    ] {
        headers.remove(name);
    }
}

/// Lets an allowed origin read a response under `simple`.
pub fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("test header"));
        }
        h
    }

    #[test]
    fn only_the_same_users_app_hosts_are_allowed_origins() {
        let w = Wildcard::parse("*.apps.test:8080", "http").expect("test wildcard");
        let app = AppHost::parse("code--main--dev--alice").expect("test host");
        let ok = |origin: &str| allowed_origin(&w, &app, &headers(&[("origin", origin)])).is_some();
        assert!(ok("http://web--main--dev--alice.apps.test:8080"));
        assert!(ok("http://8080--main--other--alice.apps.test:8080"));
        assert!(!ok("http://web--main--dev--bob.apps.test:8080"));
        assert!(!ok("https://web--main--dev--alice.apps.test:8080"));
        assert!(!ok("http://web--main--dev--alice.evil.test:8080"));
        assert!(!ok("http://apps.test:8080"));
        assert!(!ok("null"));
    }

    #[test]
    fn a_preflight_grants_nothing_to_others() {
        let request = headers(&[
            ("origin", "http://x"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "x-custom"),
        ]);
        assert!(is_preflight(&Method::OPTIONS, &request));
        assert!(!is_preflight(&Method::GET, &request));
        let origin = HeaderValue::from_static("http://x");
        let granted = preflight(Some(&origin), &request);
        assert_eq!(granted.status(), StatusCode::NO_CONTENT);
        assert_eq!(granted.headers()["access-control-allow-origin"], "http://x");
        assert_eq!(
            granted.headers()["access-control-allow-headers"],
            "x-custom"
        );
        let refused = preflight(None, &request);
        assert!(
            !refused
                .headers()
                .contains_key("access-control-allow-origin")
        );
        let odd = headers(&[
            ("origin", "http://x"),
            ("access-control-request-method", "TRACE"),
        ]);
        assert!(
            !preflight(Some(&origin), &odd)
                .headers()
                .contains_key("access-control-allow-origin")
        );
    }
}
