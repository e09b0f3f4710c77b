//! A workspace's schedule and standing, as its owner (or an admin) sets them: the autostart
//! schedule, the time to live, extending the running build's deadline, dormancy and automatic
//! updates; and whether its next autostart would fail for its parameters. Every change needs
//! `Update` on the workspace; templates may forbid users their own autostart or autostop.

use chrono::{DateTime, Duration, Utc};
use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::provisioners::ProvisionerJobStatus;

use super::render::job_status;
use super::{Error, Result, parameters};
use crate::audit;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_schedule::Schedule;
use coderd_store::{NewAuditLog, WorkspaceRow, day_bits};

/// A new deadline must leave at least this long (Coder's rule: 30 minutes, with a minute's
/// grace for the request's own travel).
const MIN_EXTENSION: Duration = Duration::minutes(29);

fn invalid(field: &str, detail: impl Into<String>) -> Error {
    Error::Validation(vec![ValidationError {
        field: field.into(),
        detail: detail.into(),
    }])
}

/// The next time `schedule` starts `workspace` after `now`, on a day its template allows.
pub fn next_start(
    workspace: &WorkspaceRow,
    schedule: &Schedule,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    schedule.next_allowed_after(now, day_bits(workspace.template_autostart_allowed_days))
}

/// The entry of a change to a workspace's settings by `subject`.
fn workspace_write(subject: &Subject, before: &WorkspaceRow, after: &WorkspaceRow) -> NewAuditLog {
    audit::Entry::new(
        audit::actor(subject),
        ResourceType::Workspace,
        before.id,
        &before.name,
        AuditAction::Write,
    )
    .org(before.organization_id)
    .diff(Some(before), Some(after))
    .build()
}

/// `PUT /workspaces/{id}/autostart`: sets the schedule (`None` or empty turns it off).
pub async fn set_autostart(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    schedule: Option<&str>,
) -> Result<()> {
    super::resolve::authorize_update(subject, workspace)?;
    let raw = schedule.map(str::trim).filter(|s| !s.is_empty());
    let parsed = match raw {
        Some(raw) => Some(Schedule::weekly(raw).map_err(|e| invalid("schedule", e.to_string()))?),
        None => None,
    };
    if parsed.is_some() && !workspace.template_allow_user_autostart {
        return Err(invalid(
            "schedule",
            "Autostart is not allowed for workspaces using this template.",
        ));
    }
    let next = parsed
        .as_ref()
        .and_then(|s| next_start(workspace, s, state.options.clock.now()));
    let log = workspace_write(
        subject,
        workspace,
        &WorkspaceRow {
            autostart_schedule: raw.map(str::to_owned),
            ..workspace.clone()
        },
    );
    state
        .store
        .set_autostart(workspace.id, raw, next, Some(&log))
        .await?;
    tracing::info!(workspace = %workspace.id, schedule = ?raw, next_start_at = ?next, "autostart schedule set");
    Ok(())
}

/// `PUT /workspaces/{id}/ttl`: sets the time to live of each start (`None` or 0 turns
/// autostop off, and clears the running build's deadline down to its max deadline). A TTL
/// takes effect from the next start; `extend` moves the current one.
pub async fn set_ttl(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    ttl_ms: Option<i64>,
) -> Result<()> {
    super::resolve::authorize_update(subject, workspace)?;
    if !workspace.template_allow_user_autostop {
        return Err(invalid(
            "ttl_ms",
            "Custom autostop TTL is not allowed for workspaces using this template.",
        ));
    }
    let ttl = ttl_ms.filter(|ms| *ms != 0);
    if let Some(ms) = ttl {
        crate::validate::workspace_ttl_ms(ms).map_err(|detail| invalid("ttl_ms", detail))?;
    }
    let log = workspace_write(
        subject,
        workspace,
        &WorkspaceRow {
            ttl_ms: ttl,
            ..workspace.clone()
        },
    );
    state.store.set_ttl(workspace.id, ttl, Some(&log)).await?;
    Ok(())
}

