//! Dev containers in the API: `GET /api/v2/workspaceagents/{id}/containers`, answered from
//! what the build recorded. Coder asks the agent, which starts each `coder_devcontainer` with
//! a container engine and reports it running; coder-rs runs none (its hosts have no
//! container engine), so each is shown in Coder's shape with status `error` and the reason,
//! never silently absent or pretending to start. Its `agent` is the sub-agent the build
//! recorded for it (see `store::subagents`), which never connects. Asking to recreate one
//! (`POST .../containers/devcontainers/{devcontainer}/recreate`, Coder's 202) is refused
//! with 501 and the same reason, for whoever may connect to the workspace.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use codersdk::workspaces::{
    WorkspaceAgentDevcontainer, WorkspaceAgentDevcontainerAgent,
    WorkspaceAgentListContainersResponse,
};
use uuid::Uuid;

use coderd_authz::Action;
use coderd_core::devcontainers::NOT_RUN;
use coderd_core::domain::{self, resolve};
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaceagents/{id}/containers", get(containers))
        .route(
            "/workspaceagents/{id}/containers/devcontainers/{devcontainer}/recreate",
            post(recreate_devcontainer),
        )
}

#[utoipa::path(get, path = "/api/v2/workspaceagents/{id}/containers", tag = "Agents",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = WorkspaceAgentListContainersResponse)))]
pub(crate) async fn containers(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceAgentListContainersResponse>> {
    resolve::agent(&state, &auth.subject, id, Action::Read).await?;
    let rows = state
        .store
        .agent_devcontainers(id)
        .await
        .map_err(domain::Error::from)?;
    Ok(Json(WorkspaceAgentListContainersResponse {
        devcontainers: rows
            .into_iter()
            .map(|row| WorkspaceAgentDevcontainer {
                id: row.id,
                name: row.name,
                workspace_folder: row.workspace_folder,
                config_path: row.config_path,
                status: "error".into(),
                dirty: false,
                error: NOT_RUN.into(),
                agent: row.subagent_id.map(|id| WorkspaceAgentDevcontainerAgent {
                    id,
                    name: row.subagent_name.unwrap_or_default(),
                    directory: row.subagent_directory.unwrap_or_default(),
                }),
            })
            .collect(),
        containers: Vec::new(),
        warnings: Vec::new(),
    }))
}

/// Recreate a dev container: refused, with the reason (no container engine to run it).
///
/// Coder accepts (202) and has the agent start the container again; here nothing could start
/// it, so the answer says why instead of accepting work that would never happen.
#[utoipa::path(post,
    path = "/api/v2/workspaceagents/{id}/containers/devcontainers/{devcontainer}/recreate",
    tag = "Agents",
    params(("id" = Uuid, Path), ("devcontainer" = Uuid, Path)),
    responses((status = 501, description = "No container engine to recreate it with")))]
pub(crate) async fn recreate_devcontainer(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, devcontainer)): Path<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    // Recreating runs commands in the workspace, as a connection would.
    resolve::agent(&state, &auth.subject, id, Action::Connect).await?;
    let known = state
        .store
        .agent_devcontainers(id)
        .await
        .map_err(domain::Error::from)?
        .iter()
        .any(|row| row.id == devcontainer);
    if !known {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "Dev container not found.",
        ));
    }
    Err(ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "Cannot recreate the dev container.",
    )
    .with_detail(NOT_RUN))
}
