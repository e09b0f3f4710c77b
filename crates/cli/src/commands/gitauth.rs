//! Git inside a workspace, with the owner's linked accounts and key: `coder external-auth
//! access-token`, git's askpass (this binary, named by the agent in `GIT_ASKPASS`), `coder
//! gitssh` (the agent's `GIT_SSH_COMMAND`) and `coder publickey`.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use codersdk::Client;
use codersdk::error::ClientError;
use codersdk::externalauth::{
    AgentExternalAuthResponse, AgentGitSshKey, GitSshKey, TemplateVersionExternalAuth,
};
use url::Url;

use crate::{Exit, GlobalArgs};

#[derive(Debug, Subcommand)]
pub enum ExternalAuthCommand {
    /// Print an external auth provider's access token for the workspace's owner.
    ///
    /// Exits 1 and prints the URL to authenticate at when the owner has not linked it.
    AccessToken(AccessTokenArgs),
}

#[derive(Debug, Args)]
pub struct AccessTokenArgs {
    /// The provider's id.
    provider: String,
    /// Print this field of the token's extra data instead of the token.
    #[arg(long)]
    extra: Option<String>,
}

#[derive(Debug, Args)]
pub struct GitsshArgs {
    /// What git passes to ssh.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct PublickeyArgs {
    /// Regenerate your public key. This will require updating the key on any services it's
    /// registered with.
    #[arg(long)]
    reset: bool,
    /// Bypass prompts.
    #[arg(short = 'y', long)]
    yes: bool,
}

/// The workspace agent's API, as its token authenticates it (Coder's `CODER_AGENT_URL` and
/// `CODER_AGENT_TOKEN`, which the agent gives every session).
fn agent_client() -> anyhow::Result<Client> {
    let url = std::env::var("CODER_AGENT_URL")
        .context("CODER_AGENT_URL is not set: this command runs inside a Coder workspace")?;
    let token = match std::env::var("CODER_AGENT_TOKEN") {
        Ok(token) if !token.is_empty() => token,
        _ => match std::env::var("CODER_AGENT_TOKEN_FILE") {
            Ok(path) => std::fs::read_to_string(&path)
                .with_context(|| format!("reading the agent token from {path}"))?
                .trim()
                .to_string(),
            Err(_) => {
                bail!("CODER_AGENT_TOKEN is not set: this command runs inside a Coder workspace")
            }
        },
    };
    let url = Url::parse(&url).with_context(|| format!("CODER_AGENT_URL {url:?} is not a URL"))?;
    Ok(Client::new(url).with_token(token))
}

async fn credentials(
    client: &Client,
    query: &[(&str, &str)],
) -> Result<AgentExternalAuthResponse, ClientError> {
    client
        .get_query("/api/v2/workspaceagents/me/external-auth", query)
        .await
}

pub async fn external_auth(cmd: ExternalAuthCommand) -> anyhow::Result<()> {
    let ExternalAuthCommand::AccessToken(args) = cmd;
    let client = agent_client()?;
    let answer = credentials(&client, &[("id", &args.provider), ("match", "")])
        .await
        .context("get external auth token")?;
    let mut out = std::io::stdout();
    if !answer.url.is_empty() {
        write!(out, "{}", answer.url)?;
        out.flush()?;
        return Err(Exit(1).into());
    }
    match args.extra {
        Some(key) => {
            let value = answer
                .token_extra
                .get(&key)
                .with_context(|| format!("no extra property {key:?} found for the token"))?;
            match value {
                serde_json::Value::String(s) => write!(out, "{s}")?,
                other => write!(out, "{other}")?,
            }
        }
        None => write!(out, "{}", answer.access_token)?,
    }
    out.flush()?;
    Ok(())
}

/// Git runs `$GIT_ASKPASS "Username for 'https://host': "` with `GIT_PREFIX` in the
/// environment: then this binary is git's askpass, whatever its name (as in Coder).
pub fn askpass_prompt() -> Option<String> {
    let mut args = std::env::args().skip(1);
    let prompt = args.next()?;
    if args.next().is_some() || std::env::var_os("GIT_PREFIX").is_none() {
        return None;
    }
    (prompt.starts_with("Username ") || prompt.starts_with("Password ")).then_some(prompt)
}

/// The kind of a prompt and the URL it is for (its user, and the URL without it).
fn parse_prompt(prompt: &str) -> anyhow::Result<(bool, String, String)> {
    let words: Vec<&str> = prompt.split_whitespace().collect();
    if words.len() < 3 {
        bail!(
            "askpass prompt must contain 3 words; got {}: {prompt:?}",
            words.len()
        );
    }
    let username = match words[0] {
        "Username" => true,
        "Password" => false,
        other => bail!("unknown prompt type {other:?}: {prompt:?}"),
    };
    let target = words[2]
        .trim_start_matches(['"', '\''])
        .trim_end_matches(['"', '\'', ':']);
    let mut url = Url::parse(target).with_context(|| format!("parsing the URL in {prompt:?}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!(
            "unsupported scheme {:?}: git credentials are only given over http(s)",
            url.scheme()
        );
    }
    if url.host_str().unwrap_or_default().is_empty() {
        bail!("host is empty in {prompt:?}");
    }
    let user = url.username().to_string();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok((
        username,
        user,
        url.as_str().trim_end_matches('/').to_string(),
    ))
}

