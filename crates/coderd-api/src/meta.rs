//! Deployment-level endpoints (health, build info, metrics, the OpenAPI document) and the
//! cross-cutting pieces of the middleware stack.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::Response as Body;
use codersdk::applications::AppHostResponse;
use codersdk::buildinfo::BuildInfoResponse;

use super::AppState;
use coderd_http::error::ApiError;
use coderd_http::extract::Json;

/// Version of the provisioner daemon protocol this server speaks.
pub const PROVISIONER_API_VERSION: &str = "1.0";
/// Version of the agent protocol this server speaks.
pub const AGENT_API_VERSION: &str = "1.0";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(api_root))
        .route("/buildinfo", get(build_info))
        .route("/applications/host", get(app_host))
        .route("/openapi.json", get(openapi_document))
}

pub fn root_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
}

pub fn version() -> String {
    codersdk::version::VERSION.to_string()
}

async fn api_root() -> Json<Body> {
    Json(Body::new("👋"))
}

#[utoipa::path(get, path = "/api/v2/buildinfo", tag = "General",
    responses((status = 200, body = BuildInfoResponse)))]
pub(super) async fn build_info(State(state): State<AppState>) -> Json<BuildInfoResponse> {
    let access = state
        .options
        .access_url
        .as_str()
        .trim_end_matches('/')
        .to_string();
    Json(BuildInfoResponse {
        external_url: "https://github.com/coder-rs/coder-rs".into(),
        version: version(),
        dashboard_url: access,
        workspace_proxy: false,
        agent_api_version: AGENT_API_VERSION.into(),
        provisioner_api_version: PROVISIONER_API_VERSION.into(),
        upgrade_message: String::new(),
        deployment_id: state.options.deployment_id.clone(),
        telemetry: false,
    })
}

#[utoipa::path(get, path = "/api/v2/applications/host", tag = "Applications",
    responses((status = 200, body = AppHostResponse)))]
pub(super) async fn app_host(
    State(state): State<AppState>,
    _auth: coderd_http::extract::Auth,
) -> Json<AppHostResponse> {
    let host = state
        .options
        .apps
        .wildcard
        .as_ref()
        .map(|wildcard| wildcard.host("*"))
        .unwrap_or_default();
    Json(AppHostResponse { host })
}

/// Liveness: the process answers and its database does too.
async fn healthz(State(state): State<AppState>) -> Response {
    // A fenced replica is not ready: load balancers take it out until its beats are recorded.
    if state.replica.is_fenced() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "fenced: this replica cannot record its beat in the database",
        )
            .into_response();
    }
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "OK").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "health check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

async fn openapi_document() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document_json(),
    )
        .into_response()
}

pub async fn api_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "Route not found.")
}

pub async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method {method} is not allowed on this route."),
    )
}

pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "An internal error occurred.",
    )
    .into_response()
}

/// Request count and latency per route pattern (never per raw path: ids would explode the
/// label space).
pub async fn record_http_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(
        "coderd_api_request_latencies_seconds",
        "method" => method,
        "route" => route,
        "code" => status
    )
    .record(start.elapsed().as_secs_f64());
    response
}

/// coderd's own pages and answers may never be framed by another site (clickjacking); a front
/// door that sets its own policy keeps it. Apps answer before this layer: their headers are
/// their own.
pub async fn deny_framing(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    if !headers.contains_key(header::X_FRAME_OPTIONS) {
        headers.insert(
            header::X_FRAME_OPTIONS,
            header::HeaderValue::from_static("DENY"),
        );
    }
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static("frame-ancestors 'none'"),
        );
    }
    response
}
