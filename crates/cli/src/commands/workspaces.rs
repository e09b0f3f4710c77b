//! `coder create|start|stop|restart|delete|update|list|show`.

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::templates::TemplateVersionParameter;
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, Workspace, WorkspaceBuildParameter,
};

use crate::jobs::{self, Watched};
use crate::orgs::{OrgArg, parse_pairs};
use crate::output::{self, OutputArgs};
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
    /// The template version preset to use; `none` for none. Without it the version's default
    /// preset applies.
    #[arg(long, env = "CODER_PRESET_NAME")]
    pub preset: Option<String>,
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
    /// Why the build happens, recorded with it (Coder's IDE plugins say which IDE asked).
    #[arg(long, value_enum, default_value_t = Reason::Cli, hide = true)]
    pub reason: Reason,
}

/// The reasons a client may give for a build, as coderd records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Reason {
    Cli,
    SshConnection,
    VscodeConnection,
    JetbrainsConnection,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Self::Cli => "cli",
            Self::SshConnection => "ssh_connection",
            Self::VscodeConnection => "vscode_connection",
            Self::JetbrainsConnection => "jetbrains_connection",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    /// Delete the workspace without deleting its resources: for a workspace whose resources
    /// are gone already or cannot be destroyed (its template broken). Owners only.
    #[arg(long)]
    pub orphan: bool,
}

/// The columns `coder list` can show (Coder's names).
const LIST_COLUMNS: [&str; 11] = [
    "workspace",
    "template",
    "status",
    "healthy",
    "last built",
    "current version",
    "outdated",
    "starts at",
    "starts next",
    "stops after",
    "stops next",
];

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Workspace name or `owner/name`.
    pub workspace: String,
    /// Rich parameter values (repeatable).
    #[arg(long = "parameter", value_name = "NAME=VALUE")]
    pub parameters: Vec<String>,
    /// Ask for every parameter that may change, not only new or changed ones.
    #[arg(long)]
    pub always_prompt: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// List the workspaces of every user you can see.
    #[arg(short, long)]
    pub all: bool,
    /// Coder's workspace search query.
    #[arg(long, default_value = "owner:me")]
    pub search: String,
    /// Columns to show (workspace, template, status, healthy, last built, current version,
    /// outdated, starts at, starts next, stops after, stops next).
    #[arg(
        short,
        long = "column",
        value_delimiter = ',',
        default_value = "workspace,template,status,healthy,last built,current version,outdated,starts at,stops after"
    )]
    pub columns: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One workspace's cells, by column name.
fn list_cells(w: &Workspace, now: chrono::DateTime<chrono::Utc>) -> [String; 11] {
    let schedule = crate::schedule::columns(w, now);
    [
        format!("{}/{}", w.owner_name, w.name),
        w.template_name.clone(),
        w.latest_build.status.as_str().into(),
        w.health.healthy.to_string(),
        format!(
            "{} ({} ago)",
            output::time(&w.latest_build.created_at),
            crate::schedule::human_duration(now - w.latest_build.created_at)
        ),
        w.latest_build.template_version_name.clone(),
        w.outdated.to_string(),
        schedule.starts_at,
        schedule.starts_next,
        schedule.stops_after,
        schedule.stops_next,
    ]
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
    create_workspace(&client, args, Require::Any).await?;
    Ok(())
}

/// What the template must have for `create_workspace` to use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Require {
    Any,
    /// A `coder_external_agent` in its active version (`coder external-workspaces create`).
    ExternalAgent,
}