/// git's askpass: the owner's credentials for the remote, linking first if need be. Nothing
/// on stdout but the answer (git reads it).
pub async fn gitaskpass(prompt: &str) -> anyhow::Result<()> {
    let (want_username, url_user, url) = parse_prompt(prompt)?;
    let client = agent_client()?;
    let mut answer = match credentials(&client, &[("match", &url), ("id", "")]).await {
        Ok(answer) => answer,
        Err(ClientError::Api {
            status: 404,
            response,
        }) => {
            eprintln!(
                "Coder was unable to handle this git request. The default git behavior will be used instead."
            );
            eprintln!("{}", response.message);
            if !response.detail.is_empty() {
                eprintln!("{}", response.detail);
            }
            return Err(Exit(1).into());
        }
        Err(e) => return Err(anyhow::Error::from(e).context("get git token")),
    };
    if !answer.url.is_empty() {
        eprintln!(
            "You must authenticate with {} to use this git remote. Open the following URL to authenticate:\n{}",
            if answer.r#type.is_empty() {
                "your git provider"
            } else {
                &answer.r#type
            },
            answer.url
        );
        let mut wait = Duration::from_millis(250);
        loop {
            match credentials(&client, &[("match", &url), ("id", ""), ("listen", "true")]).await {
                Ok(a) if a.url.is_empty() => {
                    answer = a;
                    break;
                }
                Ok(_) | Err(ClientError::Http(_)) => {}
                Err(e) => return Err(anyhow::Error::from(e).context("waiting for the git link")),
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(10));
        }
        eprintln!("You've been authenticated with Git!");
    }
    let out = if answer.password.is_empty() || (want_username && url_user.is_empty()) {
        answer.username
    } else {
        answer.password
    };
    println!("{out}");
    Ok(())
}

/// The identity files the user's own ssh configuration names for these arguments, so
/// `coder gitssh` adds the Coder key after them rather than replacing them.
async fn user_identities(args: &[String]) -> Vec<String> {
    let output = tokio::process::Command::new("ssh")
        .arg("-G")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .await;
    let home = std::env::var("HOME").unwrap_or_default();
    let listed: Vec<String> = match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("identityfile "))
            .map(str::to_owned)
            .collect(),
        _ => [
            "id_rsa",
            "id_ecdsa",
            "id_ecdsa_sk",
            "id_ed25519",
            "id_ed25519_sk",
        ]
        .iter()
        .map(|n| format!("~/.ssh/{n}"))
        .collect(),
    };
    listed
        .into_iter()
        .map(|p| match p.strip_prefix("~/") {
            Some(rest) => format!("{home}/{rest}"),
            None => p,
        })
        .filter(|p| std::path::Path::new(p).is_file())
        .collect()
}

/// `ssh` with the user's own identities and then the owner's Coder key (in a private temporary
/// file, removed afterwards). When ssh fails to authenticate, says which key to register.
pub async fn gitssh(args: GitsshArgs) -> anyhow::Result<()> {
    let client = agent_client()?;
    let key: AgentGitSshKey = client
        .get("/api/v2/workspaceagents/me/gitsshkey")
        .await
        .context("get the git SSH key")?;
    let mut file = tempfile::Builder::new()
        .prefix("coder-gitsshkey-")
        .tempfile()
        .context("creating a file for the git SSH key")?;
    // tempfile creates it 0600: only this user reads the key.
    file.write_all(key.private_key.as_bytes())?;
    file.flush()?;
    let mut command = tokio::process::Command::new("ssh");
    for identity in user_identities(&args.args).await {
        command.arg("-i").arg(identity);
    }
    command.arg("-i").arg(file.path()).args(&args.args);
    let status = command.status().await.context("running ssh")?;
    drop(file);
    let code = status.code().unwrap_or(1);
    if code == 255 {
        eprintln!(
            "\nCoder authenticates with this public key. Register it with your git provider:\n\n{}\nAdd to GitHub and GitLab:\n> https://github.com/settings/ssh/new\n> https://gitlab.com/-/profile/keys",
            key.public_key.trim_end()
        );
    }
    if code != 0 {
        return Err(Exit(code).into());
    }
    Ok(())
}

/// Waits, as Coder's `create` does, until the user has linked every provider the template
/// version needs, printing where to link each.
pub async fn await_external_auth(client: &Client, version: uuid::Uuid) -> anyhow::Result<()> {
    let path = format!("/api/v2/templateversions/{version}/external-auth");
    let mut told = std::collections::HashSet::new();
    loop {
        let needed: Vec<TemplateVersionExternalAuth> = client
            .get(&path)
            .await
            .context("reading the template's external auth providers")?;
        let missing: Vec<_> = needed
            .into_iter()
            .filter(|p| !p.authenticated && !p.optional)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        for provider in &missing {
            if told.insert(provider.id.clone()) {
                eprintln!(
                    "You must authenticate with {} to create a workspace with this template. Visit:\n\n\t{}\n",
                    provider.display_name, provider.authenticate_url
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

pub async fn publickey(global: &GlobalArgs, args: PublickeyArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    if args.reset {
        if !args.yes
            && !crate::prompt::confirm(
                "Confirm regenerate a new sshkey for your workspaces? This will require updating the key on any services it is registered with. This action cannot be reverted.",
            )?
        {
            bail!("canceled");
        }
        let _: GitSshKey = client
            .put("/api/v2/users/me/gitsshkey", &serde_json::json!({}))
            .await
            .context("regenerating the git SSH key")?;
    }
    let key: GitSshKey = client
        .get("/api/v2/users/me/gitsshkey")
        .await
        .context("get the git SSH key")?;
    println!(
        "This is your public key for using git in Coder. All clones with SSH will be authenticated automatically 🪄.\n\n{}\nAdd to GitHub and GitLab:\n> https://github.com/settings/ssh/new\n> https://gitlab.com/-/profile/keys",
        key.public_key.trim_end()
    );
    Ok(())
}
