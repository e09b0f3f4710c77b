//! `coder server`: run coderd until SIGINT/SIGTERM.

use anyhow::Context;
use coderd::ServerConfig;
use tokio_util::sync::CancellationToken;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServerArgs {
    #[command(flatten)]
    pub config: ServerConfig,
    #[command(subcommand)]
    pub action: Option<ServerAction>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ServerAction {
    /// Manage database encryption.
    #[command(subcommand)]
    Dbcrypt(DbcryptCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum DbcryptCommand {
    /// Rotate database encryption keys.
    Rotate(RotateArgs),
}

#[derive(Debug, clap::Args)]
pub struct RotateArgs {
    /// The connection URL of the deployment's PostgreSQL database.
    #[arg(long, env = "CODER_PG_CONNECTION_URL", hide_env_values = true)]
    postgres_url: String,
    /// The new encryption key (base64, 32 bytes). Must be provided.
    #[arg(
        long,
        env = "CODER_EXTERNAL_TOKEN_ENCRYPTION_ENCRYPT_NEW_KEY",
        hide_env_values = true
    )]
    new_key: String,
    /// The old encryption keys (base64, comma-separated).
    #[arg(
        long,
        env = "CODER_EXTERNAL_TOKEN_ENCRYPTION_DECRYPT_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    old_keys: Vec<String>,
    /// Bypass prompts.
    #[arg(short = 'y', long)]
    yes: bool,
}

async fn rotate(args: RotateArgs) -> anyhow::Result<()> {
    if !args.yes
        && !crate::prompt::confirm(
            "This re-encrypts every stored external auth token with the new key. Continue?",
        )?
    {
        anyhow::bail!("canceled");
    }
    let done = coderd::dbcrypt::rotate(&args.postgres_url, &args.new_key, &args.old_keys).await?;
    println!("Re-encrypted {done} external auth link(s) with the new key.");
    Ok(())
}

pub fn init_logging(verbose: bool) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::EnvFilter;
    let default = if verbose {
        "debug,sqlx=warn,hyper=info"
    } else {
        "info,sqlx=warn"
    };
    let filter = EnvFilter::try_from_env("CODER_LOG_FILTER")
        .or_else(|_| EnvFilter::try_new(default))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Container logs and files are no terminals: colour codes would be noise there.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .try_init();
}

/// Cancels `token` on the first SIGINT or SIGTERM; a second one exits at once.
pub fn cancel_on_signal(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::spawn(async move {
        for round in 0.. {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            if round == 0 {
                tracing::info!("shutting down gracefully; signal again to exit immediately");
                token.cancel();
            } else {
                std::process::exit(1);
            }
        }
    });
    Ok(())
}

pub async fn run(global: &GlobalArgs, args: ServerArgs) -> anyhow::Result<()> {
    if let Some(ServerAction::Dbcrypt(DbcryptCommand::Rotate(rotate_args))) = args.action {
        return rotate(rotate_args).await;
    }
    init_logging(global.verbose);
    let mut config = args.config;
    config.config_dir = global.config_dir()?.path().to_path_buf();
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone())?;
    // The dashboard is served beside the API; its router is built once the core has started,
    // which is also when the address people should open is known.
    let dashboard: coderd::FrontDoor =
        std::sync::Arc::new(|state: coderd_core::state::AppState| {
            eprintln!(
                "Open the dashboard at {} (the first visit creates the first user)",
                state.options.access_url
            );
            dashboard::router(state)
        });
    coderd::run_with(config, vec![dashboard], shutdown).await?;
    tracing::info!("coderd stopped");
    Ok(())
}
