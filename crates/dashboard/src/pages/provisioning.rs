//! An organization's provisioning beside its daemons (`admin::provisioners`):
//! `/organizations/{org}/provisioner-jobs` (status, queue position, tags, error, cancel) and
//! `/organizations/{org}/provisioner-keys` (list, create — the secret shown once — and delete).
//! Members are refused as the API refuses them: 403 for an organization they belong to, 404
//! for one they cannot see.

use std::collections::BTreeMap;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_authz::{Action, Object, Resource, Subject};
use coderd_core::domain::{provisioner_jobs, provisioner_keys, resolve};
use coderd_core::state::AppState;
use coderd_store::OrganizationRow;
use codersdk::provisioners::{ProvisionerJob, ProvisionerJobStatus, ProvisionerKey};
use serde::Deserialize;
use uuid::Uuid;

use super::{CsrfForm, FieldErrors};
use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::{Chrome, capitalized};

/// Which of the organization's provisioning pages the viewer may open (the tabs shown).
pub struct OrgTabs {
    pub org: String,
    pub jobs: bool,
    pub keys: bool,
    /// The page shown: "provisioners", "jobs" or "keys".
    pub current: &'static str,
}

impl OrgTabs {
    pub fn new(subject: &Subject, org: &OrganizationRow, current: &'static str) -> Self {
        Self {
            org: org.name.clone(),
            jobs: provisioner_jobs::may_read(subject, org),
            keys: subject.can(
                Action::Read,
                &Object::in_org(Resource::ProvisionerKey, org.id),
            ),
            current,
        }
    }
}

