//! Workspaces and their builds: parsing requests, calling `coderd_core::domain` and answering.

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, PutExtendWorkspaceRequest,
    ResolveAutostartResponse, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, UpdateWorkspaceBuildStateRequest, UpdateWorkspaceDormancy,
    UpdateWorkspaceTTLRequest, Workspace, WorkspaceBuild, WorkspaceBuildParameter,
    WorkspaceBuildTimings, WorkspaceResource, WorkspacesResponse,
};
use uuid::Uuid;

use super::AppState;
use super::jobs::{self, LogParams};
use coderd_authz::Action;
use coderd_core::domain::build_state;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use coderd_core::domain::render::{self, resources};
use coderd_core::domain::{resolve, schedules, search, views};
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{
    Auth, Json, Pagination, Path, Query, empty_as_none, resolve_org, resolve_user,
};
use coderd_store::WorkspaceRow;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/{user}/workspaces", post(create_workspace))
        .route(
            "/organizations/{organization}/members/{user}/workspaces",
            post(create_workspace_in_org),
        )
        .route("/workspaces", get(list_workspaces))
        .route("/workspaces/{id}", get(get_workspace))
        .route("/workspaces/{id}/autostart", put(update_autostart))
        .route("/workspaces/{id}/ttl", put(update_ttl))
        .route("/workspaces/{id}/extend", put(extend_deadline))
        .route("/workspaces/{id}/dormant", put(update_dormancy))
        .route(
            "/workspaces/{id}/autoupdates",
            put(update_automatic_updates),
        )
        .route("/workspaces/{id}/resolve-autostart", get(resolve_autostart))
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
        .route(
            "/workspacebuilds/{id}/state",
            get(build_state).put(replace_build_state),
        )
        .route("/workspacebuilds/{id}/parameters", get(build_parameters))
        .route("/workspacebuilds/{id}/timings", get(build_timings))
        .route("/workspaces/{id}/timings", get(workspace_timings))
}

