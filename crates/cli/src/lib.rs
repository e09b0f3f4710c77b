#![doc = include_str!("../README.md")]

mod commands;
mod config;
mod output;
mod prompt;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use codersdk::Client;
use url::Url;

pub use config::ConfigDir;

/// Coder: self-hosted cloud development environments.
#[derive(Debug, Parser)]
#[command(name = "coder", version = concat!("v", env!("CARGO_PKG_VERSION")), propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// URL of the deployment (overrides the one saved by `coder login`).
    #[arg(long, global = true, env = "CODER_URL")]
    pub url: Option<Url>,

    /// Session token (overrides the one saved by `coder login`).
    #[arg(
        long,
        global = true,
        env = "CODER_SESSION_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// Directory for the CLI's configuration (URL and session) and the server's data.
    #[arg(long, global = true, env = "CODER_CONFIG_DIR", value_name = "DIR")]
    pub global_config: Option<PathBuf>,

    /// Log debug output.
    #[arg(short, long, global = true, env = "CODER_VERBOSE")]
    pub verbose: bool,
}

impl GlobalArgs {
    pub fn config_dir(&self) -> anyhow::Result<ConfigDir> {
        match &self.global_config {
            Some(dir) => Ok(ConfigDir::new(dir.clone())),
            None => ConfigDir::default_location(),
        }
    }

    /// A client for the deployment the user is logged in to (or pointed at by flags).
    pub fn client(&self) -> anyhow::Result<Client> {
        let config = self.config_dir()?;
        let url = match &self.url {
            Some(url) => url.clone(),
            None => config
                .url()?
                .context("You are not logged in. Try logging in using 'coder login <url>'.")?,
        };
        let token = match &self.token {
            Some(token) => Some(token.clone()),
            None => config.session()?,
        };
        let token =
            token.context("You are not logged in. Try logging in using 'coder login <url>'.")?;
        Ok(Client::new(url).with_token(token))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a Coder server (coderd).
    Server(commands::server::ServerArgs),
    /// Authenticate with a Coder deployment; creates the first user on a new one.
    Login(commands::login::LoginArgs),
    /// Unauthenticate your local session.
    Logout(commands::login::LogoutArgs),
    /// Manage users.
    #[command(subcommand)]
    Users(commands::users::UsersCommand),
    /// Manage personal access tokens.
    #[command(subcommand)]
    Tokens(commands::tokens::TokensCommand),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Server(args) => commands::server::run(&cli.global, args).await,
        Command::Login(args) => commands::login::login(&cli.global, args).await,
        Command::Logout(args) => commands::login::logout(&cli.global, args).await,
        Command::Users(cmd) => commands::users::run(&cli.global, cmd).await,
        Command::Tokens(cmd) => commands::tokens::run(&cli.global, cmd).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
