//! `GET /debug/health` (the deployment's health report in Coder's shape),
//! `GET/PUT /debug/health/settings` (dismissed sections), and `/debug/ws`, the WebSocket echo
//! the report's probe upgrades to through the access URL.

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use codersdk::health::{HealthSettings, HealthcheckReport};

use super::AppState;
use coderd_core::domain::{health, health_report};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Query};

/// The most the echo sends back before closing: it proves the path, nothing more.
const ECHO_MESSAGES: usize = 4;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/debug/health", get(health_check))
        .route(
            "/debug/health/settings",
            get(get_settings).put(update_settings),
        )
        .route("/debug/ws", get(echo))
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HealthParams {
    /// Checks run on every request here (there is no cached report to skip), so `force`
    /// changes nothing; it is accepted as Coder's clients send it.
    #[serde(default)]
    force: bool,
    #[serde(default)]
    format: String,
}

#[utoipa::path(get, path = "/api/v2/debug/health", tag = "Debug",
    params(("force" = Option<bool>, Query), ("format" = Option<String>, Query, description = "json (the default)")),
    responses((status = 200, body = HealthcheckReport), (status = 400, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn health_check(
    State(state): State<AppState>,
    auth: Auth,
    Query(params): Query<HealthParams>,
) -> ApiResult<Json<HealthcheckReport>> {
    tracing::debug!(force = params.force, "health report asked for");
    if !matches!(params.format.as_str(), "" | "json") {
        return Err(ApiError::validation(vec![codersdk::ValidationError {
            field: "format".into(),
            detail: format!("{:?} is not a format; use json", params.format),
        }]));
    }
    Ok(Json(
        health_report::coder_report(&state, &auth.subject).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/debug/health/settings", tag = "Debug",
    responses((status = 200, body = HealthSettings),
        (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn get_settings(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<HealthSettings>> {
    Ok(Json(health::settings(&state, &auth.subject).await?))
}

#[utoipa::path(put, path = "/api/v2/debug/health/settings", tag = "Debug",
    request_body = HealthSettings,
    responses((status = 200, body = HealthSettings), (status = 204, description = "Nothing changed"),
        (status = 400, body = codersdk::Response), (status = 403, body = codersdk::Response),
        (status = 404, body = codersdk::Response, description = "Not a deployment administrator")))]
pub(super) async fn update_settings(
    State(state): State<AppState>,
    auth: Auth,
    Json(req): Json<HealthSettings>,
) -> ApiResult<Response> {
    Ok(
        match health::update_settings(&state, &auth.subject, &req).await? {
            Some(saved) => Json(saved).into_response(),
            None => StatusCode::NO_CONTENT.into_response(),
        },
    )
}

/// Echoes a few messages, then closes. It needs no session: the server's own probe has none,
/// and an echo reveals nothing.
async fn echo(ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(echo_messages)
}

async fn echo_messages(mut socket: WebSocket) {
    for _ in 0..ECHO_MESSAGES {
        match socket.recv().await {
            Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                if socket.send(message).await.is_err() {
                    return;
                }
            }
            _ => return,
        }
    }
}