/// A workspace the caller may see, or 404.
pub async fn resolve_workspace(
    state: &AppState,
    auth: &Auth,
    id: Uuid,
    include_deleted: bool,
) -> ApiResult<WorkspaceRow> {
    Ok(resolve::workspace(state, &auth.subject, id, Action::Read, include_deleted).await?)
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
    coderd_http::requests::create_workspace(&req)?;
    let owner = resolve_user(&state, &auth, user).await?;
    let org = match org {
        Some(org) => Some(resolve_org(&state, &auth, org).await?.id),
        None => None,
    };
    let row = builds::create_workspace(&state, &auth.subject, owner.id, org, &req).await?;
    Ok((
        StatusCode::CREATED,
        Json(views::workspace(&state, row).await?),
    ))
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListParams {
    #[serde(default)]
    q: String,
    #[serde(flatten)]
    page: Pagination,
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
    let (limit, offset) = params.page.resolve(i64::MAX)?;
    let (ids, count) = search::workspaces(&state, &auth.subject, &params.q, limit, offset).await?;
    let chunk = options.workspace_list_chunk.max(1);
    if ids.len() <= chunk {
        let workspaces = views::workspaces_by_ids(&state, &ids).await?;
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
    // The next chunk is read and rendered while this one is serialised, so PostgreSQL's part
    // and ours overlap on separate cores. (Should the client go away, that one chunk is read
    // for nothing.)
    let fetch = |chunk: &[Uuid]| {
        let (state, chunk) = (state.clone(), chunk.to_vec());
        tokio::spawn(async move { views::workspaces_by_ids(&state, &chunk).await })
    };
    let mut chunks = ids.chunks(chunk_size);
    let mut next = chunks.next().map(fetch);
    let (mut first, mut last_len) = (true, 0);
    while let Some(pending) = next.take() {
        next = chunks.next().map(fetch);
        let workspaces = pending.await.map_err(ApiError::internal)??;
        // Chunks are alike in size: the last one's saves growing this one step by step.
        let mut out = Vec::with_capacity(last_len);
        for workspace in workspaces {
            if !first {
                out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut out, &workspace).map_err(ApiError::internal)?;
        }
        last_len = out.len();
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
    let include_deleted = params.include_deleted.unwrap_or(false);
    Ok(Json(
        views::readable_workspace(&state, &auth.subject, id, include_deleted).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/workspace/{name}", tag = "Workspaces",
    params(("user" = String, Path), ("name" = String, Path)), responses((status = 200, body = Workspace)))]
pub(super) async fn workspace_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name)): Path<(String, String)>,
) -> ApiResult<Json<Workspace>> {
    let row = resolve::workspace_by_name(&state, &auth.subject, &user, &name, Action::Read).await?;
    Ok(Json(views::workspace(&state, row).await?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/workspace/{name}/builds/{number}", tag = "Builds",
    params(("user" = String, Path), ("name" = String, Path), ("number" = i32, Path)), responses((status = 200, body = WorkspaceBuild)))]
pub(super) async fn build_by_number(
    State(state): State<AppState>,
    auth: Auth,
    Path((user, name, number)): Path<(String, String, i32)>,
) -> ApiResult<Json<WorkspaceBuild>> {
    let (build, _) = resolve::build_by_number(&state, &auth.subject, &user, &name, number).await?;
    Ok(Json(views::build(&state, build).await?))
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
    coderd_http::requests::create_build(&req)?;
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    let transition = req.transition.parse().map_err(|_| {
        ApiError::validation(vec![codersdk::ValidationError {
            field: "transition".into(),
            detail: format!("must be start, stop or delete, not {:?}", req.transition),
        }])
    })?;
    // Validated above: empty (the initiator's build) or a reason a client may give; a
    // lifecycle reason is never taken from a request, whatever the validation table says.
    let reason = req
        .reason
        .parse::<BuildReason>()
        .ok()
        .filter(|r| r.requestable())
        .unwrap_or(BuildReason::Initiator);
    let request = BuildRequest {
        transition,
        version: req
            .template_version_id
            .map_or(VersionChoice::Previous, VersionChoice::Exact),
        parameters: req.rich_parameter_values,
        orphan: req.orphan,
        state: req.state.map(|s| s.0),
        reason,
        expect_latest: None,
        preset: req.template_version_preset_id,
        prebuild_claim: false,
    };
    let (row, job) =
        builds::create_build_and_job(&state, &auth.subject, &workspace, request).await?;
    Ok((
        StatusCode::CREATED,
        Json(views::new_build(&state, row, job).await?),
    ))
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
    Ok(Json(views::builds(&state, rows).await?))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = WorkspaceBuild)))]
