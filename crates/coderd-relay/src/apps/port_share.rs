//! Port sharing (`GET/POST/DELETE /api/v2/workspaces/{workspace}/port-share`): a workspace's
//! updaters open one of its agents' ports to `authenticated` users, the workspace's
//! `organization` or the `public`, never beyond the template's `max_port_share_level`. The app
//! proxy reads the share when a port URL is opened and caps it by the template's level again,
//! so lowering the template's maximum narrows existing shares at once.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use codersdk::portsharing::{
    DeleteWorkspaceAgentPortShareRequest, UpsertWorkspaceAgentPortShareRequest,
    WorkspaceAgentPortShare, WorkspaceAgentPortShares,
};
use uuid::Uuid;

use super::access::Sharing;
use coderd_authz::Action;
use coderd_core::domain::{self, resolve};
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path};
use coderd_store::{PortShareRow, WorkspaceRow};

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/workspaces/{workspace}/port-share",
        get(list).post(upsert).delete(remove),
    )
}

fn render(row: PortShareRow) -> WorkspaceAgentPortShare {
    WorkspaceAgentPortShare {
        workspace_id: row.workspace_id,
        agent_name: row.agent_name,
        port: row.port,
        share_level: row.share_level,
        protocol: row.protocol,
    }
}

/// The lowest port Coder lets anyone share (below are well-known services).
const MIN_PORT: i32 = 9;

#[utoipa::path(get, path = "/api/v2/workspaces/{workspace}/port-share", tag = "PortSharing",
    params(("workspace" = Uuid, Path)),
    responses((status = 200, body = WorkspaceAgentPortShares)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceAgentPortShares>> {
    let ws = resolve::workspace(&state, &auth.subject, id, Action::Read, false).await?;
    let rows = state
        .store
        .port_shares(ws.id)
        .await
        .map_err(domain::Error::from)?;
    Ok(Json(WorkspaceAgentPortShares {
        shares: rows.into_iter().map(render).collect(),
    }))
}

/// The names of the agents of the workspace's latest build.
async fn agent_names(state: &AppState, ws: &WorkspaceRow) -> ApiResult<Vec<String>> {
    let builds = state
        .store
        .latest_builds(&[ws.id])
        .await
        .map_err(domain::Error::from)?;
    let jobs: Vec<Uuid> = builds.iter().map(|b| b.job_id).collect();
    let trees = state
        .store
        .resources_of_jobs(&jobs)
        .await
        .map_err(domain::Error::from)?;
    Ok(trees
        .into_iter()
        .flat_map(|t| t.agents)
        .map(|a| a.agent.name)
        .collect())
}

fn invalid(field: &str, detail: impl Into<String>) -> ApiError {
    ApiError::validation(vec![codersdk::ValidationError {
        field: field.into(),
        detail: detail.into(),
    }])
}

#[utoipa::path(post, path = "/api/v2/workspaces/{workspace}/port-share", tag = "PortSharing",
    params(("workspace" = Uuid, Path)),
    request_body = UpsertWorkspaceAgentPortShareRequest,
    responses((status = 200, body = WorkspaceAgentPortShare)))]
pub(crate) async fn upsert(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpsertWorkspaceAgentPortShareRequest>,
) -> ApiResult<Json<WorkspaceAgentPortShare>> {
    let ws = resolve::workspace(&state, &auth.subject, id, Action::Update, false).await?;
    if !(MIN_PORT..=65535).contains(&req.port) {
        return Err(invalid(
            "port",
            format!("must be between {MIN_PORT} and 65535"),
        ));
    }
    let level = match req.share_level.as_str() {
        "owner" | "authenticated" | "organization" | "public" => Sharing::parse(&req.share_level),
        _ => {
            return Err(invalid(
                "share_level",
                "must be one of owner, authenticated, organization, public",
            ));
        }
    };
    let protocol = match req.protocol.as_str() {
        "" | "http" => "http",
        "https" => "https",
        _ => return Err(invalid("protocol", "must be http or https")),
    };
    let template = state
        .store
        .template_by_id(ws.template_id)
        .await
        .map_err(domain::Error::from)?;
    if level > Sharing::parse(&template.max_port_share_level) {
        return Err(ApiError::bad_request(format!(
            "The template allows sharing ports at most at level {:?}.",
            template.max_port_share_level
        )));
    }
    if !agent_names(&state, &ws).await?.contains(&req.agent_name) {
        return Err(invalid(
            "agent_name",
            "no agent of the workspace has this name",
        ));
    }
    let row = state
        .store
        .upsert_port_share(&PortShareRow {
            workspace_id: ws.id,
            agent_name: req.agent_name,
            port: req.port,
            share_level: req.share_level,
            protocol: protocol.into(),
        })
        .await
        .map_err(domain::Error::from)?;
    Ok(Json(render(row)))
}

#[utoipa::path(delete, path = "/api/v2/workspaces/{workspace}/port-share", tag = "PortSharing",
    params(("workspace" = Uuid, Path)),
    request_body = DeleteWorkspaceAgentPortShareRequest,
    responses((status = 200, description = "the share is gone")))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<DeleteWorkspaceAgentPortShareRequest>,
) -> ApiResult<StatusCode> {
    let ws = resolve::workspace(&state, &auth.subject, id, Action::Update, false).await?;
    let removed = state
        .store
        .delete_port_share(ws.id, &req.agent_name, req.port)
        .await
        .map_err(domain::Error::from)?;
    if !removed {
        return Err(ApiError::bad_request("The port is not shared."));
    }
    Ok(StatusCode::OK)
}
