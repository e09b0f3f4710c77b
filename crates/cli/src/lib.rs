#![doc = include_str!("../README.md")]

mod agents;
mod archive;
mod commands;
mod config;
mod errors;
mod headers;
mod jobs;
mod netinfo;
mod orgs;
mod output;
mod presets;
mod prompt;
mod reach;
mod schedule;
mod sshclient;
mod sshlog;
mod timings;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use codersdk::Client;
use url::Url;

pub use commands::gitauth::askpass_prompt;
pub use config::ConfigDir;
pub use errors::render as render_error;

/// Ends the process with this status and no message (the status of a remote command).
#[derive(Debug)]
pub struct Exit(pub i32);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// Coder: self-hosted cloud development environments.
#[derive(Debug, Parser)]
#[command(name = "coder", version = codersdk::version::VERSION)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The process's arguments, parsed as `Cli::parse` does; for `coder server`, with where
    /// each option's value came from (which the parsed struct forgets).
    pub fn parse_with_sources() -> Self {
        use clap::{CommandFactory, FromArgMatches};
        let mut command = Self::command();
        let matches = command
            .try_get_matches_from_mut(std::env::args_os())
            .unwrap_or_else(|e| usage_error(e));
        let mut cli = Self::from_arg_matches(&matches)
            .unwrap_or_else(|e| usage_error(e.format(&mut command)));
        if let (Command::Server(args), Some(("server", server))) =
            (&mut cli.command, matches.subcommand())
        {
            args.config.options = coderd::deployment_options::from_matches(server);
        }
        cli
    }
}

/// Answers git's askpass prompt (see [`askpass_prompt`]).
pub async fn gitaskpass(prompt: &str) -> anyhow::Result<()> {
    commands::gitauth::gitaskpass(prompt).await
}

