//! `coder provisionerd start`: an external provisioner daemon serving a deployment until
//! SIGINT/SIGTERM (a second one stops its running job at once).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codersdk::provisionerd::Tags;
use provisionerd::engines::echo::{self, EchoEngine};
use provisionerd::engines::terraform::{self, TerraformEngine};
use provisionerd::{DaemonAuth, DaemonConfig, Engine, WebSocketConnector};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::GlobalArgs;
use crate::commands::server::init_logging;

/// The organization path segment that lets coderd choose: the key's organization, or the
/// default one.
const DEFAULT_ORGANIZATION: &str = "default";

#[derive(clap::Args)]
pub struct StartArgs {
    /// Tags the daemon offers for job matching, as KEY=VALUE (repeatable).
    #[arg(
        short = 't',
        long = "tag",
        env = "CODER_PROVISIONERD_TAGS",
        value_name = "KEY=VALUE",
        value_delimiter = ','
    )]
    pub tags: Vec<String>,

    /// Name of the daemon [default: the hostname and a random suffix].
    #[arg(long, env = "CODER_PROVISIONER_DAEMON_NAME")]
    pub name: Option<String>,

    /// Pre-shared key to authenticate with.
    #[arg(long, env = "CODER_PROVISIONER_DAEMON_PSK", hide_env_values = true)]
    pub psk: Option<String>,

    /// Provisioner key to authenticate with (its tags and organization apply).
    #[arg(long, env = "CODER_PROVISIONER_DAEMON_KEY", hide_env_values = true)]
    pub key: Option<String>,

    /// Organization to serve [default: the key's organization, or the default one].
    #[arg(short = 'O', long = "org", env = "CODER_ORGANIZATION")]
    pub org: Option<String>,

    /// Directory for cached data (terraform providers) [default: ~/.cache/coder].
    #[arg(short = 'c', long, env = "CODER_CACHE_DIRECTORY", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Terraform binary to run [default: terraform from PATH].
    #[arg(
        long,
        env = "CODER_PROVISIONER_DAEMON_TERRAFORM_PATH",
        value_name = "PATH"
    )]
    pub terraform_path: Option<PathBuf>,

    /// Provisioner types to run (terraform, echo).
    #[arg(
        long,
        env = "CODER_PROVISIONER_TYPES",
        value_delimiter = ',',
        default_value = "terraform"
    )]
    pub provisioner_types: Vec<String>,

    /// How long a running job may go on after SIGINT/SIGTERM before it is canceled.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
}

impl std::fmt::Debug for StartArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |secret: &Option<String>| secret.as_ref().map(|_| "<redacted>");
        f.debug_struct("StartArgs")
            .field("tags", &self.tags)
            .field("name", &self.name)
            .field("psk", &redacted(&self.psk))
            .field("key", &redacted(&self.key))
            .field("org", &self.org)
            .field("cache_dir", &self.cache_dir)
            .field("terraform_path", &self.terraform_path)
            .field("provisioner_types", &self.provisioner_types)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

pub async fn start(global: &GlobalArgs, args: StartArgs) -> anyhow::Result<()> {
    init_logging(global.verbose);
    let tags = parse_tags(&args.tags)?;
    let (url, auth) = credentials(global, &args, &tags)?;
    let cache_dir = match &args.cache_dir {
        Some(dir) => dir.clone(),
        None => dirs::cache_dir()
            .context("cannot find a cache directory; pass --cache-dir")?
            .join("coder"),
    };
    let (engines, terraform) = engines(
        &args.provisioner_types,
        &cache_dir,
        args.terraform_path.as_deref(),
    )?;
    if let Some(terraform) = terraform {
        // A daemon that would fail every terraform job had better not start.
        let (binary, version) = terraform
            .check()
            .await
            .context("this provisioner daemon runs terraform jobs")?;
        tracing::info!(terraform = %binary.display(), %version, "using terraform");
    }

    // Chosen once: reconnects must present the same name to keep the registration.
    let name = args
        .name
        .clone()
        .unwrap_or_else(provisionerd::config::default_name);
    let mut config = DaemonConfig::new(name);
    config.tags = tags;
    config.engines = engines;
    config.shutdown_grace = args.shutdown_grace;

    let organization = args.org.as_deref().unwrap_or(DEFAULT_ORGANIZATION);
    let connector = WebSocketConnector::new(url.clone(), organization, auth)?;
    tracing::info!(
        url = %url,
        organization,
        name = %config.name,
        "starting the provisioner daemon"
    );

    let shutdown = CancellationToken::new();
    let now = CancellationToken::new();
    stop_on_signals(shutdown.clone(), now.clone())?;
    provisionerd::run_until(connector, config, shutdown, now)
        .await
        .context("the provisioner daemon stopped")?;
    Ok(())
}

