//! `coder logs <workspace>`: a build's logs — the provisioner's, then each agent's — for the
//! latest build or another (`-n`); `-f` follows them as they come.

use anyhow::Context;
use codersdk::Client;
use codersdk::workspaces::{Workspace, WorkspaceBuild};
use futures::StreamExt;

use crate::GlobalArgs;
use crate::commands::workspaces::find;

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
    /// The build: its number, 0 for the latest, or a negative number to count back from it.
    #[arg(short = 'n', long, default_value_t = 0, allow_negative_numbers = true)]
    pub build_number: i64,
    /// Follow the logs as they are written (until interrupted).
    #[arg(short, long)]
    pub follow: bool,
}

pub async fn run(global: &GlobalArgs, args: LogsArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let workspace = find(&client, &args.workspace).await?;
    let build = build(&client, &workspace, args.build_number).await?;
    if args.follow {
        let mut lines = client
            .follow_logs(&format!("/api/v2/workspacebuilds/{}/logs", build.id), 0)
            .await?;
        while let Some(line) = lines.next().await {
            let line = line?;
            println!(
                "{} [{}] {}",
                time(&line.created_at),
                line.stage,
                line.output
            );
        }
    } else {
        for line in client.workspace_build_logs(build.id).await? {
            println!(
                "{} [{}] {}",
                time(&line.created_at),
                line.stage,
                line.output
            );
        }
    }
    // The build as it ended, with its agents.
    let build = client.workspace_build(build.id).await?;
    let agents: Vec<_> = build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .collect();
    if args.follow {
        let mut streams = Vec::new();
        for agent in &agents {
            let name = agent.name.clone();
            let logs = client.follow_agent_logs(agent.id, 0).await?;
            streams.push(logs.map(move |line| (name.clone(), line)).boxed());
        }
        let mut all = futures::stream::select_all(streams);
        while let Some((agent, line)) = all.next().await {
            let line = line?;
            println!("{} [agent {agent}] {}", time(&line.created_at), line.output);
        }
        return Ok(());
    }
    for agent in agents {
        for line in client.workspace_agent_logs(agent.id).await? {
            println!(
                "{} [agent {}] {}",
                time(&line.created_at),
                agent.name,
                line.output
            );
        }
    }
    Ok(())
}

/// The build `number` names: 0 the latest, below 0 counted back from it.
async fn build(
    client: &Client,
    workspace: &Workspace,
    number: i64,
) -> anyhow::Result<WorkspaceBuild> {
    let latest = i64::from(workspace.latest_build.build_number);
    let wanted = match number {
        0 => return Ok(workspace.latest_build.clone()),
        n if n < 0 => latest + n,
        n => n,
    };
    anyhow::ensure!(
        (1..=latest).contains(&wanted),
        "workspace {} has builds 1 to {latest}; there is no build {wanted}",
        workspace.name
    );
    client
        .get(&format!(
            "/api/v2/users/{}/workspace/{}/builds/{wanted}",
            workspace.owner_name, workspace.name
        ))
        .await
        .with_context(|| format!("build {wanted} of {}", workspace.name))
}

fn time(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
}