/// Prints a command-line error and ends the process as Coder's CLI does: help and version on
/// stdout with status 0, a usage error (an unknown flag, a bad value) on stderr with status 1
/// (clap's own convention is 2; scripts written for Coder test for 1).
fn usage_error(error: clap::Error) -> ! {
    let _ = error.print();
    std::process::exit(if error.use_stderr() { 1 } else { 0 })
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

    /// An additional HTTP header for every request to the deployment (`key=value`, repeatable).
    #[arg(long, global = true, env = "CODER_HEADER", value_delimiter = ',')]
    pub header: Vec<String>,

    /// A command whose output lines (`key=value`) are additional HTTP headers; it runs with
    /// `CODER_URL` set.
    #[arg(long, global = true, env = "CODER_HEADER_COMMAND")]
    pub header_command: Option<String>,

    /// Store the session in the operating system's keyring. There is none on Linux, the only
    /// platform this CLI runs on: the session is always kept in the config directory.
    #[arg(long, global = true, env = "CODER_USE_KEYRING", num_args = 0..=1,
        default_missing_value = "true", require_equals = true, hide = true)]
    pub use_keyring: Option<bool>,

    /// Suppress the warning when the client and server versions differ.
    #[arg(long, global = true, env = "CODER_NO_VERSION_WARNING")]
    pub no_version_warning: bool,

    /// Suppress warnings about unlicensed features (every feature is free here).
    #[arg(long, global = true, env = "CODER_NO_FEATURE_WARNING")]
    pub no_feature_warning: bool,

    /// Force the use of a TTY.
    #[arg(long, global = true, env = "CODER_FORCE_TTY")]
    pub force_tty: bool,

    /// Disable direct (P2P) connections to workspaces. Connections here always go through
    /// coderd's relay, so this changes nothing.
    #[arg(long, global = true, env = "CODER_DISABLE_DIRECT_CONNECTIONS")]
    pub disable_direct_connections: bool,

    /// Disable network telemetry. None is sent.
    #[arg(long, global = true, env = "CODER_DISABLE_NETWORK_TELEMETRY")]
    pub disable_network_telemetry: bool,
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
        Ok(self.unauthenticated(url)?.with_token(token))
    }

    /// A client for `url` without a session, with the extra headers the flags ask for.
    pub fn unauthenticated(&self, url: Url) -> anyhow::Result<Client> {
        let headers = headers::resolve(&self.header, self.header_command.as_deref(), &url)?;
        Ok(Client::new(url).with_headers(headers))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a Coder server (coderd).
    Server(Box<commands::server::ServerArgs>),
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
    /// Manage user groups.
    #[command(subcommand, alias = "group")]
    Groups(commands::groups::GroupsCommand),
    /// Manage secrets.
    #[command(subcommand, alias = "secrets")]
    Secret(commands::secrets::SecretsCommand),
    /// Run AI agents on prompts in workspaces: Coder's Tasks.
    #[command(subcommand, alias = "tasks")]
    Task(commands::task::TaskCommand),
    /// Create or manage external workspaces.
    #[command(subcommand)]
    ExternalWorkspaces(commands::external_workspaces::ExternalWorkspacesCommand),
    /// Manage templates.
    #[command(subcommand, alias = "template")]
    Templates(commands::templates::TemplatesCommand),
    /// Create a workspace.
    Create(commands::workspaces::CreateArgs),
    /// Start a workspace.
    Start(commands::workspaces::BuildArgs),
    /// Stop a workspace.
    Stop(commands::workspaces::BuildArgs),
    /// Restart a workspace.
    Restart(commands::workspaces::BuildArgs),
    /// Delete a workspace.
    #[command(alias = "rm")]
    Delete(commands::workspaces::DeleteArgs),
    /// Restart a workspace on its template's active version, asking for new parameters.
    Update(commands::workspaces::UpdateArgs),
    /// Schedule automated start and stop times for workspaces.
    #[command(subcommand)]
    Schedule(commands::schedule::ScheduleCommand),
    /// List workspaces.
    #[command(alias = "ls")]
    List(commands::workspaces::ListArgs),
    /// Show a workspace's resources and agents.
    Show {
        workspace: String,
        #[command(flatten)]
        output: output::OutputArgs,
    },
    /// Provisioner daemons, jobs and keys.
    #[command(subcommand, alias = "provisioners")]
    Provisioner(commands::provisioners::ProvisionerCommand),
    /// Run provisioner daemons.
    #[command(subcommand)]
    Provisionerd(ProvisionerdCommand),
    /// Start the workspace agent (run inside a workspace by its template).
    Agent(commands::agent::AgentArgs),
    /// Start a shell in a workspace, or run a command there.
    Ssh(commands::ssh::SshArgs),
    /// Add the workspaces to your SSH config (`ssh coder.<workspace>`).
    ConfigSsh(commands::config_ssh::ConfigSshArgs),
    /// Forward local TCP and UDP ports to ports inside a workspace.
    #[command(alias = "tunnel")]
    PortForward(commands::port_forward::PortForwardArgs),
    /// Measure round trips to a workspace's agent, hop by hop.
    Ping(commands::ping::PingArgs),
    /// Show coder version.
    Version(commands::version::VersionArgs),
    /// Fetch authenticated user info for Coder deployment.
    Whoami(commands::whoami::WhoamiArgs),
    /// Rename a workspace.
    Rename(commands::workspace_edits::RenameArgs),
    /// Add a workspace to your favorites.
    #[command(alias = "fav")]
    Favorite(commands::workspace_edits::FavoriteArgs),
    /// Remove a workspace from your favorites.
    #[command(alias = "unfav")]
    Unfavorite(commands::workspace_edits::FavoriteArgs),
    /// Toggle auto-update policy for a workspace.
    Autoupdate(commands::autoupdate::AutoupdateArgs),
    /// Install or update shell completion scripts for the detected or chosen shell.
    Completion(commands::completion::CompletionArgs),
    /// View logs for a workspace.
    Logs(commands::logs::LogsArgs),
    /// Open a workspace.
    #[command(subcommand)]
    Open(commands::open::OpenCommand),
    /// Show resource usage for the current workspace.
    Stat(commands::stat::StatArgs),
    /// Manually manage Terraform state to fix broken workspaces.
    #[command(subcommand)]
    State(commands::state::StateCommand),
    /// The ProxyCommand of Coder's VS Code extension for CLIs older than 2.19.
    #[command(hide = true)]
    Vscodessh(commands::vscodessh::VscodesshArgs),
    /// Manage external authentication.
    ///
    /// Authenticate with external services inside of a workspace.
    #[command(subcommand)]
    ExternalAuth(commands::gitauth::ExternalAuthCommand),
    /// Wraps the "ssh" command and uses the coder gitssh key for authentication.
    #[command(hide = true)]
    Gitssh(commands::gitauth::GitsshArgs),
    /// Personalize your workspace by applying a canonical dotfiles repository.
    Dotfiles(commands::dotfiles::DotfilesArgs),
    /// Output your Coder public key used for Git operations.
    #[command(alias = "pubkey")]
    Publickey(commands::gitauth::PublickeyArgs),
}

