//! `coder open vscode|app`: a workspace in VS Code (through Coder's extension and its
//! `vscode://coder.coder-remote/open` link) or one of its apps in the browser. The link is
//! printed as well as opened, so it works inside a workspace or over SSH too.

use anyhow::{Context, bail};
use url::Url;

use crate::GlobalArgs;
use crate::reach::{self, Name};

#[derive(Debug, clap::Subcommand)]
pub enum OpenCommand {
    /// Open a workspace in VS Code Desktop.
    Vscode {
        /// `[owner/]workspace[.agent]`.
        workspace: String,
        /// The directory to open (the agent's expanded directory by default).
        directory: Option<String>,
        /// Put a new session token in the link, so VS Code needs no sign-in.
        #[arg(long, env = "CODER_OPEN_VSCODE_GENERATE_TOKEN")]
        generate_token: bool,
    },
    /// Open a workspace application.
    App {
        /// `[owner/]workspace[.agent]`.
        workspace: String,
        /// The app's slug.
        app: String,
        /// The region of the app's proxy. Only `primary` exists (no workspace proxies).
        #[arg(long, env = "CODER_OPEN_APP_REGION", default_value = "primary")]
        region: String,
    },
}

pub async fn run(global: &GlobalArgs, cmd: OpenCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    let link = match cmd {
        OpenCommand::Vscode {
            workspace,
            directory,
            generate_token,
        } => {
            let name = Name::parse(&workspace)?;
            let ws = reach::find_workspace(&client, &name).await?;
            let agent = reach::pick(&ws, &name)?;
            let folder = directory.unwrap_or(agent.expanded_directory.clone());
            let token = match generate_token {
                true => Some(client.create_session_key("me").await?),
                false => None,
            };
            vscode_link(
                client.url(),
                &ws.owner_name,
                &ws.name,
                &agent.name,
                &folder,
                token,
            )?
        }
        OpenCommand::App {
            workspace,
            app,
            region,
        } => {
            if region != "primary" {
                bail!("region {region:?} does not exist: this deployment has only \"primary\"");
            }
            let name = Name::parse(&workspace)?;
            let ws = reach::find_workspace(&client, &name).await?;
            let agent = reach::pick(&ws, &name)?;
            let found = agent.apps.iter().find(|a| a.slug == app).with_context(|| {
                let slugs: Vec<_> = agent.apps.iter().map(|a| a.slug.as_str()).collect();
                format!(
                    "app {app:?} not found in workspace {}; its apps: {}",
                    ws.name,
                    slugs.join(", ")
                )
            })?;
            if found.external {
                found.url.clone().context("the external app has no URL")?
            } else if let Some(label) = found.subdomain_name.as_deref() {
                let host = client.app_host().await?;
                let scheme = client.url().scheme();
                format!("{scheme}://{}/", host.host.replacen('*', label, 1))
            } else {
                let base = client.url().as_str().trim_end_matches('/');
                format!(
                    "{base}/@{}/{}.{}/apps/{}/",
                    ws.owner_name, ws.name, agent.name, found.slug
                )
            }
        }
    };
    println!("{link}");
    open_in_desktop(&link);
    Ok(())
}

/// Coder's extension's link; query keys sorted, as Coder's CLI writes them.
fn vscode_link(
    deployment: &Url,
    owner: &str,
    workspace: &str,
    agent: &str,
    folder: &str,
    token: Option<String>,
) -> anyhow::Result<String> {
    let mut link = Url::parse("vscode://coder.coder-remote/open")?;
    {
        let mut query = link.query_pairs_mut();
        query.append_pair("agent", agent);
        if !folder.is_empty() {
            query.append_pair("folder", folder);
        }
        query.append_pair("owner", owner);
        if let Some(token) = &token {
            query.append_pair("token", token);
        }
        query.append_pair("url", deployment.as_str().trim_end_matches('/'));
        query.append_pair("workspace", workspace);
    }
    Ok(link.to_string())
}

/// Hands the link to the desktop when there is one (never inside a workspace, where the
/// desktop is the user's own machine): best effort, the link is printed either way.
fn open_in_desktop(link: &str) {
    let in_workspace = std::env::var_os("CODER_AGENT_TOKEN").is_some()
        || std::env::var("CODER").is_ok_and(|v| v == "true");
    let has_display =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if in_workspace || !has_display {
        return;
    }
    let _ = std::process::Command::new("xdg-open")
        .arg(link)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}
