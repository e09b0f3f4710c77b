//! Renaming a workspace and pinning it as a favorite.

use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};

use super::{Error, Result};
use crate::audit;
use crate::state::AppState;
use coderd_authz::Subject;
use coderd_store::{self as store, WorkspaceRow};

/// Renames `workspace`, when the deployment allows renames (`--allow-workspace-renames`, off by
/// default as in Coder: a workspace's name is part of its resources' names, its apps' hosts
/// and its users' SSH configs, which a rename breaks).
pub async fn rename(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    name: &str,
) -> Result<()> {
    super::resolve::authorize_update(subject, workspace)?;
    if !state.options.allow_workspace_renames {
        return Err(
            Error::bad_request("Workspace renames are not allowed.").with_detail(
                "the deployment's administrators may allow them with --allow-workspace-renames",
            ),
        );
    }
    if let Err(detail) = crate::validate::name(name) {
        return Err(Error::Validation(vec![ValidationError {
            field: "name".into(),
            detail,
        }]));
    }
    if name == workspace.name {
        return Ok(());
    }
    let log = audit::Entry::new(
        audit::actor(subject),
        ResourceType::Workspace,
        workspace.id,
        &workspace.name,
        AuditAction::Write,
    )
    .org(workspace.organization_id)
    .diff(
        Some(workspace),
        Some(&WorkspaceRow {
            name: name.to_owned(),
            ..workspace.clone()
        }),
    )
    .build();
    match state
        .store
        .rename_workspace(workspace.id, name, Some(&log))
        .await
    {
        Err(store::Error::Conflict { .. }) => Err(Error::conflict(format!(
            "A workspace with the name {name:?} already exists."
        ))),
        other => Ok(other?),
    }
}

/// Pins or unpins `workspace`: only its owner may (a favorite is the owner's own ordering).
pub async fn set_favorite(
    state: &AppState,
    subject: &Subject,
    workspace: &WorkspaceRow,
    favorite: bool,
) -> Result<()> {
    if workspace.owner_id != subject.user_id {
        return Err(Error::forbidden(
            "You can only favorite workspaces that you own.",
        ));
    }
    state
        .store
        .set_workspace_favorite(workspace.id, favorite)
        .await?;
    Ok(())
}
