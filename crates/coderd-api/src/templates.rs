//! Templates and template versions (each version is imported by a provisioner job).

use axum::Router;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, patch, post};
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::provisionerd::{TemplateVariable, VariableValue};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::templates::{
    CreateTemplateRequest, CreateTemplateVersionRequest, Template, TemplateVersion,
    TemplateVersionParameter, TemplateVersionVariable, UpdateActiveTemplateVersion,
    UpdateTemplateMeta,
};
use codersdk::workspaces::WorkspaceResource;
use sha2::Digest as _;
use uuid::Uuid;

use super::AppState;
use super::jobs::{self, LogParams};
use coderd_authz::{Action, Object, Resource};
use coderd_core::audit::{Entry, actor, template_after};
use coderd_core::domain::render::parameter;
use coderd_core::domain::template_schedules::{self, ScheduleChanges};
use coderd_core::domain::views::{template, templates, version};
use coderd_core::domain::{provisioner_jobs, resolve};
use coderd_core::provisioners::tags;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query, resolve_org};
use coderd_store::{
    self as store, NewJob, NewTemplate, NewTemplateVersion, TemplateChanges, TemplateRow,
    TemplateScheduleRow, TemplateVersionRow,
};

pub use coderd_http::requests::PROVISIONERS;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/organizations/{organization}/templateversions",
            post(create_version),
        )
        .route(
            "/organizations/{organization}/templates",
            get(list_org_templates).post(create_template),
        )
        .route(
            "/organizations/{organization}/templates/{name}",
            get(template_by_name),
        )
        .route("/templates", get(list_all_templates))
        .route(
            "/templates/{id}",
            get(get_template)
                .patch(update_template)
                .delete(delete_template),
        )
        .route(
            "/templates/{id}/versions",
            get(list_versions).patch(promote_version),
        )
        .route("/templates/{id}/versions/{name}", get(version_by_name))
        .route("/templateversions/{id}", get(get_version))
        .route("/templateversions/{id}/cancel", patch(cancel_version))
        .route("/templateversions/{id}/logs", get(version_logs))
        .route("/templateversions/{id}/resources", get(version_resources))
        .route(
            "/templateversions/{id}/rich-parameters",
            get(version_parameters),
        )
        .route("/templateversions/{id}/variables", get(version_variables))
        .route("/templateversions/{id}/presets", get(version_presets))
}

/// A template the caller may see, or 404.
pub async fn resolve_template(state: &AppState, auth: &Auth, id: Uuid) -> ApiResult<TemplateRow> {
    Ok(resolve::template(state, &auth.subject, id).await?)
}

async fn resolve_version(state: &AppState, auth: &Auth, id: Uuid) -> ApiResult<TemplateVersionRow> {
    Ok(resolve::version(state, &auth.subject, id).await?)
}

/// `adjective_surname`-style default version names, like Coder's.
fn random_version_name() -> String {
    const FIRST: &[&str] = &[
        "amazing", "brave", "clever", "eager", "festive", "gallant", "happy", "jovial", "keen",
        "lucid", "merry", "nifty",
    ];
    const SECOND: &[&str] = &[
        "babbage", "curie", "darwin", "euler", "feynman", "gauss", "hopper", "lovelace", "noether",
        "pascal", "turing", "wozniak",
    ];
    let n = Uuid::new_v4().as_u128();
    format!(
        "{}_{}{}",
        FIRST[(n % FIRST.len() as u128) as usize],
        SECOND[((n >> 8) % SECOND.len() as u128) as usize],
        (n >> 16) % 100
    )
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/templateversions", tag = "Templates",
    params(("organization" = String, Path)), request_body = CreateTemplateVersionRequest,
    responses((status = 201, body = TemplateVersion), (status = 400, body = codersdk::Response)))]
