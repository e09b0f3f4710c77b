//! `coder create|start|stop|restart|delete|list|show`.

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::templates::TemplateVersionParameter;
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace, WorkspaceBuildParameter,
};
use serde::Serialize;

use crate::jobs::{self, Watched};
use crate::orgs::{OrgArg, parse_pairs};
use crate::output::{self, OutputArgs, Tabular};
use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Workspace name, optionally `owner/name` to create it for someone else.
    pub name: Option<String>,
    /// Template to create the workspace from.
    #[arg(short, long, env = "CODER_TEMPLATE_NAME")]
    pub template: Option<String>,
    /// Rich parameter values (repeatable).
    #[arg(long = "parameter", value_name = "NAME=VALUE")]
    pub parameters: Vec<String>,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    /// After the build, wait for the workspace's agents to be ready, streaming their startup logs.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub org: OrgArg,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
    /// Rich parameter values (repeatable).
    #[arg(long = "parameter", value_name = "NAME=VALUE")]
    pub parameters: Vec<String>,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    /// After starting, wait for the workspace's agents to be ready, streaming their startup logs.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// List the workspaces of every user you can see.
    #[arg(short, long)]
    pub all: bool,
    /// Coder's workspace search query.
    #[arg(long, default_value = "owner:me")]
    pub search: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Serialize)]
#[serde(transparent)]
struct WorkspaceRow(Workspace);

impl Tabular for WorkspaceRow {
    fn headers() -> &'static [&'static str] {
        &[
            "workspace",
            "template",
            "status",
            "healthy",
            "last built",
            "outdated",
        ]
    }
    fn row(&self) -> Vec<String> {
        let w = &self.0;
        vec![
            format!("{}/{}", w.owner_name, w.name),
            w.template_name.clone(),
            w.latest_build.status.as_str().into(),
            w.health.healthy.to_string(),
            output::time(&w.latest_build.created_at),
            w.outdated.to_string(),
        ]
    }
}

/// Splits `owner/name` (owner defaults to `me`).
fn owner_and_name(arg: &str) -> (&str, &str) {
    arg.split_once('/').unwrap_or(("me", arg))
}

pub async fn find(client: &Client, arg: &str) -> anyhow::Result<Workspace> {
    let (owner, name) = owner_and_name(arg);
    client
        .workspace_by_owner_and_name(owner, name)
        .await
        .with_context(|| format!("workspace {arg:?}"))
}

/// Asks for parameters the template needs and the command line did not give (on a terminal);
/// elsewhere, missing required values are left to coderd to reject clearly.
fn complete_parameters(
    declared: &[TemplateVersionParameter],
    given: Vec<(String, String)>,
    prompt_missing: bool,
) -> anyhow::Result<Vec<WorkspaceBuildParameter>> {
    let mut values: Vec<WorkspaceBuildParameter> = given
        .into_iter()
        .map(|(name, value)| WorkspaceBuildParameter { name, value })
        .collect();
    if prompt_missing {
        for p in declared {
            if values.iter().any(|v| v.name == p.name) || p.ephemeral {
                continue;
            }
            let label = if p.display_name.is_empty() {
                &p.name
            } else {
                &p.display_name
            };
            let default = (!p.default_value.is_empty()).then_some(p.default_value.as_str());
            if default.is_none() || p.required {
                let value = prompt::text(label, default)?;
                values.push(WorkspaceBuildParameter {
                    name: p.name.clone(),
                    value,
                });
            }
        }
    }
    Ok(values)
}

pub async fn create(global: &GlobalArgs, args: CreateArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let org = args.org.resolve(&client).await?;
    let arg = match args.name {
        Some(n) => n,
        None => prompt::text("Specify a name for your workspace", None)?,
    };
    let (owner, name) = owner_and_name(&arg);
    let template_name = match args.template {
        Some(t) => t,
        None => prompt::text("Template", None)?,
    };
    let template = client
        .template_by_name(&org.id.to_string(), &template_name)
        .await
        .with_context(|| format!("template {template_name:?}"))?;
    let declared = client
        .template_version_rich_parameters(template.active_version_id)
        .await?;
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let values = complete_parameters(
        &declared,
        parse_pairs(&args.parameters, "parameter")?,
        interactive,
    )?;
    if !args.yes && !prompt::confirm(&format!("Create workspace {name:?} from {template_name}?"))? {
        bail!("aborted");
    }
    let workspace = client
        .create_workspace(
            owner,
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: name.to_string(),
                rich_parameter_values: values,
                ..Default::default()
            },
        )
        .await?;
    jobs::watch(&client, Watched::WorkspaceBuild(workspace.latest_build.id))
        .await
        .context("the workspace build failed")?;
    println!("The {name} workspace has been created!");
    if args.wait {
        crate::agents::wait_ready(&client, workspace.latest_build.id).await?;
    }
    Ok(())
}