/// Creates a workspace and follows its build to the end; returns it as created.
pub(crate) async fn create_workspace(
    client: &Client,
    args: CreateArgs,
    require: Require,
) -> anyhow::Result<Workspace> {
    let org = args.org.resolve(client).await?;
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
    if require == Require::ExternalAgent {
        let version = client.template_version(template.active_version_id).await?;
        if !version.has_external_agent {
            bail!(
                "template version {:?} of {template_name:?} does not have an external agent; \
                 only templates with a coder_external_agent resource can create external \
                 workspaces",
                version.name
            );
        }
    }
    let declared = client
        .template_version_rich_parameters(template.active_version_id)
        .await?;
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let preset = crate::presets::choose(
        client
            .template_version_presets(template.active_version_id)
            .await?,
        args.preset.as_deref(),
        interactive,
    )?;
    if let Some(p) = &preset {
        println!("Preset {:?} applied.", p.name);
    }
    // The preset's values are not asked for: coderd applies them.
    let declared: Vec<TemplateVersionParameter> = declared
        .into_iter()
        .filter(|d| {
            !preset
                .as_ref()
                .is_some_and(|p| p.parameters.iter().any(|v| v.name == d.name))
        })
        .collect();
    let values = complete_parameters(
        &declared,
        parse_pairs(&args.parameters, "parameter")?,
        interactive,
    )?;
    crate::commands::gitauth::await_external_auth(client, template.active_version_id).await?;
    if !args.yes && !prompt::confirm(&format!("Create workspace {name:?} from {template_name}?"))? {
        bail!("aborted");
    }
    let workspace = client
        .create_workspace(
            owner,
            &CreateWorkspaceRequest {
                template_id: preset.is_none().then_some(template.id),
                // A preset belongs to a version: naming both lets coderd find a prebuild of
                // exactly that version to claim.
                template_version_id: preset.as_ref().map(|_| template.active_version_id),
                name: name.to_string(),
                rich_parameter_values: values,
                template_version_preset_id: preset.as_ref().map(|p| p.id),
                ..Default::default()
            },
        )
        .await?;
    jobs::watch(client, Watched::WorkspaceBuild(workspace.latest_build.id))
        .await
        .context("the workspace build failed")?;
    println!("The {name} workspace has been created!");
    if args.wait {
        crate::agents::wait_ready(client, workspace.latest_build.id).await?;
    }
    Ok(workspace)
}

