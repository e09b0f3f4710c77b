//! Workspaces and their builds.

use std::collections::HashMap;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace, WorkspaceBuild,
    WorkspaceBuildParameter, WorkspaceHealth, WorkspaceResource, WorkspaceStatus,
    WorkspacesResponse,
};
use uuid::Uuid;

use super::AppState;
use super::extract::{Auth, Json, Pagination, Query, empty_as_none, resolve_org, resolve_user};
use super::jobs::{self, LogParams};
use super::parameters;
use super::templates::rich_parameters;
use crate::authz::{Action, Object, Resource};
use crate::domain::render::{build_status, job_status, resources};
use crate::error::{ApiError, ApiResult, Validator};
use crate::provisioners::tags;
use crate::store::{
    self, BuildRow, DaemonRow, JobRow, NewBuild, NewJob, NewWorkspace, ResourceTree,
    WorkspaceQuery, WorkspaceRow,
};
use crate::validate;

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

/// The version a build runs: the one asked for (which must belong to the workspace's template
/// and be imported), else the previous build's.
async fn build_version(
    state: &AppState,
    template: (Uuid, Uuid),
    requested: Option<Uuid>,
    previous: Option<&BuildRow>,
) -> ApiResult<(store::TemplateVersionRow, JobRow)> {
    let (template_id, active_version_id) = template;
    let id = match (requested, previous) {
        (Some(id), _) => id,
        (None, Some(prev)) => prev.template_version_id,
        (None, None) => active_version_id,
    };
    let version = state
        .store
        .template_version_by_id(id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => ApiError::bad_request("Template version does not exist.")
                .with_detail(format!("no template version {id}")),
            other => other.into(),
        })?;
    if version.template_id != Some(template_id) {
        return Err(ApiError::bad_request(
            "The template version does not belong to the workspace's template.",
        ));
    }
    let job = state.store.job_by_id(version.job_id).await?;
    let status = job_status(&job);
    if status != ProvisionerJobStatus::Succeeded {
        return Err(ApiError::bad_request(
            "The template version has not been imported successfully.",
        )
        .with_detail(
            job.error
                .unwrap_or_else(|| format!("its import is {}", status.as_str())),
        ));
    }
    Ok((version, job))
}