/// `PUT /workspaces/{id}/extend`: moves the running build's deadline to `deadline`, which
/// must be at least 30 minutes away and not past the build's max deadline. Returns the
/// deadline set.
pub async fn extend(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    deadline: DateTime<Utc>,
) -> Result<DateTime<Utc>> {
    super::resolve::authorize_update(subject, workspace)?;
    let build = state
        .store
        .latest_builds(&[workspace.id])
        .await?
        .pop()
        .ok_or_else(|| Error::internal(format!("workspace {} has no build", workspace.id)))?;
    if build.transition != "start" {
        return Err(Error::conflict(format!(
            "Workspace must be started, current status: {}",
            build.transition
        )));
    }
    let job = state.store.job_by_id(build.job_id).await?;
    match job_status(&job) {
        ProvisionerJobStatus::Succeeded => {}
        ProvisionerJobStatus::Pending | ProvisionerJobStatus::Running => {
            return Err(Error::conflict("Workspace is still building!"));
        }
        other => {
            return Err(Error::conflict(format!(
                "Workspace must be running, its last start is {}.",
                other.as_str()
            )));
        }
    }
    if build.deadline.is_none() {
        return Err(Error::conflict("Workspace shutdown is manual."));
    }
    let now = state.options.clock.now();
    if deadline < now + MIN_EXTENSION {
        return Err(Error::bad_request(
            "Cannot extend workspace: new deadline must be at least 30 minutes in the future",
        ));
    }
    if build.max_deadline.is_some_and(|max| deadline > max) {
        return Err(Error::bad_request(
            "Cannot extend workspace beyond max deadline.",
        ));
    }
    if !state
        .store
        .set_deadline(workspace.id, build.id, deadline)
        .await?
    {
        return Err(Error::conflict(
            "The workspace was rebuilt meanwhile: extend its new build.",
        ));
    }
    tracing::info!(workspace = %workspace.id, build = %build.id, %deadline, "deadline extended");
    Ok(deadline)
}

/// `PUT /workspaces/{id}/dormant`: makes the workspace dormant (it can no longer start, and
/// the lifecycle executor stops it if it runs) or active again. Returns whether it changed.
pub async fn set_dormant(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    dormant: bool,
) -> Result<bool> {
    super::resolve::authorize_update(subject, workspace)?;
    let at = dormant.then(|| state.options.clock.now());
    let log = workspace_write(
        subject,
        workspace,
        &WorkspaceRow {
            dormant_at: at,
            ..workspace.clone()
        },
    );
    let changed = state
        .store
        .set_dormant(workspace.id, at, Some(&log))
        .await?;
    if changed {
        tracing::info!(workspace = %workspace.id, dormant, "dormancy set");
    }
    Ok(changed)
}

/// `PUT /workspaces/{id}/autoupdates`.
pub async fn set_automatic_updates(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    value: &str,
) -> Result<()> {
    super::resolve::authorize_update(subject, workspace)?;
    crate::validate::one_of(value, crate::validate::AUTOMATIC_UPDATES)
        .map_err(|detail| invalid("automatic_updates", detail))?;
    state
        .store
        .set_automatic_updates(
            workspace.id,
            value,
            Some(&workspace_write(
                subject,
                workspace,
                &WorkspaceRow {
                    automatic_updates: value.into(),
                    ..workspace.clone()
                },
            )),
        )
        .await?;
    Ok(())
}

/// Whether the workspace's autostart always runs the template's active version (it updates
/// automatically, or its template requires the active version).
pub fn autostart_uses_active_version(workspace: &WorkspaceRow) -> bool {
    workspace.automatic_updates == "always" || workspace.template_require_active_version
}

/// `GET /workspaces/{id}/resolve-autostart`: whether the version an autostart would run
/// needs parameter values the workspace's last build does not have (so the autostart would
/// fail and the owner should update it by hand).
pub async fn resolve_autostart(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
) -> Result<bool> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::owned(
            Resource::Workspace,
            Some(workspace.organization_id),
            workspace.owner_id,
        ),
    )?;
    let Some(latest) = state.store.latest_builds(&[workspace.id]).await?.pop() else {
        return Ok(false);
    };
    let version_id = if autostart_uses_active_version(workspace) {
        workspace.template_active_version_id
    } else {
        latest.template_version_id
    };
    let version = state.store.template_version_by_id(version_id).await?;
    let previous = state.store.build_parameters(latest.id).await?;
    Ok(parameters::resolve(&parameters::declared(&version), &previous, &[]).is_err())
}