/// Runs one transition on a workspace and follows it to the end.
async fn transition(
    client: &Client,
    args: &BuildArgs,
    transition: &str,
    orphan: bool,
) -> anyhow::Result<uuid::Uuid> {
    let workspace = find(client, &args.workspace).await?;
    // A workspace that updates automatically starts on the template's active version, as
    // its autostarts do.
    let version = (transition == "start" && workspace.automatic_updates == "always")
        .then_some(workspace.template_active_version_id);
    let build = client
        .create_workspace_build(
            workspace.id,
            &CreateWorkspaceBuildRequest {
                transition: transition.into(),
                template_version_id: version,
                rich_parameter_values: parse_pairs(&args.parameters, "parameter")?
                    .into_iter()
                    .map(|(name, value)| WorkspaceBuildParameter { name, value })
                    .collect(),
                reason: args.reason.as_str().into(),
                orphan,
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
    let build = transition(&client, &args, "start", false).await?;
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
    transition(&client, &args, "stop", false).await?;
    println!("The {} workspace has been stopped.", args.workspace);
    Ok(())
}

pub async fn restart(global: &GlobalArgs, args: BuildArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    if !args.yes && !prompt::confirm(&format!("Restart workspace {}?", args.workspace))? {
        bail!("aborted");
    }
    transition(&client, &args, "stop", false).await?;
    let build = transition(&client, &args, "start", false).await?;
    println!("The {} workspace has been restarted.", args.workspace);
    if args.wait {
        crate::agents::wait_ready(&client, build).await?;
    }
    Ok(())
}

pub async fn delete(global: &GlobalArgs, args: DeleteArgs) -> anyhow::Result<()> {
    let DeleteArgs {
        build: args,
        orphan,
    } = args;
    let client = global.client()?;
    if !args.yes
        && !prompt::confirm(&format!(
            "Delete workspace {}? Its resources will be destroyed.",
            args.workspace
        ))?
    {
        bail!("aborted");
    }
    transition(&client, &args, "delete", orphan).await?;
    println!("The {} workspace has been deleted.", args.workspace);
    Ok(())
}

pub async fn list(global: &GlobalArgs, args: ListArgs) -> anyhow::Result<()> {
    list_matching(global, args, "", "Create one with 'coder create'.").await
}

/// `coder list` with `extra` added to the search, and `hint` after "No workspaces found!".
pub(crate) async fn list_matching(
    global: &GlobalArgs,
    args: ListArgs,
    extra: &str,
    hint: &str,
) -> anyhow::Result<()> {
    let mut picked = Vec::new();
    for column in &args.columns {
        let column = column.trim().to_lowercase();
        let index = LIST_COLUMNS
            .iter()
            .position(|c| *c == column)
            .with_context(|| {
                format!(
                    "unknown column {column:?}: choose from {}",
                    LIST_COLUMNS.join(", ")
                )
            })?;
        picked.push(index);
    }
    let client = global.client()?;
    let query = if args.all { String::new() } else { args.search };
    let query = format!("{query} {extra}");
    let found = client.workspaces(&query).await?;
    if args.output.output == output::Format::Json {
        println!("{}", serde_json::to_string_pretty(&found.workspaces)?);
        return Ok(());
    }
    if found.workspaces.is_empty() {
        eprintln!("No workspaces found! {hint}");
        return Ok(());
    }
    let now = chrono::Utc::now();
    let headers: Vec<&str> = picked.iter().map(|i| LIST_COLUMNS[*i]).collect();
    let rows: Vec<Vec<String>> = found
        .workspaces
        .iter()
        .map(|w| {
            let cells = list_cells(w, now);
            picked.iter().map(|i| cells[*i].clone()).collect()
        })
        .collect();
    output::print_table(&headers, rows);
    Ok(())
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
            if let Some(parent) = agent.parent_id {
                // A dev container's agent: it never runs here, and its health says why.
                let parent = resource
                    .agents
                    .iter()
                    .find(|a| a.id == parent)
                    .map_or("?", |a| a.name.as_str());
                println!(
                    "    dev container agent {} (in {parent}): {}",
                    agent.name, agent.health.reason
                );
                for app in &agent.apps {
                    println!("      app {} ({})", app.slug, app.display_name);
                }
                continue;
            }
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
    let timings = client.workspace_build_timings(build.id).await?;
    let lines = crate::timings::lines(&timings);
    if !lines.is_empty() {
        println!("  timeline of build #{}:", build.build_number);
        for line in lines {
            println!("    {line}");
        }
    }
    Ok(())
}

/// Whether the template's new declaration of `p` makes `previous` (its last value) one that
/// must be asked again: the parameter is new, or its value is no longer one of its options.
fn needs_answer(p: &TemplateVersionParameter, previous: Option<&str>) -> bool {
    match previous {
        None => true,
        Some(value) => !p.options.is_empty() && !p.options.iter().any(|o| o.value == value),
    }
}

/// `coder update`: restarts an outdated workspace on its template's active version, asking
/// for parameters the new version adds or changes (and, with `--always-prompt`, every mutable
/// one).
pub async fn update(global: &GlobalArgs, args: UpdateArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let ws = find(&client, &args.workspace).await?;
    if !ws.outdated {
        println!("Workspace is up-to-date.");
        return Ok(());
    }
    let declared = client
        .template_version_rich_parameters(ws.template_active_version_id)
        .await?;
    let previous = client
        .workspace_build_parameters(ws.latest_build.id)
        .await?;
    let mut values: Vec<WorkspaceBuildParameter> = parse_pairs(&args.parameters, "parameter")?
        .into_iter()
        .map(|(name, value)| WorkspaceBuildParameter { name, value })
        .collect();
    for p in &declared {
        if p.ephemeral || values.iter().any(|v| v.name == p.name) {
            continue;
        }
        let last = previous
            .iter()
            .find(|v| v.name == p.name)
            .map(|v| v.value.as_str());
        let ask = needs_answer(p, last) || (args.always_prompt && p.mutable);
        if !ask {
            continue;
        }
        let label = if p.display_name.is_empty() {
            &p.name
        } else {
            &p.display_name
        };
        let default = last
            .filter(|l| !needs_answer(p, Some(l)))
            .or((!p.default_value.is_empty()).then_some(p.default_value.as_str()));
        let value = prompt::text(label, default)?;
        values.push(WorkspaceBuildParameter {
            name: p.name.clone(),
            value,
        });
    }
    if ws.latest_build.status == codersdk::workspaces::WorkspaceStatus::Running {
        let stop = client
            .create_workspace_build(
                ws.id,
                &CreateWorkspaceBuildRequest {
                    transition: "stop".into(),
                    reason: "cli".into(),
                    ..Default::default()
                },
            )
            .await?;
        jobs::watch(&client, Watched::WorkspaceBuild(stop.id))
            .await
            .context("stopping the workspace before the update failed")?;
    }
    let start = client
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                template_version_id: Some(ws.template_active_version_id),
                rich_parameter_values: values,
                reason: "cli".into(),
                ..Default::default()
            },
        )
        .await?;
    jobs::watch(&client, Watched::WorkspaceBuild(start.id))
        .await
        .with_context(|| format!("the update of {} failed", args.workspace))?;
    let updated = client.workspace(ws.id).await?;
    println!(
        "The {} workspace has been updated to version {}.",
        args.workspace, updated.latest_build.template_version_name
    );
    Ok(())
}