/// SIGINT/SIGTERM (`docker stop`) stops the daemon gracefully: the running job may finish
/// within the grace. A second signal stops the job now (it is reported, with its state); a
/// third exits at once.
fn stop_on_signals(shutdown: CancellationToken, now: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::spawn(async move {
        for round in 0.. {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            match round {
                0 => {
                    tracing::info!(
                        "shutting down gracefully; signal again to stop the running job now"
                    );
                    shutdown.cancel();
                }
                1 => {
                    tracing::info!("stopping the running job now; signal again to exit at once");
                    now.cancel();
                }
                _ => std::process::exit(1),
            }
        }
    });
    Ok(())
}

/// The deployment URL and the one credential to present: a provisioner key, else the PSK, else
/// the session token.
fn credentials(
    global: &GlobalArgs,
    args: &StartArgs,
    tags: &Tags,
) -> anyhow::Result<(Url, DaemonAuth)> {
    let daemon_secret = match (&args.key, &args.psk) {
        (Some(key), psk) => {
            if psk.is_some() {
                tracing::warn!("both a provisioner key and a PSK are set; using the key");
            }
            if !tags.is_empty() {
                bail!("tags cannot be set with a provisioner key: the daemon uses the key's tags");
            }
            Some(DaemonAuth::Key(key.clone()))
        }
        (None, Some(psk)) => Some(DaemonAuth::Psk(psk.clone())),
        (None, None) => None,
    };
    match daemon_secret {
        Some(auth) => {
            let url = match &global.url {
                Some(url) => url.clone(),
                None => global.config_dir()?.url()?.context(
                    "the deployment URL is missing: pass --url or set CODER_URL (or run 'coder login')",
                )?,
            };
            Ok((url, auth))
        }
        None => {
            let client = global.client().context(
                "authenticate with --key, --psk, or a session (--token / CODER_SESSION_TOKEN, or 'coder login')",
            )?;
            let token = client.token().unwrap_or_default().to_string();
            Ok((client.url().clone(), DaemonAuth::SessionToken(token)))
        }
    }
}

/// `KEY=VALUE` pairs; empty items (a trailing comma) are ignored, the last value of a key wins.
fn parse_tags(raw: &[String]) -> anyhow::Result<Tags> {
    let mut tags = Tags::new();
    for item in raw.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .with_context(|| format!("invalid tag {item:?}: expected KEY=VALUE"))?;
        let key = key.trim();
        if key.is_empty() || key.contains('\0') || value.contains('\0') {
            bail!("invalid tag {item:?}: the key must be non-empty and neither may contain NUL");
        }
        tags.insert(key.to_string(), value.trim().to_string());
    }
    Ok(tags)
}

/// Engines by provisioner type.
type Engines = BTreeMap<String, Arc<dyn Engine>>;

