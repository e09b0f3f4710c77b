//! `coder login` and `coder logout`.

use anyhow::Context;
use codersdk::Client;
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use url::Url;

use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// URL of the deployment; defaults to --url / CODER_URL or the saved one.
    pub url: Option<Url>,

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
    let url = args
        .url
        .clone()
        .or_else(|| global.url.clone())
        .or(config.url()?)
        .context("no deployment URL: run 'coder login <url>'")?;
    let url = normalise(url);
    let client = Client::new(url.clone());
    client
        .build_info()
        .await
        .with_context(|| format!("{url} does not look like a Coder deployment"))?;

    let token = if !client.has_first_user().await? {
        create_first_user(&client, &args).await?
    } else if let Some(token) = &global.token {
        token.clone()
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
