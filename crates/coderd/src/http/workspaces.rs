//! Workspaces and their builds.

use std::collections::HashMap;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace, WorkspaceBuild,
    WorkspaceBuildParameter, WorkspaceHealth, WorkspaceResource, WorkspaceStatus,
    WorkspacesResponse,
};
use uuid::Uuid;

use super::AppState;
use super::extract::{Auth, Json, Pagination, Query, empty_as_none, resolve_org, resolve_user};
use super::jobs::{self, LogParams};
use crate::authz::{Action, Object, Resource};
use crate::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use crate::domain::render::{build_status, resources};
use crate::error::{ApiError, ApiResult};
use crate::store::{self, BuildRow, DaemonRow, JobRow, ResourceTree, WorkspaceQuery, WorkspaceRow};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/{user}/workspaces", post(create_workspace))
        .route(
            "/organizations/{organization}/members/{user}/workspaces",
            post(create_workspace_in_org),
        )
        .route("/workspaces", get(list_workspaces))
        .route("/workspaces/{id}", get(get_workspace))
        .route("/users/{user}/workspace/{name}", get(workspace_by_name))
        .route(
            "/users/{user}/workspace/{name}/builds/{number}",
            get(build_by_number),
        )
        .route(
            "/workspaces/{id}/builds",
            get(list_builds).post(create_build),
        )
        .route("/workspacebuilds/{id}", get(get_build))
        .route("/workspacebuilds/{id}/cancel", patch(cancel_build))
        .route("/workspacebuilds/{id}/logs", get(build_logs))
        .route("/workspacebuilds/{id}/resources", get(build_resources))
        .route("/workspacebuilds/{id}/state", get(build_state))
        .route("/workspacebuilds/{id}/parameters", get(build_parameters))
}

/// Everything needed to render builds in bulk: their jobs, resources and the daemons.
struct BuildContext {
    jobs: HashMap<Uuid, JobRow>,
    resources: HashMap<Uuid, Vec<ResourceTree>>,
    daemons: Vec<DaemonRow>,
}

async fn build_context(state: &AppState, builds: &[BuildRow]) -> ApiResult<BuildContext> {
    let job_ids: Vec<Uuid> = builds.iter().map(|b| b.job_id).collect();
    let jobs = state.store.jobs_by_ids(&job_ids).await?;
    let trees = state.store.resources_of_jobs(&job_ids).await?;
    let mut resources: HashMap<Uuid, Vec<ResourceTree>> = HashMap::new();
    for tree in trees {
        resources
            .entry(tree.resource.job_id)
            .or_default()
            .push(tree);
    }
    let orgs: std::collections::HashSet<Uuid> = jobs.iter().map(|j| j.organization_id).collect();
    let daemons = if orgs.len() == 1 {
        state
            .store
            .daemons(orgs.iter().next().copied(), None)
            .await?
    } else {
        state.store.daemons(None, None).await?
    };
    Ok(BuildContext {
        jobs: jobs.into_iter().map(|j| (j.id, j)).collect(),
        resources,
        daemons,
    })
}

async fn render_build(
    state: &AppState,
    row: BuildRow,
    ctx: &mut BuildContext,
) -> ApiResult<WorkspaceBuild> {
    let job = ctx
        .jobs
        .get(&row.job_id)
        .cloned()
        .ok_or_else(|| ApiError::internal(format!("build {} has no job", row.id)))?;
    let rendered = jobs::render(state, &job, &ctx.daemons).await?;
    let (_, matched) = jobs::matched(state, &job, &ctx.daemons);
    let status = build_status(&row.transition, rendered.status);
    Ok(WorkspaceBuild {
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        workspace_id: row.workspace_id,
        workspace_name: row.workspace_name,
        workspace_owner_id: row.workspace_owner_id,
        workspace_owner_name: row.owner_username,
        workspace_owner_avatar_url: row.owner_avatar_url,
        template_version_id: row.template_version_id,
        template_version_name: row.template_version_name,
        build_number: row.build_number,
        transition: row.transition,
        initiator_id: row.initiator_id,
        initiator_name: row.initiator_username,
        job: rendered,
        reason: row.reason,
        resources: resources(ctx.resources.remove(&row.job_id).unwrap_or_default()),
        deadline: row.deadline,
        max_deadline: row.max_deadline,
        status,
        daily_cost: row.daily_cost,
        matched_provisioners: Some(matched),
    })
}