/// The job of a build: the version's provisioner and file, its tags with the owner filled in.
/// `import` is the version's import job: a build runs with its provisioner, file and tags.
fn build_job(
    (org, owner): (Uuid, Uuid),
    import: JobRow,
    build_id: Uuid,
    initiator: Uuid,
) -> NewJob {
    let version_tags: codersdk::provisionerd::Tags =
        serde_json::from_value(import.tags).unwrap_or_default();
    // The version's tags, re-normalised for the workspace owner: a user-scoped template builds on
    // the owner's daemons.
    let job_tags = tags::normalize(version_tags, Some(owner));
    NewJob {
        id: Uuid::new_v4(),
        organization_id: org,
        initiator_id: initiator,
        provisioner: import.provisioner,
        file_id: import.file_id,
        job_type: "workspace_build",
        input: serde_json::json!({ "workspace_build_id": build_id }),
        tags_key: tags::key(&job_tags),
        tags: serde_json::to_value(&job_tags).unwrap_or_default(),
    }
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
        Some(org) => Some(resolve_org(&state, &auth, org).await?),
        None => None,
    };
    Validator::default()
        .push("name", validate::name(&req.name))
        .check(
            req.ttl_ms.unwrap_or(0) >= 0,
            "ttl_ms",
            "must not be negative",
        )
        .check(
            req.template_id.is_some() || req.template_version_id.is_some(),
            "template_id",
            "a template_id or template_version_id is required",
        )
        .finish()?;
    let template_id = match (req.template_id, req.template_version_id) {
        (Some(id), _) => id,
        (None, Some(version)) => state
            .store
            .template_version_by_id(version)
            .await
            .map_err(|_| ApiError::bad_request("Template version does not exist."))?
            .template_id
            .ok_or_else(|| {
                ApiError::bad_request("The template version does not belong to a template.")
            })?,
        (None, None) => return Err(ApiError::bad_request("A template is required.")),
    };
    let template = state
        .store
        .template_by_id(template_id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => ApiError::bad_request("Template does not exist.")
                .with_detail(format!("no template {template_id}")),
            other => other.into(),
        })?;
    if org
        .as_ref()
        .is_some_and(|o| o.id != template.organization_id)
    {
        return Err(ApiError::bad_request(
            "The template belongs to another organization.",
        ));
    }
    let template_object = Object::in_org(Resource::Template, template.organization_id);
    if !auth.can(Action::Read, &template_object) {
        return Err(ApiError::bad_request("Template does not exist.")
            .with_detail(format!("no template {template_id}")));
    }
    auth.authorize(Action::Use, &template_object)?;
    auth.authorize(
        Action::Create,
        &Object::owned(
            Resource::Workspace,
            Some(template.organization_id),
            owner.id,
        ),
    )?;
    let (version, import) = build_version(
        &state,
        (template.id, template.active_version_id),
        req.template_version_id,
        None,
    )
    .await?;
    let values = parameters::resolve(&rich_parameters(&version), &[], &req.rich_parameter_values)
        .map_err(ApiError::validation)?;
    let workspace_id = Uuid::new_v4();
    let build_id = Uuid::new_v4();
    let job = build_job(
        (template.organization_id, owner.id),
        import,
        build_id,
        auth.user.id,
    );
    let name = req.name.clone();
    let (row, _, job) = state
        .store
        .create_workspace(
            &NewWorkspace {
                id: workspace_id,
                owner_id: owner.id,
                organization_id: template.organization_id,
                template_id: template.id,
                name: req.name,
                autostart_schedule: req.autostart_schedule,
                ttl_ms: req
                    .ttl_ms
                    .or(Some(template.default_ttl_ms))
                    .filter(|t| *t > 0),
                automatic_updates: req.automatic_updates.unwrap_or_else(|| "never".into()),
            },
            &NewBuild {
                id: build_id,
                workspace_id,
                template_version_id: version.id,
                transition: "start".into(),
                initiator_id: auth.user.id,
                reason: "initiator".into(),
                parameters: values,
                job,
            },
        )
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                ApiError::conflict(format!("Workspace {name:?} already exists for this user."))
            }
            other => other.into(),
        })?;
    state.dispatcher.announce((&job).into());
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
    let action = match req.transition.as_str() {
        "start" | "stop" => Action::Update,
        "delete" => Action::Delete,
        other => {
            return Err(ApiError::validation(vec![codersdk::ValidationError {
                field: "transition".into(),
                detail: format!("must be start, stop or delete, not {other:?}"),
            }]));
        }
    };
    auth.authorize(action, &workspace_object(&workspace))?;
    if req.orphan {
        return Err(ApiError::bad_request("Orphan deletes are not supported.")
            .with_detail("delete the workspace normally; a delete with no provisioner state succeeds without doing anything"));
    }
    let previous = state.store.latest_builds(&[workspace.id]).await?.pop();
    let (version, import) = build_version(
        &state,
        (workspace.template_id, workspace.template_active_version_id),
        req.template_version_id,
        previous.as_ref(),
    )
    .await?;
    let previous_values = match &previous {
        Some(prev) => state.store.build_parameters(prev.id).await?,
        None => Vec::new(),
    };
    let values = parameters::resolve(
        &rich_parameters(&version),
        &previous_values,
        &req.rich_parameter_values,
    )
    .map_err(ApiError::validation)?;
    let build_id = Uuid::new_v4();
    let job = build_job(
        (workspace.organization_id, workspace.owner_id),
        import,
        build_id,
        auth.user.id,
    );
    let created = state
        .store
        .create_build(&NewBuild {
            id: build_id,
            workspace_id: workspace.id,
            template_version_id: version.id,
            transition: req.transition,
            initiator_id: auth.user.id,
            reason: "initiator".into(),
            parameters: values,
            job,
        })
        .await?;
    let Some((row, job)) = created else {
        return Err(ApiError::conflict("A workspace build is already active.")
            .with_detail("wait for it to finish or cancel it before starting another"));
    };
    state.dispatcher.announce((&job).into());
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
    auth.authorize(Action::Update, &workspace_object(&workspace))?;
    let template_admin = auth.can(
        Action::Update,
        &Object::in_org(Resource::Template, workspace.organization_id),
    );
    if !workspace.template_allow_user_cancel_workspace_jobs && !template_admin {
        return Err(ApiError::forbidden()
            .with_detail("The template does not allow users to cancel builds."));
    }
    match state.store.cancel_job(build.job_id).await? {
        Some(_) => Ok(Json(codersdk::Response::new(
            "Job has been marked as canceled...",
        ))),
        None => Err(ApiError::bad_request("Job has already completed.")),
    }
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
