//! `coder login` and `coder logout`.

use std::io::IsTerminal;

use anyhow::Context;
use codersdk::Client;
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use url::Url;

use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoginArgs {
    #[command(subcommand)]
    pub command: Option<LoginCommand>,

    /// URL of the deployment; defaults to --url / CODER_URL or the saved one.
    pub url: Option<Url>,

    /// Keep the token given with --token / CODER_SESSION_TOKEN as the session, instead of
    /// creating a new session with it.
    #[arg(long)]
    pub use_token_as_session: bool,

    /// Email of the first user, when setting up a new deployment.
    #[arg(long, env = "CODER_FIRST_USER_EMAIL")]
    pub first_user_email: Option<String>,
    /// Username of the first user.
    #[arg(long, env = "CODER_FIRST_USER_USERNAME")]
    pub first_user_username: Option<String>,
    /// Full name of the first user.
    #[arg(long, env = "CODER_FIRST_USER_FULL_NAME")]
    pub first_user_full_name: Option<String>,
    /// Password of the first user.
    #[arg(long, env = "CODER_FIRST_USER_PASSWORD", hide_env_values = true)]
    pub first_user_password: Option<String>,
    /// Accepted for compatibility; trials do not exist here.
    #[arg(long, env = "CODER_FIRST_USER_TRIAL", hide = true)]
    pub first_user_trial: bool,

    /// Email to log in with (prompted for when missing and no token is given).
    #[arg(long, env = "CODER_EMAIL")]
    pub email: Option<String>,
    /// Password to log in with (prompted for when missing).
    #[arg(long, env = "CODER_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,

    /// Print the browser sign-in URL without trying to open a browser.
    #[arg(long)]
    pub no_open: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum LoginCommand {
    /// Print the current session token.
    Token,
}

#[derive(Debug, clap::Args)]
pub struct LogoutArgs {
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
}

fn normalise(mut url: Url) -> Url {
    let path = url.path().trim_end_matches('/').to_string();
    url.set_path(&path);
    url
}

pub async fn login(global: &GlobalArgs, args: LoginArgs) -> anyhow::Result<()> {
    let config = global.config_dir()?;
    if let Some(LoginCommand::Token) = args.command {
        let token = config.session()?.context(
            "no session token found: you are not logged in. Try logging in using \
             'coder login <url>'.",
        )?;
        println!("{token}");
        return Ok(());
    }
    let url = args
        .url
        .clone()
        .or_else(|| global.url.clone())
        .or(config.url()?)
        .context("no deployment URL: run 'coder login <url>'")?;
    let url = normalise(url);
    let client = global.unauthenticated(url.clone())?;
    client
        .build_info()
        .await
        .with_context(|| format!("{url} does not look like a Coder deployment"))?;

    let token = if !client.has_first_user().await? {
        create_first_user(&client, &args).await?
    } else if let Some(token) = &global.token {
        if args.use_token_as_session {
            token.clone()
        } else {
            // As Coder's CLI: the given token only vouches for a session of the CLI's own.
            client
                .clone()
                .with_token(token.clone())
                .create_session_key("me")
                .await
                .context("creating a session with the given token")?
        }
    } else if args.email.is_none() && args.password.is_none() && wants_browser(&client).await? {
        browser_login(&client, &url, args.no_open).await?
    } else {
        let email = match args.email {
            Some(email) => email,
            None => prompt::text("Email", None)?,
        };
        let password = match args.password {
            Some(password) => password,
            None => prompt::password("Password", false)?,
        };
        client
            .login_with_password(&LoginWithPasswordRequest { email, password })
            .await?
            .session_token
    };
    let me = client
        .clone()
        .with_token(token.clone())
        .user("me")
        .await
        .context("checking the session")?;
    config.save_login(&url, &token)?;
    eprintln!("Welcome to Coder, {}! You're authenticated.", me.username);
    Ok(())
}

/// Whether to sign in through the browser: the deployment signs people in through an identity
/// provider (OIDC or GitHub) or no longer with passwords. Naming an email or password chooses
/// the password instead.
async fn wants_browser(client: &Client) -> anyhow::Result<bool> {
    let methods = client
        .auth_methods()
        .await
        .context("asking the deployment how to sign in")?;
    Ok(!methods.password.enabled || methods.oidc.enabled || methods.github.enabled)
}

/// Coder's `/cli-auth` flow: the person signs in in the browser, where the page shows a session
/// token to paste here (from standard input when it is not a terminal).
async fn browser_login(client: &Client, url: &Url, no_open: bool) -> anyhow::Result<String> {
    let mut auth_url = url.clone();
    auth_url.set_path(&format!("{}/cli-auth", url.path().trim_end_matches('/')));
    let opened = !no_open && std::io::stdin().is_terminal() && open_browser(auth_url.as_str());
    if opened {
        eprintln!("Your browser has been opened to visit:\n\n\t{auth_url}\n");
    } else {
        eprintln!("Open the following in your browser:\n\n\t{auth_url}\n");
    }
    let token = prompt::password("Paste your token here", false)?;
    let token = token.trim().to_string();
    anyhow::ensure!(!token.is_empty(), "no session token was pasted");
    client
        .clone()
        .with_token(token.clone())
        .user("me")
        .await
        .map_err(|_| anyhow::anyhow!("That's not a valid token!"))?;
    Ok(token)
}

/// Starts the desktop's URL opener; false when there is none.
fn open_browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

async fn create_first_user(client: &Client, args: &LoginArgs) -> anyhow::Result<String> {
    eprintln!("Your Coder deployment hasn't been set up! Let's create the first user (the Owner).");
    let username = match &args.first_user_username {
        Some(u) => u.clone(),
        None => prompt::text("Username", Some(&whoami()))?,
    };
    let name = match &args.first_user_full_name {
        Some(n) => n.clone(),
        None if args.first_user_username.is_some() => String::new(),
        None => prompt::text("Full name (optional)", Some(""))?,
    };
    let email = match &args.first_user_email {
        Some(e) => e.clone(),
        None => prompt::text("Email", None)?,
    };
    let password = match &args.first_user_password {
        Some(p) => p.clone(),
        None => prompt::password("Password", true)?,
    };
    client
        .create_first_user(&CreateFirstUserRequest {
            email: email.clone(),
            username,
            name,
            password: password.clone(),
            trial: args.first_user_trial,
        })
        .await?;
    let session = client
        .login_with_password(&LoginWithPasswordRequest { email, password })
        .await?;
    Ok(session.session_token)
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "admin".into())
}

pub async fn logout(global: &GlobalArgs, args: LogoutArgs) -> anyhow::Result<()> {
    let config = global.config_dir()?;
    if !args.yes && !prompt::confirm("Are you sure you want to log out?")? {
        anyhow::bail!("logout cancelled");
    }
    let client = global.client()?;
    // The server may be gone or the token already invalid: the local session ends regardless.
    if let Err(e) = client.logout().await {
        eprintln!("warning: the server did not confirm the logout: {e}");
    }
    config.clear_session()?;
    eprintln!("You are no longer logged in. You can log in using 'coder login <url>'.");
    Ok(())
}
