//! A client saying a workspace is in use (Coder's `POST /workspaces/{id}/usage`, which its CLI
//! sends every minute while an IDE's connection lasts): the workspace's `last_used_at` and its
//! deadline move as they do for the relay's own streams, batched with them.

use codersdk::ValidationError;
use uuid::Uuid;

use super::{Error, Result, resolve};
use crate::state::AppState;
use coderd_authz::{Action, Subject};

/// The apps a report may name, as Coder's API accepts them.
pub const USAGE_APPS: &[&str] = &["vscode", "jetbrains", "reconnecting-pty", "ssh"];

/// Records use of `workspace` by the caller, through `agent` with `app` when given. The caller
/// must be allowed to connect to the workspace: a report is a claim of a connection.
pub async fn report(
    state: &AppState,
    subject: &Subject,
    workspace: Uuid,
    agent_and_app: Option<(Uuid, &str)>,
) -> Result<()> {
    let row = resolve::workspace(state, subject, workspace, Action::Connect, false).await?;
    if let Some((agent, app)) = agent_and_app {
        if !USAGE_APPS.contains(&app) {
            return Err(Error::Validation(vec![ValidationError {
                field: "app_name".into(),
                detail: format!("must be one of {}", USAGE_APPS.join(", ")),
            }]));
        }
        let target = resolve::agent(state, subject, agent, Action::Read).await?;
        if target.workspace.id != row.id {
            return Err(Error::Validation(vec![ValidationError {
                field: "agent_id".into(),
                detail: "is not an agent of this workspace".into(),
            }]));
        }
    }
    state
        .relay_usage
        .touch(row.id, agent_and_app.map(|(_, app)| app));
    Ok(())
}
