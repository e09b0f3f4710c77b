//! `coder rename`, `coder favorite` and `coder unfavorite`.

use anyhow::bail;

use crate::commands::workspaces::find;
use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Args)]
pub struct RenameArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
    /// The new name.
    pub new_name: String,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
}

#[derive(Debug, clap::Args)]
pub struct FavoriteArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
}

pub async fn rename(global: &GlobalArgs, args: RenameArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let workspace = find(&client, &args.workspace).await?;
    eprintln!(
        "WARNING: A rename can cause data loss: resources named after the workspace (volumes, \
         containers) may be recreated, and its app links and SSH host change."
    );
    if !args.yes
        && prompt::text(
            &format!("Type {:?} to confirm rename", workspace.name),
            None,
        )? != workspace.name
    {
        bail!("the rename was not confirmed");
    }
    client
        .rename_workspace(workspace.id, &args.new_name)
        .await?;
    println!(
        "Workspace {:?} renamed to {:?}",
        workspace.name, args.new_name
    );
    Ok(())
}

pub async fn favorite(global: &GlobalArgs, args: FavoriteArgs, pin: bool) -> anyhow::Result<()> {
    let client = global.client()?;
    let workspace = find(&client, &args.workspace).await?;
    client.set_workspace_favorite(workspace.id, pin).await?;
    if pin {
        println!("Workspace {:?} added to favorites.", workspace.name);
    } else {
        println!("Workspace {:?} removed from favorites.", workspace.name);
    }
    Ok(())
}