pub async fn render_builds(
    state: &AppState,
    rows: Vec<BuildRow>,
) -> ApiResult<Vec<WorkspaceBuild>> {
    let mut ctx = build_context(state, &rows).await?;
    let mut builds = Vec::with_capacity(rows.len());
    for row in rows {
        builds.push(render_build(state, row, &mut ctx).await?);
    }
    Ok(builds)
}

fn workspace(row: WorkspaceRow, latest_build: WorkspaceBuild) -> Workspace {
    let failing_agents: Vec<Uuid> = latest_build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .filter(|a| !a.health.healthy && latest_build.status == WorkspaceStatus::Running)
        .map(|a| a.id)
        .collect();
    Workspace {
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        owner_id: row.owner_id,
        owner_name: row.owner_username,
        owner_avatar_url: row.owner_avatar_url,
        organization_id: row.organization_id,
        organization_name: row.organization_name,
        template_id: row.template_id,
        template_name: row.template_name,
        template_display_name: row.template_display_name,
        template_icon: row.template_icon,
        template_allow_user_cancel_workspace_jobs: row.template_allow_user_cancel_workspace_jobs,
        template_active_version_id: row.template_active_version_id,
        template_require_active_version: false,
        outdated: latest_build.template_version_id != row.template_active_version_id,
        latest_build,
        name: row.name,
        autostart_schedule: row.autostart_schedule,
        ttl_ms: row.ttl_ms,
        last_used_at: row.last_used_at,
        deleting_at: None,
        dormant_at: None,
        health: WorkspaceHealth {
            healthy: failing_agents.is_empty(),
            failing_agents,
        },
        automatic_updates: row.automatic_updates,
        allow_renames: false,
        favorite: false,
    }
}

/// Renders workspaces with their latest builds, in bulk.
async fn render_workspaces(state: &AppState, rows: Vec<WorkspaceRow>) -> ApiResult<Vec<Workspace>> {
    let ids: Vec<Uuid> = rows.iter().map(|w| w.id).collect();
    let latest = state.store.latest_builds(&ids).await?;
    let mut builds: HashMap<Uuid, WorkspaceBuild> = render_builds(state, latest)
        .await?
        .into_iter()
        .map(|b| (b.workspace_id, b))
        .collect();
    rows.into_iter()
        .map(|row| {
            let build = builds
                .remove(&row.id)
                .ok_or_else(|| ApiError::internal(format!("workspace {} has no build", row.id)))?;
            Ok(workspace(row, build))
        })
        .collect()
}

fn workspace_object(row: &WorkspaceRow) -> Object {
    Object::owned(Resource::Workspace, Some(row.organization_id), row.owner_id)
}

/// A workspace the caller may see, or 404.
pub async fn resolve_workspace(
    state: &AppState,
    auth: &Auth,
    id: Uuid,
    include_deleted: bool,
) -> ApiResult<WorkspaceRow> {
    let row = state.store.workspace_by_id(id, include_deleted).await?;
    auth.authorize(Action::Read, &workspace_object(&row))?;
    Ok(row)
}

/// A build (and its workspace) the caller may see, or 404.
async fn resolve_build(
    state: &AppState,
    auth: &Auth,
    id: Uuid,
) -> ApiResult<(BuildRow, WorkspaceRow)> {
    let build = state.store.build_by_id(id).await?;
    let workspace = resolve_workspace(state, auth, build.workspace_id, true).await?;
    Ok((build, workspace))
}

