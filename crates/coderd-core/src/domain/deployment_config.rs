//! The deployment's configuration (Coder's `/api/v2/deployment/config` and the dashboard's
//! deployment overview): the server's options with their sources, secrets blanked. Only those
//! who may read the deployment's configuration may see it.

use super::Result;
use crate::deployment_options::DeploymentOption;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

/// Every option of the server, in `--help`'s order.
pub fn options(state: &AppState, subject: &Subject) -> Result<Vec<DeploymentOption>> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    // Blanked when built already; again here, as this is where they leave the server.
    Ok(state
        .options
        .config_options
        .0
        .iter()
        .cloned()
        .map(DeploymentOption::redacted)
        .collect())
}
