//! Changes to a template version after its import: its name and message, archiving (hiding a
//! version from pickers; the active version and versions workspaces run cannot be), and the
//! version before another. Each needs the right to update the version's template.

use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::templates::PatchTemplateVersionRequest;
use uuid::Uuid;

use super::{Error, Result, resolve};
use crate::audit;
use crate::state::AppState;
use crate::validate;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{self as store, Archiving, TemplateRow, TemplateVersionRow};

/// The longest message Coder accepts.
const MAX_MESSAGE: usize = 1_048_576;

/// Who may change `version`: those who may update its template, or — a version not attached
/// to a template — those who may create templates in its organization.
async fn authorize_edit(
    state: &AppState,
    subject: &Subject,
    version: &TemplateVersionRow,
) -> Result<()> {
    let object = match version.template_id {
        Some(template) => resolve::template_guard(state, template, version.organization_id).await?,
        None => Object::in_org(Resource::Template, version.organization_id),
    };
    let action = if version.template_id.is_some() {
        Action::Update
    } else {
        Action::Create
    };
    authz::authorize(subject, action, &object)?;
    Ok(())
}

fn entry(subject: &Subject, version: &TemplateVersionRow, action: AuditAction) -> audit::Entry {
    audit::Entry::new(
        audit::actor(subject),
        ResourceType::TemplateVersion,
        version.id,
        &version.name,
        action,
    )
    .org(version.organization_id)
}

/// Renames `version` and/or replaces its message.
pub async fn update(
    state: &AppState,
    subject: &Subject,
    version: &TemplateVersionRow,
    patch: &PatchTemplateVersionRequest,
) -> Result<TemplateVersionRow> {
    authorize_edit(state, subject, version).await?;
    let name = if patch.name.is_empty() {
        version.name.clone()
    } else {
        patch.name.clone()
    };
    let message = patch
        .message
        .clone()
        .unwrap_or_else(|| version.message.clone());
    let mut invalid = Vec::new();
    if let Err(detail) = validate::version_name(&name) {
        invalid.push(ValidationError {
            field: "name".into(),
            detail,
        });
    }
    if let Err(detail) = validate::text(&message, MAX_MESSAGE) {
        invalid.push(ValidationError {
            field: "message".into(),
            detail,
        });
    }
    if !invalid.is_empty() {
        return Err(Error::Validation(invalid));
    }
    if name == version.name && message == version.message {
        return Ok(version.clone());
    }
    let log = entry(subject, version, AuditAction::Write)
        .diff(
            Some(version),
            Some(&TemplateVersionRow {
                name: name.clone(),
                message: message.clone(),
                ..version.clone()
            }),
        )
        .build();
    match state
        .store
        .update_template_version(version.id, &name, &message, Some(&log))
        .await
    {
        Err(store::Error::Conflict { .. }) => Err(Error::Validation(vec![ValidationError {
            field: "name".into(),
            detail: format!("the template already has a version named {name:?}"),
        }])),
        other => Ok(other?),
    }
}

/// Archives (or restores) `version`.
pub async fn set_archived(
    state: &AppState,
    subject: &Subject,
    version: &TemplateVersionRow,
    archived: bool,
) -> Result<TemplateVersionRow> {
    authorize_edit(state, subject, version).await?;
    if version.template_id.is_none() {
        return Err(Error::bad_request(
            "Only versions of a template can be archived.",
        ));
    }
    if version.archived == archived {
        return Err(Error::bad_request(if archived {
            "Template version already archived."
        } else {
            "Template version already unarchived."
        }));
    }
    let log = entry(subject, version, AuditAction::Write)
        .diff(
            Some(version),
            Some(&TemplateVersionRow {
                archived,
                ..version.clone()
            }),
        )
        .build();
    match state
        .store
        .set_template_version_archived(version.id, archived, Some(&log))
        .await?
    {
        Archiving::Done(row) => Ok(*row),
        Archiving::IsActive => Err(Error::bad_request(
            "The active version of a template cannot be archived.",
        )
        .with_detail("promote another version first")),
    }
}

/// Archives every version of `template` nothing needs (only failed imports unless `all`).
pub async fn archive_unused(
    state: &AppState,
    subject: &Subject,
    template: &TemplateRow,
    all: bool,
) -> Result<Vec<Uuid>> {
    let object = resolve::template_guard(state, template.id, template.organization_id).await?;
    authz::authorize(subject, Action::Update, &object)?;
    let log = audit::Entry::new(
        audit::actor(subject),
        ResourceType::Template,
        template.id,
        &template.name,
        AuditAction::Write,
    )
    .org(template.organization_id)
    .build();
    Ok(state
        .store
        .archive_unused_template_versions(template.id, all, Some(&log))
        .await?)
}

/// The version of `template` created before `version` (the caller may already read both).
pub async fn previous(
    state: &AppState,
    template: &TemplateRow,
    version: &TemplateVersionRow,
) -> Result<TemplateVersionRow> {
    match state
        .store
        .previous_template_version(template.id, version)
        .await
    {
        Err(store::Error::NotFound) => Err(Error::NotFound),
        other => Ok(other?),
    }
}