pub(super) async fn get_build(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceBuild>> {
    let (build, _) = resolve::build(&state, &auth.subject, id).await?;
    Ok(Json(views::build(&state, build).await?))
}

#[utoipa::path(patch, path = "/api/v2/workspacebuilds/{id}/cancel", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response)))]
pub(super) async fn cancel_build(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::Response>> {
    let (build, workspace) = resolve::build(&state, &auth.subject, id).await?;
    builds::cancel_build(&state, &auth.subject, &build, &workspace).await?;
    Ok(Json(codersdk::Response::new(
        "Job has been marked as canceled...",
    )))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/logs", tag = "Builds",
    params(("id" = Uuid, Path), ("after" = Option<i64>, Query), ("follow" = Option<bool>, Query, description = "true streams the lines live over a WebSocket; the request must then be a WebSocket upgrade (400 otherwise)")),
    responses((status = 200, body = [codersdk::provisioners::ProvisionerJobLog])))]
pub(super) async fn build_logs(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<LogParams>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let (build, _) = resolve::build(&state, &auth.subject, id).await?;
    jobs::logs(state, build.job_id, params, ws.ok()).await
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/resources", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = [WorkspaceResource])))]
pub(super) async fn build_resources(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<WorkspaceResource>>> {
    let (build, _) = resolve::build(&state, &auth.subject, id).await?;
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
    let bytes = build_state::read(&state, &auth.subject, id).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

#[utoipa::path(put, path = "/api/v2/workspacebuilds/{id}/state", tag = "Builds",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceBuildStateRequest,
    responses((status = 204), (status = 400, body = codersdk::Response)))]
pub(super) async fn replace_build_state(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceBuildStateRequest>,
) -> ApiResult<StatusCode> {
    build_state::replace(&state, &auth.subject, id, &req.state.0).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/parameters", tag = "Builds",
    params(("id" = Uuid, Path)), responses((status = 200, body = [WorkspaceBuildParameter])))]
pub(super) async fn build_parameters(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<WorkspaceBuildParameter>>> {
    let (build, _) = resolve::build(&state, &auth.subject, id).await?;
    let values = state.store.build_parameters(build.id).await?;
    Ok(Json(
        values
            .into_iter()
            .map(|(name, value)| WorkspaceBuildParameter { name, value })
            .collect(),
    ))
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/autostart", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceAutostartRequest,
    responses((status = 204), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_autostart(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceAutostartRequest>,
) -> ApiResult<StatusCode> {
    coderd_http::requests::update_autostart(&req)?;
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    schedules::set_autostart(&state, &auth.subject, &workspace, req.schedule.as_deref()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/ttl", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceTTLRequest,
    responses((status = 204), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_ttl(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceTTLRequest>,
) -> ApiResult<StatusCode> {
    coderd_http::requests::update_ttl(&req)?;
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    schedules::set_ttl(&state, &auth.subject, &workspace, req.ttl_ms).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/extend", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = PutExtendWorkspaceRequest,
    responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response),
        (status = 409, body = codersdk::Response)))]
pub(super) async fn extend_deadline(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<PutExtendWorkspaceRequest>,
) -> ApiResult<Json<codersdk::Response>> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    let deadline = schedules::extend(&state, &auth.subject, &workspace, req.deadline).await?;
    Ok(Json(codersdk::Response::new(format!(
        "Deadline updated to {}.",
        deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))))
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/dormant", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceDormancy,
    responses((status = 200, body = Workspace), (status = 304)))]
pub(super) async fn update_dormancy(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceDormancy>,
) -> ApiResult<Response> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    if !schedules::set_dormant(&state, &auth.subject, &workspace, req.dormant).await? {
        return Ok(StatusCode::NOT_MODIFIED.into_response());
    }
    let row = resolve_workspace(&state, &auth, id, false).await?;
    Ok(Json(views::workspace(&state, row).await?).into_response())
}

#[utoipa::path(put, path = "/api/v2/workspaces/{id}/autoupdates", tag = "Workspaces",
    params(("id" = Uuid, Path)), request_body = UpdateWorkspaceAutomaticUpdatesRequest,
    responses((status = 204), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_automatic_updates(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateWorkspaceAutomaticUpdatesRequest>,
) -> ApiResult<StatusCode> {
    coderd_http::requests::update_automatic_updates(&req)?;
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    schedules::set_automatic_updates(&state, &auth.subject, &workspace, &req.automatic_updates)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v2/workspaces/{id}/resolve-autostart", tag = "Workspaces",
    params(("id" = Uuid, Path)), responses((status = 200, body = ResolveAutostartResponse)))]
pub(super) async fn resolve_autostart(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<ResolveAutostartResponse>> {
    let workspace = resolve_workspace(&state, &auth, id, false).await?;
    let parameter_mismatch =
        schedules::resolve_autostart(&state, &auth.subject, &workspace).await?;
    Ok(Json(ResolveAutostartResponse { parameter_mismatch }))
}

#[utoipa::path(get, path = "/api/v2/workspacebuilds/{id}/timings", tag = "Builds",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = WorkspaceBuildTimings),
              (status = 404, body = codersdk::Response, description = "no such build, or not visible to the caller")))]
pub(super) async fn build_timings(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceBuildTimings>> {
    let (build, _) = resolve::build(&state, &auth.subject, id).await?;
    let timings = state.store.build_timings(build.id).await?;
    Ok(Json(render::build_timings(timings)))
}

#[utoipa::path(get, path = "/api/v2/workspaces/{id}/timings", tag = "Workspaces",
    params(("id" = Uuid, Path)),
    responses((status = 200, body = WorkspaceBuildTimings, description = "The timings of the workspace's latest build"),
              (status = 404, body = codersdk::Response)))]
pub(super) async fn workspace_timings(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WorkspaceBuildTimings>> {
    let workspace = resolve::workspace(&state, &auth.subject, id, Action::Read, false).await?;
    let latest = state
        .store
        .latest_builds(&[workspace.id])
        .await?
        .pop()
        .ok_or_else(ApiError::not_found)?;
    let timings = state.store.build_timings(latest.id).await?;
    Ok(Json(render::build_timings(timings)))
}