#[utoipa::path(post, path = "/api/v2/users/{user}/workspaces", tag = "Workspaces",
    params(("user" = String, Path)), request_body = CreateWorkspaceRequest,
    responses((status = 201, body = Workspace), (status = 400, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(super) async fn create_workspace(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<CreateWorkspaceRequest>,
) -> ApiResult<(StatusCode, Json<Workspace>)> {
    create(state, auth, None, &user, req).await
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/members/{user}/workspaces", tag = "Workspaces",
    params(("organization" = String, Path), ("user" = String, Path)), request_body = CreateWorkspaceRequest,
    responses((status = 201, body = Workspace)))]
pub(super) async fn create_workspace_in_org(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, user)): Path<(String, String)>,
    Json(req): Json<CreateWorkspaceRequest>,
) -> ApiResult<(StatusCode, Json<Workspace>)> {
    create(state, auth, Some(&org), &user, req).await
}

async fn create(
    state: AppState,
    auth: Auth,
    org: Option<&str>,
    user: &str,
    req: CreateWorkspaceRequest,
) -> ApiResult<(StatusCode, Json<Workspace>)> {
    let owner = resolve_user(&state, &auth, user).await?;
    let org = match org {
        Some(org) => Some(resolve_org(&state, &auth, org).await?.id),
        None => None,
    };
    let row = builds::create_workspace(&state, &auth.subject, owner.id, org, &req).await?;
    let mut rendered = render_workspaces(&state, vec![row]).await?;
    let workspace = rendered
        .pop()
        .ok_or_else(|| ApiError::internal("created workspace vanished"))?;
    Ok((StatusCode::CREATED, Json(workspace)))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListParams {
    #[serde(default)]
    q: String,
    #[serde(flatten)]
    page: Pagination,
}

/// Parses Coder's workspace search: `owner:me name:dev template:docker status:running`.
async fn parse_query(state: &AppState, auth: &Auth, q: &str) -> ApiResult<WorkspaceQuery> {
    let mut query = WorkspaceQuery::default();
    let bad = |detail: String| {
        ApiError::bad_request("Invalid workspace search query.").with_detail(detail)
    };
    for term in q.split_whitespace() {
        match term.split_once(':') {
            Some(("owner", "me")) => query.owner = Some(auth.user.id),
            Some(("owner", name)) => {
                query.owner = Some(match state.store.user_by_username(name).await {
                    Ok(u) => u.id,
                    // An unknown owner matches nothing rather than everything.
                    Err(store::Error::NotFound) => Uuid::nil(),
                    Err(e) => return Err(e.into()),
                })
            }
            Some(("name", v)) => query.name = v.to_string(),
            Some(("template", v)) => query.template = v.to_string(),
            Some(("status", v)) => {
                v.parse::<WorkspaceStatus>().map_err(bad)?;
                query.status = v.to_string();
            }
            Some(("deleted", v)) => query.deleted = v == "true",
            Some((key, _)) => return Err(bad(format!("unknown filter {key:?}"))),
            None => query.name = term.to_string(),
        }
    }
    Ok(query)
}

#[utoipa::path(get, path = "/api/v2/workspaces", tag = "Workspaces",
    params(("q" = Option<String>, Query), ("limit" = Option<i64>, Query), ("offset" = Option<i64>, Query)),
    responses((status = 200, body = WorkspacesResponse)))]
