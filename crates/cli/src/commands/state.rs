//! `coder state pull`: a workspace build's Terraform state, to inspect or repair by hand.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use anyhow::Context;

use crate::GlobalArgs;
use crate::commands::workspaces::find;

#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Pull a Terraform state file from a workspace.
    Pull {
        /// Workspace name or `owner/name`.
        workspace: String,
        /// Write the state here (readable by you only) instead of printing it.
        file: Option<PathBuf>,
        /// The build's number (0, the default, for the latest).
        #[arg(short, long, default_value_t = 0)]
        build: i64,
    },
}

pub async fn run(global: &GlobalArgs, cmd: StateCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        StateCommand::Pull {
            workspace,
            file,
            build,
        } => {
            let ws = find(&client, &workspace).await?;
            let id = if build == 0 {
                ws.latest_build.id
            } else {
                let found: codersdk::workspaces::WorkspaceBuild = client
                    .get(&format!(
                        "/api/v2/users/{}/workspace/{}/builds/{build}",
                        ws.owner_name, ws.name
                    ))
                    .await
                    .with_context(|| format!("build {build} of {workspace}"))?;
                found.id
            };
            let state = client.workspace_build_state(id).await?;
            match file {
                None => {
                    let mut out = std::io::stdout();
                    out.write_all(&state)?;
                    out.write_all(b"\n")?;
                }
                Some(path) => std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&path)
                    .and_then(|mut f| f.write_all(&state))
                    .with_context(|| format!("writing {}", path.display()))?,
            }
            Ok(())
        }
    }
}
