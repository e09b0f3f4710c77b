//! Cross-site request forgery on the API. A browser attaches the session cookie to every
//! request for this host, including those a page elsewhere starts — and workspace apps served
//! on sibling subdomains are *same-site*, so `SameSite=Lax` does not stop them. A request that
//! authenticates by the cookie alone and either changes state or opens a WebSocket (a terminal,
//! an SSH stream) must therefore come from this deployment's own origin. Clients that send the
//! token in a header set it themselves: no other page can make them send it.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use codersdk::client::{SESSION_TOKEN_COOKIE, SESSION_TOKEN_HEADER};

use coderd_core::state::AppState;
use coderd_http::error::ApiError;

pub async fn refuse_cross_origin(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    if rides_on_cookie(req.method(), headers)
        && !from_own_origin(headers, &state.options.access_url)
    {
        return ApiError::new(StatusCode::FORBIDDEN, "Cross-origin request refused.")
            .with_detail(
                "Requests authenticated by the session cookie that change state or open a \
             WebSocket must come from the deployment's own origin. Other clients send the \
             token in the Coder-Session-Token header.",
            )
            .into_response();
    }
    next.run(req).await
}

/// Whether the request is authenticated by the cookie alone and is one a forged page could
/// abuse: a write or a WebSocket upgrade (reads are answered to the forger's page only if CORS
/// allowed it, and it does not).
fn rides_on_cookie(method: &Method, headers: &HeaderMap) -> bool {
    let header_token = headers.contains_key(SESSION_TOKEN_HEADER)
        || headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("Bearer "));
    if header_token || coderd_http::cookies::value(headers, SESSION_TOKEN_COOKIE).is_none() {
        return false;
    }
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    upgrade || !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The browser's own account of where the request came from: `Sec-Fetch-Site` when it sends
/// one, and the `Origin` against the request's host or the access URL. A client that sends
/// neither is not a browser acting for another page.
fn from_own_origin(headers: &HeaderMap, access_url: &url::Url) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let matches_host = origin
        .split_once("://")
        .is_some_and(|(_, rest)| Some(rest) == host);
    matches_host || origin == access_url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn only_cookie_writes_and_upgrades_are_checked() {
        let cookie = ("cookie", "coder_session_token=abc");
        assert!(!rides_on_cookie(&Method::GET, &headers(&[cookie])));
        assert!(rides_on_cookie(&Method::POST, &headers(&[cookie])));
        assert!(rides_on_cookie(
            &Method::GET,
            &headers(&[cookie, ("upgrade", "websocket")])
        ));
        assert!(!rides_on_cookie(
            &Method::POST,
            &headers(&[cookie, ("coder-session-token", "abc")])
        ));
        assert!(!rides_on_cookie(&Method::POST, &headers(&[])));
    }

    #[test]
    fn sibling_subdomains_are_not_this_origin() {
        let access: url::Url = "https://coder.example.com".parse().expect("url");
        let host = ("host", "coder.example.com");
        assert!(from_own_origin(
            &headers(&[host, ("origin", "https://coder.example.com")]),
            &access
        ));
        assert!(!from_own_origin(
            &headers(&[host, ("origin", "https://app--ws--me.coder.example.com")]),
            &access
        ));
        assert!(!from_own_origin(
            &headers(&[host, ("sec-fetch-site", "same-site")]),
            &access
        ));
        assert!(from_own_origin(&headers(&[host]), &access));
    }
}