pub(super) async fn create_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
    Json(req): Json<CreateTemplateVersionRequest>,
) -> ApiResult<(StatusCode, Json<TemplateVersion>)> {
    let org = resolve_org(&state, &auth, &org).await?;
    let object = Object::in_org(Resource::Template, org.id);
    auth.authorize(Action::Create, &object)?;
    coderd_http::requests::create_template_version(&req)?;
    if let Some(template_id) = req.template_id {
        let template = state
            .store
            .template_by_id(template_id)
            .await
            .map_err(|e| match e {
                store::Error::NotFound => ApiError::bad_request("Template does not exist.")
                    .with_detail(format!("no template {template_id}")),
                other => other.into(),
            })?;
        if template.organization_id != org.id {
            return Err(ApiError::bad_request(
                "The template belongs to another organization.",
            ));
        }
        auth.authorize(Action::Update, &object)?;
    }
    let file_id = version_source(&state, &auth, &req).await?;
    let job_tags = tags::normalize(req.tags.clone(), Some(auth.user.id));
    let id = Uuid::new_v4();
    let user_values: Vec<VariableValue> = req
        .user_variable_values
        .iter()
        .map(|v| VariableValue {
            name: v.name.clone(),
            value: v.value.clone(),
            sensitive: false,
        })
        .collect();
    let new = NewTemplateVersion {
        id,
        template_id: req.template_id,
        organization_id: org.id,
        name: if req.name.is_empty() {
            random_version_name()
        } else {
            req.name
        },
        message: req.message,
        created_by: auth.user.id,
        user_variable_values: serde_json::to_value(&user_values).unwrap_or_default(),
        job: NewJob {
            id: Uuid::new_v4(),
            organization_id: org.id,
            initiator_id: auth.user.id,
            provisioner: req.provisioner,
            file_id,
            job_type: "template_version_import",
            input: serde_json::json!({ "template_version_id": id }),
            tags_key: tags::key(&job_tags),
            tags: serde_json::to_value(&job_tags).unwrap_or_default(),
        },
    };
    let log = Entry::new(
        actor(&auth.subject),
        ResourceType::TemplateVersion,
        new.id,
        &new.name,
        AuditAction::Create,
    )
    .org(org.id)
    .diff(None, Some(&new))
    .build();
    let (row, job) = state
        .store
        .create_template_version(&new, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                ApiError::conflict("A version with this name already exists for this template.")
            }
            other => other.into(),
        })?;
    state.dispatcher.announce((&job).into());
    Ok((StatusCode::CREATED, Json(version(&state, row).await?)))
}

/// The archive a new version imports: the upload `file_id` names, or the starter template
/// `example_id` names (stored as the caller's upload, so the version's files are kept alike).
async fn version_source(
    state: &AppState,
    auth: &Auth,
    req: &CreateTemplateVersionRequest,
) -> ApiResult<Uuid> {
    let from_example = !req.example_id.is_empty();
    let from_file = !req.file_id.is_nil();
    if from_example == from_file {
        return Err(ApiError::validation(vec![codersdk::ValidationError {
            field: "file_id".into(),
            detail: "give either file_id (an upload) or example_id (a starter template)".into(),
        }]));
    }
    if from_example {
        let archive = coderd_core::examples::archive(&req.example_id).ok_or_else(|| {
            ApiError::validation(vec![codersdk::ValidationError {
                field: "example_id".into(),
                detail: format!(
                    "no starter template {:?}; GET /api/v2/templates/examples lists them",
                    req.example_id
                ),
            }])
        })?;
        auth.authorize(
            Action::Create,
            &Object::owned(Resource::File, None, auth.user.id),
        )?;
        let hash = hex::encode(sha2::Sha256::digest(&archive));
        let (id, _) = state
            .store
            .insert_file(
                auth.user.id,
                &hash,
                codersdk::files::CONTENT_TYPE_TAR,
                &archive,
            )
            .await?;
        return Ok(id);
    }
    let file = state
        .store
        .file_meta(req.file_id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => {
                ApiError::bad_request("File does not exist.").with_detail(format!(
                    "no file {}; upload the template with POST /api/v2/files first",
                    req.file_id
                ))
            }
            other => other.into(),
        })?;
    if file.created_by != auth.user.id
        && !auth.can(
            Action::Read,
            &Object::owned(Resource::File, None, file.created_by),
        )
    {
        return Err(ApiError::bad_request("File does not exist.")
            .with_detail(format!("no file {}", req.file_id)));
    }
    Ok(file.id)
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = TemplateVersion)))]
pub(super) async fn get_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<TemplateVersion>> {
    let row = resolve_version(&state, &auth, id).await?;
    Ok(Json(version(&state, row).await?))
}