/// Runs one transition on a workspace and follows it to the end.
async fn transition(
    client: &Client,
    args: &BuildArgs,
    transition: &str,
) -> anyhow::Result<uuid::Uuid> {
    let workspace = find(client, &args.workspace).await?;
    let build = client
        .create_workspace_build(
            workspace.id,
            &CreateWorkspaceBuildRequest {
                transition: transition.into(),
                rich_parameter_values: parse_pairs(&args.parameters, "parameter")?
                    .into_iter()
                    .map(|(name, value)| WorkspaceBuildParameter { name, value })
                    .collect(),
                ..Default::default()
            },
        )
        .await?;
    jobs::watch(client, Watched::WorkspaceBuild(build.id))
        .await
        .with_context(|| format!("the {transition} build of {} failed", args.workspace))?;
    Ok(build.id)
}

pub async fn start(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let current = find(&client, &args.workspace).await?;
    if current.latest_build.status == codersdk::workspaces::WorkspaceStatus::Running
        && args.parameters.is_empty()
    {
        println!("The {} workspace is already running.", args.workspace);
        return Ok(());
    }
    let build = transition(&client, &args, "start").await?;
    println!("The {} workspace has been started.", args.workspace);
    if args.wait {
        crate::agents::wait_ready(&client, build).await?;
    }
    Ok(())
}

pub async fn stop(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    if !args.yes && !prompt::confirm(&format!("Stop workspace {}?", args.workspace))? {
        bail!("aborted");
    }
    transition(&client, &args, "stop").await?;
    println!("The {} workspace has been stopped.", args.workspace);
    Ok(())
}

pub async fn restart(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    if !args.yes && !prompt::confirm(&format!("Restart workspace {}?", args.workspace))? {
        bail!("aborted");
    }
    transition(&client, &args, "stop").await?;
    let build = transition(&client, &args, "start").await?;
    println!("The {} workspace has been restarted.", args.workspace);
    if args.wait {
        crate::agents::wait_ready(&client, build).await?;
    }
    Ok(())
}

pub async fn delete(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    if !args.yes
        && !prompt::confirm(&format!(
            "Delete workspace {}? Its resources will be destroyed.",
            args.workspace
        ))?
    {
        bail!("aborted");
    }
    transition(&client, &args, "delete").await?;
    println!("The {} workspace has been deleted.", args.workspace);
    Ok(())
}

pub async fn list(global: &GlobalArgs, args: ListArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let query = if args.all { String::new() } else { args.search };
    let found = client.workspaces(&query).await?;
    let rows: Vec<WorkspaceRow> = found.workspaces.into_iter().map(WorkspaceRow).collect();
    if rows.is_empty() && args.output.output == output::Format::Table {
        eprintln!("No workspaces found! Create one with 'coder create'.");
        return Ok(());
    }
    output::print_list(args.output.output, &rows)
}

pub async fn show(
    global: &GlobalArgs,
    workspace: String,
    output: OutputArgs,
) -> anyhow::Result<()> {
    let client = global.client()?;
    let ws = find(&client, &workspace).await?;
    if output.output == output::Format::Json {
        println!("{}", serde_json::to_string_pretty(&ws)?);
        return Ok(());
    }
    let build = &ws.latest_build;
    println!(
        "{}/{}  template {}  status {}  build #{} ({})",
        ws.owner_name,
        ws.name,
        ws.template_name,
        build.status.as_str(),
        build.build_number,
        build.transition
    );
    if !build.job.error.is_empty() {
        println!("  error: {}", build.job.error);
    }
    for resource in build.resources.iter().filter(|r| !r.hide) {
        println!("  {}.{}", resource.kind, resource.name);
        for item in &resource.metadata {
            let value = if item.sensitive {
                "*****"
            } else {
                item.value.as_str()
            };
            println!("    {}: {value}", item.key);
        }
        for agent in &resource.agents {
            println!(
                "    agent {}: {} ({}), lifecycle {}, {}/{}",
                agent.name,
                agent.status,
                if agent.health.healthy {
                    "healthy"
                } else {
                    "unhealthy"
                },
                agent.lifecycle_state,
                agent.operating_system,
                agent.architecture
            );
            for app in &agent.apps {
                println!("      app {} ({})", app.slug, app.display_name);
            }
        }
    }
    Ok(())
}
