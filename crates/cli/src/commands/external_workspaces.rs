//! `coder external-workspaces ...`: workspaces whose agent runs on a machine of the user's
//! own (`coder_external_agent`). `create` makes one (refusing templates without an external
//! agent) and prints what starts its agents once the build is done; `list` is `coder list`
//! narrowed to them (`has_external_agent:true`); `agent-instructions` prints what starts one
//! agent.

use anyhow::Context as _;
use codersdk::Client;
use codersdk::workspaces::Workspace;
use serde::Serialize;

use super::workspaces::{self, CreateArgs, ListArgs, Require};
use crate::GlobalArgs;
use crate::output::OutputArgs;
use crate::reach::{Name, pick};

/// The resource type whose agents run outside the template.
const EXTERNAL_AGENT: &str = "coder_external_agent";

#[derive(Debug, clap::Subcommand)]
pub enum ExternalWorkspacesCommand {
    /// Create a new external workspace.
    Create(CreateExternal),
    /// List external workspaces.
    #[command(alias = "ls")]
    List(ListExternal),
    /// Get the instructions for an external agent.
    AgentInstructions {
        /// The workspace: `[owner/]workspace[.agent]`.
        workspace: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateExternal {
    /// Workspace name, optionally `owner/name` to create it for someone else.
    pub name: String,
    /// Template to create the workspace from; it must have a `coder_external_agent`.
    #[arg(short, long, env = "CODER_TEMPLATE_NAME", required = true)]
    pub template: Option<String>,
    #[command(flatten)]
    pub rest: CreateRest,
}

/// The flags `coder create` has beside the name and template.
#[derive(Debug, clap::Args)]
pub struct CreateRest {
    /// Rich parameter values (repeatable).
    #[arg(long = "parameter", value_name = "NAME=VALUE")]
    pub parameters: Vec<String>,
    /// The template version preset to use; `none` for none.
    #[arg(long, env = "CODER_PRESET_NAME")]
    pub preset: Option<String>,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    #[command(flatten)]
    pub org: crate::orgs::OrgArg,
}

#[derive(Debug, clap::Args)]
pub struct ListExternal {
    /// List the external workspaces of every user you can see.
    #[arg(short, long)]
    pub all: bool,
    /// Coder's workspace search query (`has_external_agent:true` is added to it).
    #[arg(long, default_value = "owner:me")]
    pub search: String,
    /// Columns to show (as `coder list`).
    #[arg(
        short,
        long = "column",
        value_delimiter = ',',
        default_value = "workspace,template,status,healthy,last built,current version,outdated"
    )]
    pub columns: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Coder's JSON for an agent's instructions.
#[derive(Serialize)]
struct Instructions {
    auth_type: &'static str,
    auth_token: String,
    init_script: String,
}

pub async fn run(global: &GlobalArgs, cmd: ExternalWorkspacesCommand) -> anyhow::Result<()> {
    match cmd {
        ExternalWorkspacesCommand::Create(args) => {
            let client = global.client()?;
            let created = workspaces::create_workspace(
                &client,
                CreateArgs {
                    name: Some(args.name),
                    template: args.template,
                    parameters: args.rest.parameters,
                    preset: args.rest.preset,
                    yes: args.rest.yes,
                    // The agent cannot be ready before its owner starts it.
                    wait: false,
                    org: args.rest.org,
                },
                Require::ExternalAgent,
            )
            .await?;
            // The created workspace as it is now, with the finished build's resources.
            let ws = client.workspace(created.id).await?;
            let agents = external_agents(&client, &ws).await?;
            anyhow::ensure!(
                !agents.is_empty(),
                "the build of {} has no {EXTERNAL_AGENT} with an agent",
                ws.name
            );
            println!("{}", instructions_text(&ws.name, &agents));
            Ok(())
        }
        ExternalWorkspacesCommand::List(args) => {
            workspaces::list_matching(
                global,
                ListArgs {
                    all: args.all,
                    search: args.search,
                    columns: args.columns,
                    output: args.output,
                },
                "has_external_agent:true",
                "Create one:\n\n  coder external-workspaces create <name>\n",
            )
            .await
        }
        ExternalWorkspacesCommand::AgentInstructions { workspace, output } => {
            let client = global.client()?;
            let name = Name::parse(&workspace)?;
            let ws = client
                .workspace_by_owner_and_name(&name.owner, &name.workspace)
                .await
                .with_context(|| format!("workspace {:?}", name.workspace))?;
            let agent = pick(&ws, &name)?;
            let credentials = client
                .workspace_external_agent_credentials(ws.id, &agent.name)
                .await
                .with_context(|| format!("the credentials of agent {:?}", agent.name))?;
            let agent = ExternalAgent {
                name: agent.name.clone(),
                instructions: Instructions {
                    auth_type: "token",
                    auth_token: credentials.agent_token,
                    init_script: credentials.command,
                },
            };
            match output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&agent.instructions)?),
                Format::Text => println!("{}", instructions_text(&ws.name, &[agent])),
            }
            Ok(())
        }
    }
}

/// An agent that runs outside the template, with what starts it.
struct ExternalAgent {
    name: String,
    instructions: Instructions,
}

/// The agents of the workspace's `coder_external_agent` resources, with their credentials.
async fn external_agents(client: &Client, ws: &Workspace) -> anyhow::Result<Vec<ExternalAgent>> {
    let mut found = Vec::new();
    for resource in &ws.latest_build.resources {
        if resource.kind != EXTERNAL_AGENT {
            continue;
        }
        for agent in &resource.agents {
            let credentials = client
                .workspace_external_agent_credentials(ws.id, &agent.name)
                .await
                .with_context(|| format!("the credentials of agent {:?}", agent.name))?;
            found.push(ExternalAgent {
                name: agent.name.clone(),
                instructions: Instructions {
                    auth_type: "token",
                    auth_token: credentials.agent_token,
                    init_script: credentials.command,
                },
            });
        }
    }
    Ok(found)
}

/// What to run on the external machines, naming each agent when there are several.
fn instructions_text(workspace: &str, agents: &[ExternalAgent]) -> String {
    let mut text = format!(
        "\nPlease run the following command to attach the external agent to the workspace \
         {workspace}:\n"
    );
    for agent in agents {
        if agents.len() > 1 {
            text.push_str(&format!("\nFor agent {}:", agent.name));
        }
        text.push_str(&format!("\n{}\n", agent.instructions.init_script));
    }
    text
}
