//! An organization's provisioner jobs as its administrators see them: the list, one job, and
//! cancelling one — through the rule of what the job builds (a workspace build's
//! [`builds::cancel_build`], a template version's [`cancel_version`]). The JSON API's
//! `/organizations/{org}/provisionerjobs` and `/templateversions/{id}/cancel` and the dashboard's
//! `/organizations/{org}/provisioner-jobs` share them.

use codersdk::provisioners::{ProvisionerJob, ProvisionerJobType};
use uuid::Uuid;

use super::{Error, Result, builds, jobs, resolve};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{JobRow, OrganizationRow, TemplateVersionRow};

/// The statuses a job list may be filtered by.
pub const STATUSES: &[&str] = &[
    "pending",
    "running",
    "succeeded",
    "canceling",
    "canceled",
    "failed",
];

/// Longest list one request returns, and the default.
pub const MAX_LIMIT: i64 = 1000;
pub const DEFAULT_LIMIT: i64 = 50;

/// Coder answers 403 (not 404) to members, who see the organization but not its queue.
fn require_reader(subject: &Subject, org: &OrganizationRow) -> Result<()> {
    if subject.can(
        Action::Read,
        &Object::in_org(Resource::ProvisionerJob, org.id),
    ) {
        Ok(())
    } else {
        Err(Error::forbidden(
            "Listing provisioner jobs needs the template admin role.",
        ))
    }
}

/// Whether the subject may see the organization's jobs at all.
pub fn may_read(subject: &Subject, org: &OrganizationRow) -> bool {
    require_reader(subject, org).is_ok()
}

/// The organization's newest jobs, optionally only those in `statuses` (each one of
/// [`STATUSES`]); `limit` is clamped to [`MAX_LIMIT`], non-positive meaning the default.
pub async fn list(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
    statuses: &[String],
    limit: i64,
) -> Result<Vec<ProvisionerJob>> {
    require_reader(subject, org)?;
    if let Some(bad) = statuses.iter().find(|s| !STATUSES.contains(&s.as_str())) {
        return Err(Error::bad_request("Invalid status filter.")
            .with_detail(format!("unknown status {bad:?}")));
    }
    let limit = if limit > 0 { limit } else { DEFAULT_LIMIT }.min(MAX_LIMIT);
    let rows = state.store.list_jobs(org.id, statuses, limit).await?;
    let daemons: jobs::Daemons = state.store.daemons(Some(org.id), None).await?.into();
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(jobs::render(state, row, &daemons).await?);
    }
    Ok(out)
}

/// One job of the organization.
pub async fn get(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
    id: Uuid,
) -> Result<JobRow> {
    require_reader(subject, org)?;
    let row = state.store.job_by_id(id).await?;
    if row.organization_id != org.id {
        return Err(Error::NotFound);
    }
    Ok(row)
}

/// Cancels a template version's import: allowed to those who may change its template (or,
/// before it has one, templates in its organization). A finished job answers
/// [`Error::BadRequest`].
pub async fn cancel_version(
    state: &AppState,
    subject: &Subject,
    version: &TemplateVersionRow,
) -> Result<()> {
    cancel_version_job(state, subject, version, version.job_id).await
}

/// Cancels `job` (the version's import, or a dry run of it) by the version's rule.
async fn cancel_version_job(
    state: &AppState,
    subject: &Subject,
    version: &TemplateVersionRow,
    job: Uuid,
) -> Result<()> {
    let guard = match version.template_id {
        Some(template) => resolve::template_guard(state, template, version.organization_id).await?,
        None => Object::in_org(Resource::Template, version.organization_id),
    };
    authz::authorize(subject, Action::Update, &guard)?;
    match state.store.cancel_job(job).await? {
        Some(_) => Ok(()),
        None => Err(Error::bad_request("Job has already completed.")),
    }
}

/// Cancels one of the organization's jobs by the rule of what it builds.
pub async fn cancel(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
    id: Uuid,
) -> Result<()> {
    let job = get(state, subject, org, id).await?;
    let kind = job
        .r#type
        .parse()
        .unwrap_or(ProvisionerJobType::WorkspaceBuild);
    match kind {
        ProvisionerJobType::WorkspaceBuild => {
            let build = state.store.build_by_job(job.id).await?;
            let (build, workspace) = resolve::build(state, subject, build.id).await?;
            builds::cancel_build(state, subject, &build, &workspace).await
        }
        ProvisionerJobType::TemplateVersionImport => {
            let version = state.store.template_version_by_job(job.id).await?;
            let version = resolve::version(state, subject, version.id).await?;
            cancel_version(state, subject, &version).await
        }
        ProvisionerJobType::TemplateVersionDryRun => {
            let version = jobs::render(state, &job, &jobs::Daemons::default())
                .await?
                .input
                .template_version_id
                .ok_or(Error::NotFound)?;
            let version = resolve::version(state, subject, version).await?;
            cancel_version_job(state, subject, &version, job.id).await
        }
    }
}
