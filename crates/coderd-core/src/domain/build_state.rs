//! A build's Terraform state, read and replaced by hand (`coder state pull|push`). It holds
//! every resource's attributes, secrets included, and decides what the next build keeps or
//! destroys: only those who may change the workspace's template may see or replace it.

use codersdk::audit::{AuditAction, ResourceType};
use uuid::Uuid;

use super::{Result, resolve};
use crate::audit;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Subject};

async fn guarded(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
) -> Result<(coderd_store::BuildRow, coderd_store::WorkspaceRow)> {
    let (build, workspace) = resolve::build(state, subject, id).await?;
    let guard =
        resolve::template_guard(state, workspace.template_id, workspace.organization_id).await?;
    authz::authorize(subject, Action::Update, &guard)?;
    Ok((build, workspace))
}

/// The state build `id` ended with.
pub async fn read(state: &AppState, subject: &Subject, id: Uuid) -> Result<Vec<u8>> {
    let (build, _) = guarded(state, subject, id).await?;
    Ok(state.store.build_state(build.id).await?)
}

/// Replaces build `id`'s state; the next build starts from it.
pub async fn replace(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
    provisioner_state: &[u8],
) -> Result<()> {
    let (build, workspace) = guarded(state, subject, id).await?;
    let log = audit::Entry::new(
        audit::actor(subject),
        ResourceType::Workspace,
        workspace.id,
        &workspace.name,
        AuditAction::Write,
    )
    .org(workspace.organization_id)
    .build();
    state
        .store
        .replace_build_state(build.id, provisioner_state, Some(&log))
        .await?;
    tracing::info!(build = %build.id, workspace = %workspace.id, bytes = provisioner_state.len(),
        "a build's Terraform state was replaced by hand");
    Ok(())
}
