//! Claiming: a workspace created from a version and a preset takes a ready prebuild of that
//! preset instead of building from nothing. Ownership and name move to the user in one
//! transaction; then a start build of the same version and preset runs as the user (Coder's
//! claim build), so the workspace's resources learn their new owner.

use codersdk::provisionerd::Transition;
use codersdk::workspaces::WorkspaceBuildParameter;
use uuid::Uuid;

use crate::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use crate::domain::{Error, Result};
use crate::state::AppState;
use coderd_authz::Subject;
use coderd_store::{self as store, PREBUILDS_USER_ID, WorkspaceRow};

/// What a claim is for: the caller has already been authorised to create this workspace.
pub struct ClaimRequest<'a> {
    pub owner: Uuid,
    pub name: &'a str,
    pub version: Uuid,
    pub preset: Uuid,
    pub preset_name: &'a str,
    pub parameters: &'a [WorkspaceBuildParameter],
}

/// The claimed workspace, or `None` when no prebuild of the preset is ready.
pub async fn claim(
    state: &AppState,
    subject: &Subject,
    req: ClaimRequest<'_>,
) -> Result<Option<WorkspaceRow>> {
    if req.owner == PREBUILDS_USER_ID {
        return Ok(None);
    }
    let claimed = state
        .store
        .claim_prebuild(req.preset, req.version, req.owner, req.name)
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => Error::conflict(format!(
                "Workspace {:?} already exists for this user.",
                req.name
            )),
            other => other.into(),
        })?;
    let Some(id) = claimed else {
        return Ok(None);
    };
    let workspace = state.store.workspace_by_id(id, false).await?;
    let build = BuildRequest {
        version: VersionChoice::Exact(req.version),
        parameters: req.parameters.to_vec(),
        preset: Some(req.preset),
        prebuild_claim: true,
        ..BuildRequest::new(Transition::Start, BuildReason::Initiator)
    };
    builds::create_build(state, subject, &workspace, build).await?;
    metrics::counter!("coderd_prebuilt_workspaces_claimed_total",
        "template_name" => workspace.template_name.clone(),
        "preset_name" => req.preset_name.to_owned())
    .increment(1);
    tracing::info!(workspace = %id, owner = %req.owner, "prebuilds: claimed");
    Ok(Some(state.store.workspace_by_id(id, false).await?))
}