pub(super) async fn list_workspaces(
    State(state): State<AppState>,
    Extension(options): Extension<super::Options>,
    auth: Auth,
    Query(params): Query<ListParams>,
) -> ApiResult<Response> {
    let mut query = parse_query(&state, &auth, &params.q).await?;
    (query.limit, query.offset) = params.page.resolve(i64::MAX)?;
    let filter = auth.subject.filter(Resource::Workspace);
    let (ids, count) = state.store.list_workspace_ids(&query, &filter).await?;
    let chunk = options.workspace_list_chunk.max(1);
    if ids.len() <= chunk {
        let rows = state.store.workspaces_by_ids(&ids).await?;
        let workspaces = render_workspaces(&state, rows).await?;
        return Ok(Json(WorkspacesResponse { workspaces, count }).into_response());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(2);
    tokio::spawn(async move {
        if let Err(e) = stream_workspaces(&state, &ids, chunk, count, &tx).await {
            // The status line is long gone; cutting the body short makes the client's JSON
            // parse fail instead of silently missing workspaces.
            tracing::warn!(error = ?e.body, "streaming the workspace list failed");
            let _ = tx
                .send(Err(std::io::Error::other("workspace list failed")))
                .await;
        }
    });
    let body = axum::body::Body::from_stream(tokio_stream_of(rx));
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Writes `{"workspaces":[...],"count":N}` chunk by chunk.
async fn stream_workspaces(
    state: &AppState,
    ids: &[Uuid],
    chunk_size: usize,
    count: i64,
    tx: &tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
) -> ApiResult<()> {
    let send = |chunk: Vec<u8>| async move {
        tx.send(Ok(bytes::Bytes::from(chunk)))
            .await
            .map_err(|_| ApiError::internal("client went away"))
    };
    send(br#"{"workspaces":["#.to_vec()).await?;
    let mut first = true;
    for chunk in ids.chunks(chunk_size) {
        let rows = state.store.workspaces_by_ids(chunk).await?;
        let mut out = Vec::new();
        for workspace in render_workspaces(state, rows).await? {
            if !first {
                out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut out, &workspace).map_err(ApiError::internal)?;
        }
        send(out).await?;
    }
    send(format!(r#"],"count":{count}}}"#).into_bytes()).await
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct GetParams {
    #[serde(default, deserialize_with = "empty_as_none")]
    include_deleted: Option<bool>,
}

#[utoipa::path(get, path = "/api/v2/workspaces/{id}", tag = "Workspaces",
    params(("id" = Uuid, Path), ("include_deleted" = Option<bool>, Query)), responses((status = 200, body = Workspace)))]
pub(super) async fn get_workspace(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<GetParams>,
) -> ApiResult<Json<Workspace>> {
    let row = resolve_workspace(&state, &auth, id, params.include_deleted.unwrap_or(false)).await?;
    let mut rendered = render_workspaces(&state, vec![row]).await?;
    Ok(Json(rendered.pop().ok_or_else(ApiError::not_found)?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/workspace/{name}", tag = "Workspaces",
    params(("user" = String, Path), ("name" = String, Path)), responses((status = 200, body = Workspace)))]
pub(super) async fn workspace_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<Json<Workspace>> {
    let owner = resolve_user(&state, &auth, &user).await?;
    let row = state
        .store
        .workspace_by_owner_and_name(owner.id, &name)
        .await?;
    auth.authorize(Action::Read, &workspace_object(&row))?;
    let mut rendered = render_workspaces(&state, vec![row]).await?;
    Ok(Json(rendered.pop().ok_or_else(ApiError::not_found)?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/workspace/{name}/builds/{number}", tag = "Builds",
    params(("user" = String, Path), ("name" = String, Path), ("number" = i32, Path)), responses((status = 200, body = WorkspaceBuild)))]
pub(super) async fn build_by_number(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name, number)): Path<(String, String, i32)>,
) -> ApiResult<Json<WorkspaceBuild>> {
    let owner = resolve_user(&state, &auth, &user).await?;
    let workspace = state
        .store
        .workspace_by_owner_and_name(owner.id, &name)
        .await?;
    auth.authorize(Action::Read, &workspace_object(&workspace))?;
    let builds = state.store.builds_of(workspace.id, i64::MAX, 0).await?;
    let build = builds
        .into_iter()
        .find(|b| b.build_number == number)
        .ok_or_else(ApiError::not_found)?;
    let mut rendered = render_builds(&state, vec![build]).await?;
    Ok(Json(rendered.pop().ok_or_else(ApiError::not_found)?))
}

#[utoipa::path(post, path = "/api/v2/workspaces/{id}/builds", tag = "Builds",
    params(("id" = Uuid, Path)), request_body = CreateWorkspaceBuildRequest,
    responses((status = 201, body = WorkspaceBuild), (status = 400, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(super) async fn create_build(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<CreateWorkspaceBuildRequest>,
) -> ApiResult<(StatusCode, Json<WorkspaceBuild>)> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    let transition = req.transition.parse().map_err(|_| {
        ApiError::validation(vec![codersdk::ValidationError {
            field: "transition".into(),
            detail: format!("must be start, stop or delete, not {:?}", req.transition),
        }])
    })?;
    let reason = match req.reason.as_str() {
        "" => BuildReason::Initiator,
        asked => asked
            .parse::<BuildReason>()
            .ok()
            .filter(|r| r.requestable())
            .ok_or_else(|| {
                ApiError::validation(vec![codersdk::ValidationError {
                    field: "reason".into(),
                    detail: format!(
                        "must be dashboard, cli, ssh_connection, vscode_connection or \
                         jetbrains_connection, not {asked:?}"
                    ),
                }])
            })?,
    };
    let request = BuildRequest {
        transition,
        version: req
            .template_version_id
            .map_or(VersionChoice::Previous, VersionChoice::Exact),
        parameters: req.rich_parameter_values,
        orphan: req.orphan,
        reason,
    };
    let row = builds::create_build(&state, &auth.subject, &workspace, request).await?;
    let mut rendered = render_builds(&state, vec![row]).await?;
    let build = rendered
        .pop()
        .ok_or_else(|| ApiError::internal("created build vanished"))?;
    Ok((StatusCode::CREATED, Json(build)))
}

#[utoipa::path(get, path = "/api/v2/workspaces/{id}/builds", tag = "Builds",
    params(("id" = Uuid, Path), ("limit" = Option<i64>, Query), ("offset" = Option<i64>, Query)),
    responses((status = 200, body = [WorkspaceBuild])))]
pub(super) async fn list_builds(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(page): Query<Pagination>,
) -> ApiResult<Json<Vec<WorkspaceBuild>>> {
    let workspace = resolve_workspace(&state, &auth, id, true).await?;
    let (limit, offset) = page.resolve(i64::MAX)?;
    let rows = state.store.builds_of(workspace.id, limit, offset).await?;
    Ok(Json(render_builds(&state, rows).await?))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = WorkspaceBuild)))]
