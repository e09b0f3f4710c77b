//! `coder state pull|push`: a workspace build's Terraform state, to inspect or repair by hand
//! (template managers only: the state holds every resource's secrets).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use anyhow::Context;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, StateBytes};

use crate::GlobalArgs;
use crate::commands::workspaces::find;
use crate::jobs::{self, Watched};

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
    /// Push a Terraform state file to a workspace: a new build of the same transition starts
    /// from it (or, with --no-build, the build's state is replaced).
    Push {
        /// Workspace name or `owner/name`.
        workspace: String,
        /// The state file, `-` for standard input.
        file: PathBuf,
        /// The build whose version and transition the new build repeats (0: the latest).
        #[arg(short, long, default_value_t = 0)]
        build: i64,
        /// Replace the build's state without starting a build.
        #[arg(short, long)]
        no_build: bool,
    },
}

/// The build `number` names (0: the latest).
async fn build_of(
    client: &codersdk::Client,
    ws: &codersdk::workspaces::Workspace,
    number: i64,
) -> anyhow::Result<codersdk::workspaces::WorkspaceBuild> {
    if number == 0 {
        return Ok(ws.latest_build.clone());
    }
    client
        .get(&format!(
            "/api/v2/users/{}/workspace/{}/builds/{number}",
            ws.owner_name, ws.name
        ))
        .await
        .with_context(|| format!("build {number} of {}", ws.name))
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
            let id = build_of(&client, &ws, build).await?.id;
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
        StateCommand::Push {
            workspace,
            file,
            build,
            no_build,
        } => {
            let state = if file.as_os_str() == "-" {
                let mut all = Vec::new();
                std::io::stdin().read_to_end(&mut all)?;
                all
            } else {
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?
            };
            let ws = find(&client, &workspace).await?;
            let target = build_of(&client, &ws, build).await?;
            if no_build {
                client
                    .update_workspace_build_state(target.id, state)
                    .await?;
                println!("Replaced the state of build {}.", target.build_number);
                return Ok(());
            }
            let created = client
                .create_workspace_build(
                    ws.id,
                    &CreateWorkspaceBuildRequest {
                        template_version_id: Some(target.template_version_id),
                        transition: target.transition.clone(),
                        state: Some(StateBytes(state)),
                        reason: "cli".into(),
                        ..Default::default()
                    },
                )
                .await?;
            jobs::watch(&client, Watched::WorkspaceBuild(created.id))
                .await
                .with_context(|| {
                    format!(
                        "the {} build from the pushed state failed",
                        target.transition
                    )
                })?;
            Ok(())
        }
    }
}
