//! The general API rate limit at the front door (`coderd_core::api_limit` keeps the buckets): a
//! request is counted against its user when it carries a valid session (the caller it resolves
//! to is kept for the handler, so nothing is looked up twice), else against its address.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use coderd_core::api_limit::{BYPASS_HEADER, Key, exempt};
use coderd_http::error::ApiError;
use coderd_http::extract::{authenticate, token_from_parts};

pub async fn api_rate_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(limit) = state.api_limit.clone() else {
        return next.run(req).await;
    };
    if exempt(req.uri().path()) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let auth = match token_from_parts(&parts) {
        // An invalid token is the handler's 401 to give; until then it is counted by address.
        Some(token) => authenticate(&state, &token).await.ok(),
        None => None,
    };
    let bypass = parts
        .headers
        .get(BYPASS_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if bypass {
        // Owners skip the limit (load tests, automation); anyone else asking is told no.
        let owner = auth
            .as_ref()
            .is_some_and(|a| a.user.rbac_roles.iter().any(|r| r == "owner"));
        if !owner {
            return ApiError::new(
                StatusCode::PRECONDITION_REQUIRED,
                format!("{BYPASS_HEADER:?} provided but user is not owner."),
            )
            .into_response();
        }
    } else {
        let key = match &auth {
            Some(auth) => Key::User(auth.user.id),
            None => Key::Address(
                parts
                    .extensions
                    .get::<ConnectInfo<std::net::SocketAddr>>()
                    .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |c| c.0.ip()),
            ),
        };
        if let Err(limited) = limit.check(key) {
            metrics::counter!("coderd_api_requests_rate_limited_total").increment(1);
            let seconds = limited.retry_after.as_secs_f64().ceil().max(1.0) as u64;
            let mut response = ApiError::new(StatusCode::TOO_MANY_REQUESTS, limit.message())
                .with_detail(format!("Try again in {seconds}s."))
                .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            return response;
        }
    }
    if let Some(auth) = auth {
        parts.extensions.insert(auth);
    }
    next.run(Request::from_parts(parts, body)).await
}
