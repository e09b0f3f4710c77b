//! The audit log's request context: every request gets an id and its origin becomes the
//! current [`RequestInfo`], which the domain layer's audit entries read without knowing HTTP.

use coderd_core::audit::{REQUEST_ID_HEADER, RequestInfo};
use uuid::Uuid;

/// Middleware giving every request an id (answered in [`REQUEST_ID_HEADER`]) and making its
/// [`RequestInfo`] current while it is served.
pub async fn request_context(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let info = RequestInfo {
        ip: req
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip()),
        user_agent: req
            .headers()
            .get(axum::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        request_id: Uuid::new_v4(),
    };
    let id = info.request_id;
    let mut response = info.scope(next.run(req)).await;
    if let Ok(value) = axum::http::HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}