#[utoipa::path(patch, path = "/api/v2/templateversions/{id}/cancel", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response)))]
pub(super) async fn cancel_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::Response>> {
    let row = resolve_version(&state, &auth, id).await?;
    provisioner_jobs::cancel_version(&state, &auth.subject, &row).await?;
    Ok(Json(codersdk::Response::new(
        "Job has been marked as canceled.",
    )))
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/logs", tag = "Templates",
    params(("id" = Uuid, Path), ("after" = Option<i64>, Query), ("follow" = Option<bool>, Query, description = "true streams the lines live over a WebSocket; the request must then be a WebSocket upgrade (400 otherwise)")),
    responses((status = 200, body = [codersdk::provisioners::ProvisionerJobLog])))]
pub(super) async fn version_logs(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Query(params): Query<LogParams>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let row = resolve_version(&state, &auth, id).await?;
    jobs::logs(state, row.job_id, params, ws.ok()).await
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/resources", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = [WorkspaceResource])))]
pub(super) async fn version_resources(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<WorkspaceResource>>> {
    let row = resolve_version(&state, &auth, id).await?;
    let trees = state.store.resources_of_jobs(&[row.job_id]).await?;
    Ok(Json(coderd_core::domain::render::resources(trees)))
}

/// Rejects reads of a version's import results while the import runs.
async fn imported(state: &AppState, row: &TemplateVersionRow) -> ApiResult<()> {
    let job = state.store.job_by_id(row.job_id).await?;
    match coderd_core::domain::render::job_status(&job) {
        ProvisionerJobStatus::Succeeded => Ok(()),
        ProvisionerJobStatus::Pending | ProvisionerJobStatus::Running => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "Template version job is still running.",
        )),
        _ => Err(ApiError::bad_request("Template version job failed.")
            .with_detail(job.error.unwrap_or_default())),
    }
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/rich-parameters", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = [TemplateVersionParameter])))]
pub(super) async fn version_parameters(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<TemplateVersionParameter>>> {
    let row = resolve_version(&state, &auth, id).await?;
    imported(&state, &row).await?;
    Ok(Json(
        coderd_core::domain::parameters::declared(&row)
            .into_iter()
            .map(parameter)
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/presets", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = [codersdk::presets::Preset])))]
pub(super) async fn version_presets(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<codersdk::presets::Preset>>> {
    let row = resolve_version(&state, &auth, id).await?;
    Ok(Json(
        coderd_core::domain::presets::of_version(&state, &row).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/templateversions/{id}/variables", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = [TemplateVersionVariable])))]
pub(super) async fn version_variables(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<TemplateVersionVariable>>> {
    let row = resolve_version(&state, &auth, id).await?;
    auth.authorize(
        Action::Update,
        &Object::in_org(Resource::Template, row.organization_id),
    )
    .or_else(|_| {
        if row.created_by == auth.user.id {
            Ok(())
        } else {
            Err(ApiError::forbidden())
        }
    })?;
    imported(&state, &row).await?;
    let declared: Vec<TemplateVariable> =
        serde_json::from_value(row.variables.clone()).unwrap_or_default();
    let given: Vec<VariableValue> =
        serde_json::from_value(row.user_variable_values.clone()).unwrap_or_default();
    Ok(Json(
        declared
            .into_iter()
            .map(|d| {
                let value = given
                    .iter()
                    .find(|g| g.name == d.name)
                    .map_or_else(|| d.default_value.clone(), |g| g.value.clone());
                TemplateVersionVariable {
                    // Sensitive values never leave coderd.
                    value: if d.sensitive {
                        "*redacted*".into()
                    } else {
                        value
                    },
                    name: d.name,
                    description: d.description,
                    kind: d.kind,
                    default_value: if d.sensitive {
                        String::new()
                    } else {
                        d.default_value
                    },
                    required: d.required,
                    sensitive: d.sensitive,
                }
            })
            .collect(),
    ))
}

#[utoipa::path(post, path = "/api/v2/organizations/{organization}/templates", tag = "Templates",
    params(("organization" = String, Path)), request_body = CreateTemplateRequest,
    responses((status = 201, body = Template), (status = 400, body = codersdk::Response), (status = 409, body = codersdk::Response)))]
pub(super) async fn create_template(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
    Json(req): Json<CreateTemplateRequest>,
) -> ApiResult<(StatusCode, Json<Template>)> {
    let org = resolve_org(&state, &auth, &org).await?;
    auth.authorize(Action::Create, &Object::in_org(Resource::Template, org.id))?;
    coderd_http::requests::create_template(&req)?;
    let schedule = template_schedules::apply(
        TemplateScheduleRow::default(),
        &ScheduleChanges {
            default_ttl_ms: req.default_ttl_ms,
            activity_bump_ms: req.activity_bump_ms,
            autostop_requirement: req.autostop_requirement.clone(),
            autostart_requirement: req.autostart_requirement.clone(),
            allow_user_autostart: req.allow_user_autostart,
            allow_user_autostop: req.allow_user_autostop,
            failure_ttl_ms: req.failure_ttl_ms,
            time_til_dormant_ms: req.dormant_ttl_ms,
            time_til_dormant_autodelete_ms: req.delete_ttl_ms,
        },
    );
    let version = state
        .store
        .template_version_by_id(req.template_version_id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => ApiError::bad_request("Template version does not exist.")
                .with_detail(format!("no template version {}", req.template_version_id)),
            other => other.into(),
        })?;
    if version.organization_id != org.id {
        return Err(ApiError::bad_request(
            "The template version belongs to another organization.",
        ));
    }
    if version.template_id.is_some() {
        return Err(ApiError::conflict(
            "The template version already belongs to a template.",
        ));
    }
    imported(&state, &version).await?;
    let job = state.store.job_by_id(version.job_id).await?;
    let new = NewTemplate {
        id: Uuid::new_v4(),
        organization_id: org.id,
        name: req.name,
        display_name: req.display_name,
        description: req.description,
        icon: req.icon,
        provisioner: job.provisioner,
        active_version_id: version.id,
        created_by: auth.user.id,
        allow_user_cancel_workspace_jobs: req.allow_user_cancel_workspace_jobs.unwrap_or(true),
        schedule,
        require_active_version: req.require_active_version,
        max_port_share_level: req.max_port_share_level.unwrap_or_else(|| "owner".into()),
        cors_behavior: req.cors_behavior.unwrap_or_else(|| "simple".into()),
    };
    let log = Entry::new(
        actor(&auth.subject),
        ResourceType::Template,
        new.id,
        &new.name,
        AuditAction::Create,
    )
    .org(org.id)
    .diff(None, Some(&new))
    .build();
    let row = state
        .store
        .create_template(&new, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { constraint } if constraint.contains("name") => {
                ApiError::conflict("A template with this name already exists in this organization.")
            }
            store::Error::Conflict { .. } => {
                ApiError::conflict("The template version already belongs to a template.")
            }
            other => other.into(),
        })?;
    Ok((StatusCode::CREATED, Json(template(&state, row).await?)))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/templates", tag = "Templates",
    params(("organization" = String, Path)), responses((status = 200, body = [Template])))]
pub(super) async fn list_org_templates(
    State(state): State<AppState>,
    auth: Auth,
    Path(org): Path<String>,
) -> ApiResult<Json<Vec<Template>>> {
    let org = resolve_org(&state, &auth, &org).await?;
    let filter = auth.subject.filter(Resource::Template);
    let rows = state.store.list_templates(&filter, Some(org.id)).await?;
    Ok(Json(templates(&state, rows).await?))
}

#[utoipa::path(get, path = "/api/v2/templates", tag = "Templates",
    responses((status = 200, body = [Template])))]
pub(super) async fn list_all_templates(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<Vec<Template>>> {
    let filter = auth.subject.filter(Resource::Template);
    let rows = state.store.list_templates(&filter, None).await?;
    Ok(Json(templates(&state, rows).await?))
}

#[utoipa::path(get, path = "/api/v2/organizations/{organization}/templates/{name}", tag = "Templates",
    params(("organization" = String, Path), ("name" = String, Path)), responses((status = 200, body = Template)))]
pub(super) async fn template_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((org, name)): Path<(String, String)>,
) -> ApiResult<Json<Template>> {
    let org = resolve_org(&state, &auth, &org).await?;
    let row = resolve::template_by_name(&state, &auth.subject, org.id, &name).await?;
    Ok(Json(template(&state, row).await?))
}

#[utoipa::path(get, path = "/api/v2/templates/{id}", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = Template)))]
pub(super) async fn get_template(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Template>> {
    Ok(Json(
        template(&state, resolve_template(&state, &auth, id).await?).await?,
    ))
}

#[utoipa::path(patch, path = "/api/v2/templates/{id}", tag = "Templates",
    params(("id" = Uuid, Path)), request_body = UpdateTemplateMeta, responses((status = 200, body = Template)))]
