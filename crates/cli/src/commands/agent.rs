//! `coder agent`: the workspace agent, started inside a workspace by the template's init script
//! and run until SIGINT/SIGTERM (then it runs the stop scripts and reports its final state).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::GlobalArgs;
use crate::commands::server::cancel_on_signal;

/// The agent's own log file, in its log directory.
const LOG_FILE: &str = "coder-agent.log";

#[derive(clap::Args)]
pub struct AgentArgs {
    /// URL of the deployment the agent connects to.
    #[arg(long = "agent-url", env = "CODER_AGENT_URL", value_name = "URL")]
    pub agent_url: Url,

    /// The agent's token (from the workspace's template).
    #[arg(
        long = "agent-token",
        env = "CODER_AGENT_TOKEN",
        hide_env_values = true
    )]
    pub agent_token: Option<String>,

    /// A file holding the agent's token, read again on every reconnect.
    #[arg(
        long = "agent-token-file",
        env = "CODER_AGENT_TOKEN_FILE",
        value_name = "FILE"
    )]
    pub agent_token_file: Option<PathBuf>,

    /// How the agent authenticates; only "token" is supported.
    #[arg(long, env = "CODER_AGENT_AUTH", default_value = "token")]
    pub auth: String,

    /// Directory for the agent's log (coder-agent.log) and the scripts' logs [default: the
    /// system temp directory].
    #[arg(long, env = "CODER_AGENT_LOG_DIR", value_name = "DIR")]
    pub log_dir: Option<PathBuf>,

    /// Directory under which scripts keep data and binaries (coder-script-data) [default: the
    /// system temp directory].
    #[arg(long, env = "CODER_AGENT_SCRIPT_DATA_DIR", value_name = "DIR")]
    pub script_data_dir: Option<PathBuf>,

    /// Special environments the agent runs in (e.g. envbox, envbuilder), told to coderd.
    #[arg(
        long = "subsystem",
        env = "CODER_AGENT_SUBSYSTEM",
        value_delimiter = ','
    )]
    pub subsystems: Vec<String>,
}

impl std::fmt::Debug for AgentArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentArgs")
            .field("agent_url", &self.agent_url)
            .field(
                "agent_token",
                &self.agent_token.as_ref().map(|_| "<redacted>"),
            )
            .field("agent_token_file", &self.agent_token_file)
            .field("auth", &self.auth)
            .field("log_dir", &self.log_dir)
            .field("script_data_dir", &self.script_data_dir)
            .field("subsystems", &self.subsystems)
            .finish()
    }
}

pub async fn run(global: &GlobalArgs, args: AgentArgs) -> anyhow::Result<()> {
    let config = config(args)?;
    init_logging(global.verbose, &config.log_dir)?;
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone())?;
    agent::run(config, shutdown)
        .await
        .context("the agent could not start")?;
    Ok(())
}

/// The agent's configuration from the flags (and the process environment, which scripts
/// inherit).
fn config(args: AgentArgs) -> anyhow::Result<agent::Config> {
    match args.auth.trim() {
        "token" => {}
        other @ ("google-instance-identity"
        | "aws-instance-identity"
        | "azure-instance-identity") => {
            bail!(
                "CODER_AGENT_AUTH={other} is not supported by this agent yet: give the template's \
                 agent token with CODER_AGENT_TOKEN (or CODER_AGENT_TOKEN_FILE) and use \
                 CODER_AGENT_AUTH=token"
            )
        }
        other => bail!("unknown CODER_AGENT_AUTH {other:?}: the agent supports \"token\""),
    }
    let token = match (args.agent_token, args.agent_token_file) {
        (Some(token), _) if !token.trim().is_empty() => agent::TokenSource::Value(token),
        (_, Some(file)) => agent::TokenSource::File(file),
        _ => bail!("the agent token is missing: set CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE"),
    };
    let mut config = agent::Config::new(args.agent_url, token);
    if let Some(dir) = args.log_dir {
        config.log_dir = dir;
    }
    if let Some(dir) = args.script_data_dir {
        config.script_data_dir = dir;
    }
    config.subsystems = args
        .subsystems
        .iter()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    Ok(config)
}

/// Logs to stderr and, so that they survive the terminal the init script ran in, to
/// `<log dir>/coder-agent.log`.
fn init_logging(verbose: bool, log_dir: &Path) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, fmt};

    std::fs::create_dir_all(log_dir)
        .with_context(|| format!("creating the log directory {}", log_dir.display()))?;
    let path = log_dir.join(LOG_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening the agent log {}", path.display()))?;
    let default = if verbose { "debug" } else { "info" };
    let filter = EnvFilter::try_from_env("CODER_LOG_FILTER")
        .or_else(|_| EnvFilter::try_new(default))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt::layer().with_writer(std::io::stderr))
        .with(
            fmt::layer()
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file)),
        )
        .try_init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn parse(args: &[&str]) -> anyhow::Result<AgentArgs> {
        let base = ["agent", "--agent-url", "http://coderd.example:3000"];
        Ok(Cli::try_parse_from(base.iter().chain(args))?.agent)
    }

    #[test]
    fn flags_build_the_agent_config() -> anyhow::Result<()> {
        let built = config(parse(&[
            "--agent-token",
            "secret-token",
            "--log-dir",
            "/var/log/coder",
            "--subsystem",
            "EnvBox, ,envbuilder",
        ])?)?;
        assert_eq!(built.url.as_str(), "http://coderd.example:3000/");
        assert_eq!(built.log_dir, Path::new("/var/log/coder"));
        assert_eq!(built.script_data_dir, std::env::temp_dir());
        assert_eq!(built.subsystems, ["envbox", "envbuilder"]);
        assert!(matches!(built.token, agent::TokenSource::Value(_)));

        let from_file = config(parse(&["--agent-token-file", "/run/token"])?)?;
        assert!(
            matches!(&from_file.token, agent::TokenSource::File(p) if p == Path::new("/run/token"))
        );
        Ok(())
    }

    #[test]
    fn unsupported_auth_and_missing_tokens_fail_clearly() -> anyhow::Result<()> {
        let error = config(parse(&[
            "--auth",
            "aws-instance-identity",
            "--agent-token",
            "t",
        ])?)
        .expect_err("unsupported");
        assert!(error.to_string().contains("not supported"), "{error}");
        let error =
            config(parse(&["--auth", "magic", "--agent-token", "t"])?).expect_err("unknown");
        assert!(error.to_string().contains("unknown"), "{error}");
        let error = config(parse(&[])?).expect_err("no token");
        assert!(error.to_string().contains("CODER_AGENT_TOKEN"), "{error}");
        assert!(Cli::try_parse_from(["agent", "--agent-url", "not a url"]).is_err());
        Ok(())
    }

    #[test]
    fn the_token_stays_out_of_debug_output() -> anyhow::Result<()> {
        let args = parse(&["--agent-token", "secret-token"])?;
        let shown = format!("{args:?}");
        assert!(!shown.contains("secret"), "{shown}");
        let shown = format!("{:?}", config(args)?);
        assert!(!shown.contains("secret"), "{shown}");
        Ok(())
    }
}