#[derive(Debug, Subcommand)]
pub enum ProvisionerdCommand {
    /// Run a provisioner daemon.
    Start(commands::provisionerd::StartArgs),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Server(args) => commands::server::run(&cli.global, *args).await,
        Command::Login(args) => commands::login::login(&cli.global, args).await,
        Command::Logout(args) => commands::login::logout(&cli.global, args).await,
        Command::Users(cmd) => commands::users::run(&cli.global, cmd).await,
        Command::Tokens(cmd) => commands::tokens::run(&cli.global, cmd).await,
        Command::Groups(cmd) => commands::groups::run(&cli.global, cmd).await,
        Command::Secret(cmd) => commands::secrets::run(&cli.global, cmd).await,
        Command::Task(cmd) => commands::task::run(&cli.global, cmd).await,
        Command::ExternalWorkspaces(cmd) => {
            commands::external_workspaces::run(&cli.global, cmd).await
        }
        Command::Templates(cmd) => commands::templates::run(&cli.global, cmd).await,
        Command::Create(args) => commands::workspaces::create(&cli.global, args).await,
        Command::Start(args) => commands::workspaces::start(&cli.global, args).await,
        Command::Stop(args) => commands::workspaces::stop(&cli.global, args).await,
        Command::Restart(args) => commands::workspaces::restart(&cli.global, args).await,
        Command::Delete(args) => commands::workspaces::delete(&cli.global, args).await,
        Command::Update(args) => commands::workspaces::update(&cli.global, args).await,
        Command::Schedule(cmd) => commands::schedule::run(&cli.global, cmd).await,
        Command::List(args) => commands::workspaces::list(&cli.global, args).await,
        Command::Show { workspace, output } => {
            commands::workspaces::show(&cli.global, workspace, output).await
        }
        Command::Provisioner(cmd) => commands::provisioners::run(&cli.global, cmd).await,
        Command::Provisionerd(ProvisionerdCommand::Start(args)) => {
            commands::provisionerd::start(&cli.global, args).await
        }
        Command::Agent(args) => commands::agent::run(&cli.global, args).await,
        Command::Ssh(args) => commands::ssh::run(&cli.global, args).await,
        Command::ConfigSsh(args) => commands::config_ssh::run(&cli.global, args).await,
        Command::PortForward(args) => commands::port_forward::run(&cli.global, args).await,
        Command::Ping(args) => commands::ping::run(&cli.global, args).await,
        Command::Version(args) => commands::version::run(args),
        Command::Whoami(args) => commands::whoami::run(&cli.global, args).await,
        Command::Rename(args) => commands::workspace_edits::rename(&cli.global, args).await,
        Command::Favorite(args) => {
            commands::workspace_edits::favorite(&cli.global, args, true).await
        }
        Command::Unfavorite(args) => {
            commands::workspace_edits::favorite(&cli.global, args, false).await
        }
        Command::Autoupdate(args) => commands::autoupdate::run(&cli.global, args).await,
        Command::Completion(args) => commands::completion::run(args),
        Command::Logs(args) => commands::logs::run(&cli.global, args).await,
        Command::Open(cmd) => commands::open::run(&cli.global, cmd).await,
        Command::Stat(args) => commands::stat::run(args).await,
        Command::ExternalAuth(cmd) => commands::gitauth::external_auth(cmd).await,
        Command::Gitssh(args) => commands::gitauth::gitssh(args).await,
        Command::Publickey(args) => commands::gitauth::publickey(&cli.global, args).await,
        Command::Dotfiles(args) => commands::dotfiles::run(&cli.global, args).await,
        Command::State(cmd) => commands::state::run(&cli.global, cmd).await,
        Command::Vscodessh(args) => commands::vscodessh::run(&cli.global, args).await,
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