pub(super) async fn update_template(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateTemplateMeta>,
) -> ApiResult<Json<Template>> {
    let row = resolve_template(&state, &auth, id).await?;
    let guard = resolve::template_guard(&state, row.id, row.organization_id).await?;
    auth.authorize(Action::Update, &guard)?;
    coderd_http::requests::update_template(&req)?;
    let changes = ScheduleChanges {
        default_ttl_ms: req.default_ttl_ms,
        activity_bump_ms: req.activity_bump_ms,
        autostop_requirement: req.autostop_requirement.clone(),
        autostart_requirement: req.autostart_requirement.clone(),
        allow_user_autostart: req.allow_user_autostart,
        allow_user_autostop: req.allow_user_autostop,
        failure_ttl_ms: req.failure_ttl_ms,
        time_til_dormant_ms: req.time_til_dormant_ms,
        time_til_dormant_autodelete_ms: req.time_til_dormant_autodelete_ms,
    };
    let schedule =
        (!changes.is_empty()).then(|| template_schedules::apply(row.schedule(), &changes));
    let before = row;
    let changes = TemplateChanges {
        name: req.name,
        display_name: req.display_name,
        description: req.description,
        icon: req.icon,
        allow_user_cancel_workspace_jobs: req.allow_user_cancel_workspace_jobs,
        deprecated: req.deprecation_message,
        schedule,
        require_active_version: req.require_active_version,
        max_port_share_level: req.max_port_share_level,
        cors_behavior: req.cors_behavior,
        touch_workspaces_last_used: req.update_workspace_last_used_at,
        touch_workspaces_dormant: req.update_workspace_dormant_at,
    };
    let log = template_entry(&auth, &before, AuditAction::Write)
        .diff(Some(&before), Some(&template_after(&before, &changes)))
        .build();
    let row = state
        .store
        .update_template(id, &changes, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                ApiError::conflict("A template with this name already exists in this organization.")
            }
            other => other.into(),
        })?;
    template_schedules::after_change(&state, &before, &row).await?;
    Ok(Json(template(&state, row).await?))
}

