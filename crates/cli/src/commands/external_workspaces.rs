//! `coder external-workspaces ...`: workspaces whose agent runs on a machine of the user's
//! own (`coder_external_agent`). `agent-instructions` prints what starts such an agent.

use anyhow::Context as _;
use serde::Serialize;

use crate::GlobalArgs;
use crate::reach::{Name, pick};

#[derive(Debug, clap::Subcommand)]
pub enum ExternalWorkspacesCommand {
    /// Get the instructions for an external agent.
    AgentInstructions {
        /// The workspace: `[owner/]workspace[.agent]`.
        workspace: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Text)]
        output: Format,
    },
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
    let client = global.client()?;
    match cmd {
        ExternalWorkspacesCommand::AgentInstructions { workspace, output } => {
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
            match output {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&Instructions {
                        auth_type: "token",
                        auth_token: credentials.agent_token,
                        init_script: credentials.command,
                    })?
                ),
                Format::Text => println!(
                    "\nPlease run the following command to attach the external agent to the \
                     workspace {}:\n\n{}\n",
                    ws.name, credentials.command
                ),
            }
            Ok(())
        }
    }
}