/// The engines for `types`, and the terraform engine among them (to check at startup).
fn engines(
    types: &[String],
    cache_dir: &Path,
    terraform_path: Option<&Path>,
) -> anyhow::Result<(Engines, Option<Arc<TerraformEngine>>)> {
    let mut engines = Engines::new();
    let mut terraform_engine = None;
    for kind in types.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        match kind {
            echo::PROVISIONER => {
                engines.insert(kind.to_string(), Arc::new(EchoEngine));
            }
            terraform::PROVISIONER => {
                // Terraform starts this very binary as the coder/coder provider.
                let exe = std::env::current_exe().context("finding the coder executable")?;
                let mut settings = terraform::Settings::new(exe, cache_dir);
                if let Some(path) = terraform_path {
                    settings.terraform = path.to_path_buf();
                }
                let engine = Arc::new(TerraformEngine::new(settings)?);
                engines.insert(kind.to_string(), engine.clone());
                terraform_engine = Some(engine);
            }
            other => bail!("unknown provisioner type {other:?}: choose from terraform, echo"),
        }
    }
    if engines.is_empty() {
        bail!("no provisioner types given: pass --provisioner-types");
    }
    Ok((engines, terraform_engine))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        global: GlobalArgs,
        #[command(flatten)]
        start: StartArgs,
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("provisionerd-start").chain(args.iter().copied()))
    }

    #[test]
    fn tags_parse_and_validate() -> anyhow::Result<()> {
        let tags = parse_tags(&["env=on-prem".into(), " dc = chicago ".into(), "".into()])?;
        assert_eq!(tags.get("env").map(String::as_str), Some("on-prem"));
        assert_eq!(tags.get("dc").map(String::as_str), Some("chicago"));
        assert_eq!(tags.len(), 2);
        assert!(parse_tags(&["novalue".into()]).is_err());
        assert!(parse_tags(&["=x".into()]).is_err());
        assert_eq!(
            parse_tags(&["k=".into()])?.get("k").map(String::as_str),
            Some("")
        );
        Ok(())
    }

    #[test]
    fn flags_parse() -> anyhow::Result<()> {
        let cli = parse(&[
            "-t",
            "a=1",
            "--tag",
            "b=2,c=3",
            "--provisioner-types",
            "echo",
            "--shutdown-grace",
            "1m",
            "-O",
            "acme",
            "--terraform-path",
            "/opt/tf/terraform",
        ])?;
        assert_eq!(cli.start.tags, ["a=1", "b=2", "c=3"]);
        assert_eq!(cli.start.provisioner_types, ["echo"]);
        assert_eq!(cli.start.shutdown_grace, Duration::from_secs(60));
        assert_eq!(cli.start.org.as_deref(), Some("acme"));
        assert_eq!(
            cli.start.terraform_path.as_deref(),
            Some(Path::new("/opt/tf/terraform"))
        );
        Ok(())
    }

    #[test]
    fn engines_are_built_per_type() -> anyhow::Result<()> {
        let cache = tempfile::tempdir()?;
        let (both, terraform) = engines(
            &["terraform".into(), "echo".into()],
            cache.path(),
            Some(Path::new("/opt/terraform")),
        )?;
        assert_eq!(both.keys().collect::<Vec<_>>(), ["echo", "terraform"]);
        assert!(terraform.is_some());
        assert!(
            cache.path().join("terraform/cli.tfrc").is_file(),
            "the terraform engine writes its CLI config into the cache"
        );
        let (echo, terraform) = engines(&["echo".into()], cache.path(), None)?;
        assert_eq!(echo.keys().collect::<Vec<_>>(), ["echo"]);
        assert!(terraform.is_none());
        assert!(engines(&["docker".into()], cache.path(), None).is_err());
        assert!(engines(&[], cache.path(), None).is_err());
        Ok(())
    }

    #[test]
    fn credentials_take_key_then_psk_then_session() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().to_str().context("utf-8 temp dir")?;
        let base = ["--url", "http://127.0.0.1:3000", "--global-config", config];

        let with =
            |extra: &[&str]| -> anyhow::Result<Cli> { Ok(parse(&[&base[..], extra].concat())?) };
        let cli = with(&["--key", "k", "--psk", "p"])?;
        let (url, auth) = credentials(&cli.global, &cli.start, &Tags::new())?;
        assert_eq!(url.as_str(), "http://127.0.0.1:3000/");
        assert_eq!(auth, DaemonAuth::Key("k".into()));

        let cli = with(&["--psk", "p"])?;
        let (_, auth) = credentials(&cli.global, &cli.start, &Tags::new())?;
        assert_eq!(auth, DaemonAuth::Psk("p".into()));

        let cli = with(&["--token", "t"])?;
        let (_, auth) = credentials(&cli.global, &cli.start, &Tags::new())?;
        assert_eq!(auth, DaemonAuth::SessionToken("t".into()));

        let cli = with(&["--key", "k"])?;
        let tags = parse_tags(&["env=x".into()])?;
        assert!(
            credentials(&cli.global, &cli.start, &tags).is_err(),
            "no tags with a key"
        );

        let cli = parse(&["--psk", "p", "--global-config", config])?;
        let error = credentials(&cli.global, &cli.start, &Tags::new()).expect_err("no URL");
        assert!(error.to_string().contains("CODER_URL"), "{error}");
        Ok(())
    }

    #[test]
    fn secrets_stay_out_of_debug_output() -> anyhow::Result<()> {
        let cli = parse(&["--psk", "psk-secret", "--key", "key-secret"])?;
        let shown = format!("{:?}", cli.start);
        assert!(!shown.contains("secret"), "{shown}");
        Ok(())
    }
}