#[utoipa::path(delete, path = "/api/v2/templates/{id}", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response)))]
pub(super) async fn delete_template(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<codersdk::Response>> {
    let row = resolve_template(&state, &auth, id).await?;
    let guard = resolve::template_guard(&state, row.id, row.organization_id).await?;
    auth.authorize(Action::Delete, &guard)?;
    let log = template_entry(&auth, &row, AuditAction::Delete)
        .diff(
            Some(&row),
            Some(&TemplateRow {
                deleted: true,
                ..row.clone()
            }),
        )
        .build();
    if !state.store.delete_template(id, Some(&log)).await? {
        return Err(ApiError::bad_request(
            "All workspaces must be deleted before a template can be removed.",
        ));
    }
    Ok(Json(codersdk::Response::new("Template has been deleted!")))
}

#[utoipa::path(get, path = "/api/v2/templates/{id}/versions", tag = "Templates",
    params(("id" = Uuid, Path)), responses((status = 200, body = [TemplateVersion])))]
pub(super) async fn list_versions(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<TemplateVersion>>> {
    let template = resolve_template(&state, &auth, id).await?;
    let rows = state.store.template_versions_of(template.id).await?;
    let mut versions = Vec::with_capacity(rows.len());
    for row in rows {
        versions.push(version(&state, row).await?);
    }
    Ok(Json(versions))
}

#[utoipa::path(get, path = "/api/v2/templates/{id}/versions/{name}", tag = "Templates",
    params(("id" = Uuid, Path), ("name" = String, Path)), responses((status = 200, body = TemplateVersion)))]
