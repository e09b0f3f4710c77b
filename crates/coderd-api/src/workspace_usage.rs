//! `POST /api/v2/workspaces/{id}/usage`: Coder's CLI reports every minute that an IDE
//! (`coder ssh --usage-app=vscode|jetbrains`) is using the workspace.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use uuid::Uuid;

use super::AppState;
use coderd_core::domain::activity;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Path};

pub fn routes() -> Router<AppState> {
    Router::new().route("/workspaces/{id}/usage", post(report_usage))
}

/// Coder's `PostWorkspaceUsageRequest`; the body may also be empty (older CLIs send none).
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct PostWorkspaceUsageRequest {
    pub agent_id: Uuid,
    pub app_name: String,
}

#[utoipa::path(post, path = "/api/v2/workspaces/{id}/usage", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body(content = Option<PostWorkspaceUsageRequest>),
    responses((status = 204), (status = 400, body = codersdk::Response)))]
pub(super) async fn report_usage(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let request: Option<PostWorkspaceUsageRequest> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request("Request body must be valid JSON.").with_detail(e.to_string())
        })?)
    };
    let agent_and_app = request.as_ref().map(|r| (r.agent_id, r.app_name.as_str()));
    activity::report(&state, &auth.subject, id, agent_and_app).await?;
    Ok(StatusCode::NO_CONTENT)
}
