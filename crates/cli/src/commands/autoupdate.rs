//! `coder autoupdate <workspace> always|never`: whether the workspace starts on its template's
//! active version.

use codersdk::workspaces::UpdateWorkspaceAutomaticUpdatesRequest;

use crate::GlobalArgs;
use crate::commands::workspaces::find;

#[derive(Debug, clap::Args)]
pub struct AutoupdateArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
    /// The policy.
    #[arg(value_enum, ignore_case = true)]
    pub policy: Policy,
    /// Do not ask for confirmation (accepted for Coder's scripts; nothing is asked).
    #[arg(short, long)]
    pub yes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    Always,
    Never,
}

pub async fn run(global: &GlobalArgs, args: AutoupdateArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let workspace = find(&client, &args.workspace).await?;
    let policy = match args.policy {
        Policy::Always => "always",
        Policy::Never => "never",
    };
    client
        .update_workspace_automatic_updates(
            workspace.id,
            &UpdateWorkspaceAutomaticUpdatesRequest {
                automatic_updates: policy.into(),
            },
        )
        .await?;
    println!(
        "Updated workspace {:?} auto-update policy to {policy:?}",
        workspace.name
    );
    Ok(())
}