pub(super) async fn version_by_name(
    State(state): State<AppState>,
    auth: Auth,
    Path((id, name)): Path<(Uuid, String)>,
) -> ApiResult<Json<TemplateVersion>> {
    let template = resolve_template(&state, &auth, id).await?;
    let row = state
        .store
        .template_version_by_name(template.id, &name)
        .await?;
    Ok(Json(version(&state, row).await?))
}

#[utoipa::path(patch, path = "/api/v2/templates/{id}/versions", tag = "Templates",
    params(("id" = Uuid, Path)), request_body = UpdateActiveTemplateVersion,
    responses((status = 200, body = codersdk::Response), (status = 400, body = codersdk::Response)))]
pub(super) async fn promote_version(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateActiveTemplateVersion>,
) -> ApiResult<Json<codersdk::Response>> {
    let template = resolve_template(&state, &auth, id).await?;
    let guard = resolve::template_guard(&state, template.id, template.organization_id).await?;
    auth.authorize(Action::Update, &guard)?;
    let version = state
        .store
        .template_version_by_id(req.id)
        .await
        .map_err(|e| match e {
            store::Error::NotFound => ApiError::bad_request("Template version does not exist."),
            other => other.into(),
        })?;
    if version.template_id != Some(template.id) {
        return Err(ApiError::bad_request(
            "The template version does not belong to this template.",
        ));
    }
    if version.archived {
        return Err(ApiError::bad_request("The template version is archived.")
            .with_detail("unarchive it before promoting it"));
    }
    imported(&state, &version).await?;
    let log = template_entry(&auth, &template, AuditAction::Write)
        .diff(
            Some(&template),
            Some(&TemplateRow {
                active_version_id: version.id,
                ..template.clone()
            }),
        )
        .build();
    state
        .store
        .set_active_version(template.id, version.id, Some(&log))
        .await?;
    Ok(Json(codersdk::Response::new(
        "Updated the active template version!",
    )))
}

/// An entry for `action` by the caller on the template `row`.
fn template_entry(auth: &Auth, row: &TemplateRow, action: AuditAction) -> Entry {
    Entry::new(
        actor(&auth.subject),
        ResourceType::Template,
        row.id,
        &row.name,
        action,
    )
    .org(row.organization_id)
}