pub(super) async fn get_build(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceBuild>> {
    let (build, _) = resolve_build(&state, &auth, id).await?;
    let mut rendered = render_builds(&state, vec![build]).await?;
    Ok(Json(rendered.pop().ok_or_else(ApiError::not_found)?))
}

#[utoipa::path(patch, path = "/api/v2/workspacebuilds/{id}/cancel", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response)))]
pub(super) async fn cancel_build(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::Response>> {
    let (build, workspace) = resolve_build(&state, &auth, id).await?;
    builds::cancel_build(&state, &auth.subject, &build, &workspace).await?;
    Ok(Json(codersdk::Response::new(
        "Job has been marked as canceled...",
    )))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/logs", tag = "Builds",
    params(("id" = Uuid, Path), ("after" = Option<i64>, Query), ("follow" = Option<bool>, Query)),
    responses((status = 200, body = [codersdk::provisioners::ProvisionerJobLog])))]
pub(super) async fn build_logs(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<LogParams>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let (build, _) = resolve_build(&state, &auth, id).await?;
    jobs::logs(state, build.job_id, params, ws.ok()).await
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/resources", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = [WorkspaceResource])))]
pub(super) async fn build_resources(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<WorkspaceResource>>> {
    let (build, _) = resolve_build(&state, &auth, id).await?;
    Ok(Json(resources(
        state.store.resources_of_jobs(&[build.job_id]).await?,
    )))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/state", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, content_type = "application/json")))]
pub(super) async fn build_state(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    let (build, workspace) = resolve_build(&state, &auth, id).await?;
    // The state holds secrets of every resource: only those who may change the template see it.
    auth.authorize(
        Action::Update,
        &Object::in_org(Resource::Template, workspace.organization_id),
    )?;
    let bytes = state.store.build_state(build.id).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/parameters", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = [WorkspaceBuildParameter])))]
pub(super) async fn build_parameters(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<WorkspaceBuildParameter>>> {
    let (build, _) = resolve_build(&state, &auth, id).await?;
    let values = state.store.build_parameters(build.id).await?;
    Ok(Json(
        values
            .into_iter()
            .map(|(name, value)| WorkspaceBuildParameter { name, value })
            .collect(),
    ))
}