fn tags_text(tags: &BTreeMap<String, String>) -> String {
    tags.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub struct JobView {
    pub j: ProvisionerJob,
    pub status: String,
    pub class: &'static str,
    pub kind: &'static str,
    pub tags: String,
    pub queue: String,
    pub cancelable: bool,
}

impl JobView {
    fn of(j: ProvisionerJob) -> Self {
        use ProvisionerJobStatus as S;
        let class = match j.status {
            S::Succeeded => "ok",
            S::Failed => "bad",
            S::Canceled => "off",
            _ => "busy",
        };
        let queue = if j.status == S::Pending && j.queue_size > 0 {
            format!("{} of {}", j.queue_position, j.queue_size)
        } else {
            String::new()
        };
        Self {
            status: capitalized(j.status.as_str()),
            class,
            kind: match j.job_type {
                codersdk::provisioners::ProvisionerJobType::WorkspaceBuild => "Workspace build",
                codersdk::provisioners::ProvisionerJobType::TemplateVersionImport => {
                    "Template import"
                }
                codersdk::provisioners::ProvisionerJobType::TemplateVersionDryRun => "Dry run",
            },
            tags: tags_text(&j.tags),
            queue,
            cancelable: matches!(j.status, S::Pending | S::Running),
            j,
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "provisioner_jobs.html")]
pub struct JobsPage {
    chrome: Chrome,
    tabs: OrgTabs,
    jobs: Vec<JobView>,
    status: String,
    statuses: &'static [&'static str],
}

#[derive(Debug, Deserialize)]
pub struct JobsQuery {
    #[serde(default)]
    status: String,
}

pub async fn jobs(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
    Query(q): Query<JobsQuery>,
) -> PageResult<JobsPage> {
    let org = resolve::organization(&state, viewer.subject(), &org).await?;
    let statuses: Vec<String> = q
        .status
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let jobs = provisioner_jobs::list(
        &state,
        viewer.subject(),
        &org,
        &statuses,
        provisioner_jobs::DEFAULT_LIMIT,
    )
    .await?
    .into_iter()
    .map(JobView::of)
    .collect();
    Ok(JobsPage {
        chrome: Chrome::of(&viewer),
        tabs: OrgTabs::new(viewer.subject(), &org, "jobs"),
        jobs,
        status: q.status,
        statuses: provisioner_jobs::STATUSES,
    })
}

pub async fn cancel_job(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((org, job)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let org = resolve::organization(&state, viewer.subject(), &org).await?;
    let job: Uuid = job.parse().map_err(|_| PageError::NotFound)?;
    provisioner_jobs::cancel(&state, viewer.subject(), &org, job).await?;
    Ok(Redirect::to(&format!("/organizations/{}/provisioner-jobs", org.name)).into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "provisioner_keys.html")]
pub struct KeysPage {
    chrome: Chrome,
    tabs: OrgTabs,
    keys: Vec<(ProvisionerKey, String)>,
    can_create: bool,
    /// The secret of the key just created: shown this once.
    created: String,
    name: String,
    tags: String,
    errors: FieldErrors,
    other_errors: Vec<String>,
}

async fn keys_page(
    state: &AppState,
    viewer: &Viewer,
    org: &OrganizationRow,
    created: String,
    (name, tags): (String, String),
    errors: FieldErrors,
) -> PageResult<KeysPage> {
    let keys = provisioner_keys::list(state, viewer.subject(), org)
        .await?
        .into_iter()
        .map(|k| {
            let tags = tags_text(&k.tags);
            (k, tags)
        })
        .collect();
    let other_errors = errors.others(&["name", "tags"]);
    Ok(KeysPage {
        chrome: Chrome::of(viewer),
        tabs: OrgTabs::new(viewer.subject(), org, "keys"),
        keys,
        can_create: viewer.subject().can(
            Action::Create,
            &Object::in_org(Resource::ProvisionerKey, org.id),
        ),
        created,
        name,
        tags,
        errors,
        other_errors,
    })
}

pub async fn keys(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
) -> PageResult<KeysPage> {
    let org = resolve::organization(&state, viewer.subject(), &org).await?;
    let empty = (String::new(), String::new());
    keys_page(
        &state,
        &viewer,
        &org,
        String::new(),
        empty,
        FieldErrors::default(),
    )
    .await
}

#[derive(Debug, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    /// `key=value` pairs separated by spaces.
    #[serde(default)]
    tags: String,
}

/// `a=b c=d` as tags, or what is wrong with it.
fn parse_tags(text: &str) -> Result<BTreeMap<String, String>, String> {
    text.split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
            None => Err(format!("{pair:?} is not key=value")),
        })
        .collect()
}

pub async fn create_key(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(org): Path<String>,
    Form(form): Form<KeyForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let org = resolve::organization(&state, viewer.subject(), &org).await?;
    let mut errors = FieldErrors::default();
    let status = match parse_tags(&form.tags) {
        Err(detail) => {
            errors.push("tags", detail);
            StatusCode::BAD_REQUEST
        }
        Ok(tags) => {
            let name = form.name.trim();
            match provisioner_keys::create(&state, viewer.subject(), &org, name, tags).await {
                Ok(secret) => {
                    let empty = (String::new(), String::new());
                    let page =
                        keys_page(&state, &viewer, &org, secret, empty, FieldErrors::default())
                            .await?;
                    return Ok((StatusCode::CREATED, page).into_response());
                }
                Err(coderd_core::domain::Error::Validation(v)) => {
                    errors = FieldErrors::from_validations(v);
                    StatusCode::BAD_REQUEST
                }
                Err(coderd_core::domain::Error::Conflict { message, .. }) => {
                    errors.push("name", message);
                    StatusCode::CONFLICT
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let values = (form.name, form.tags);
    let page = keys_page(&state, &viewer, &org, String::new(), values, errors).await?;
    Ok((status, page).into_response())
}

pub async fn delete_key(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((org, name)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let org = resolve::organization(&state, viewer.subject(), &org).await?;
    provisioner_keys::delete(&state, viewer.subject(), &org, &name).await?;
    Ok(Redirect::to(&format!("/organizations/{}/provisioner-keys", org.name)).into_response())
}
