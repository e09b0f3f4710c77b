//! Starting a real agent in the test's process, with shortened timings and a home directory of
//! its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::{AgentError, Config, Timings, TokenSource};
use anyhow::Context as _;
use codersdk::agentsdk::{Manifest, ManifestScript, MetadataDescription};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use url::Url;
use uuid::Uuid;

pub const TOKEN: &str = "agent-token-1";
/// How long a reconnecting PTY outlives its last client in the tests (5 minutes in Coder).
pub const PTY_TIMEOUT: Duration = Duration::from_secs(3);

pub struct TestAgent {
    pub dir: tempfile::TempDir,
    pub shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), AgentError>>>,
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A configuration pointing at `url`, logging under a fresh temp dir whose `home` is `$HOME`.
pub fn config(url: &Url, token: TokenSource) -> anyhow::Result<(Config, tempfile::TempDir)> {
    init_tracing();
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let mut config = Config::new(url.clone(), token);
    config.log_dir = dir.path().join("logs");
    config.script_data_dir = dir.path().join("data");
    config.environment = [
        ("HOME", home.to_string_lossy().into_owned()),
        ("SHELL", "/bin/sh".into()),
        (
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        ),
        ("AGENT_ONLY", "from-the-agent".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    config.timings = Timings {
        kill_grace: Duration::from_millis(500),
        pipes_grace: Duration::from_millis(500),
        log_flush_interval: Duration::from_millis(50),
        metadata_report_interval: Duration::from_millis(200),
        stats_interval: Duration::from_secs(1),
        final_report_timeout: Duration::from_secs(5),
        pty_timeout: PTY_TIMEOUT,
    };
    Ok((config, dir))
}

impl TestAgent {
    pub fn start(config: Config, dir: tempfile::TempDir) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(agent::run(config, shutdown.clone()));
        Self {
            dir,
            shutdown,
            task: Some(task),
        }
    }

    /// An agent with the default test configuration and token.
    pub fn connect(url: &Url) -> anyhow::Result<Self> {
        Self::connect_with(url, TOKEN)
    }

    pub fn connect_with(url: &Url, token: &str) -> anyhow::Result<Self> {
        let (config, dir) = config(url, TokenSource::Value(token.into()))?;
        Ok(Self::start(config, dir))
    }

    /// Whether `run` has returned.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// Shuts the agent down as SIGTERM would and waits for `run` to return.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let task = self.task.take().context("already stopped")?;
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .context("the agent did not stop")???;
        Ok(())
    }
}

pub fn script(body: &str) -> ManifestScript {
    ManifestScript {
        id: Uuid::new_v4(),
        log_source_id: Uuid::new_v4(),
        display_name: "Startup".into(),
        script: body.into(),
        run_on_start: true,
        ..ManifestScript::default()
    }
}

pub fn stop_script(body: &str) -> ManifestScript {
    ManifestScript {
        display_name: "Shutdown".into(),
        run_on_start: false,
        run_on_stop: true,
        ..script(body)
    }
}

pub fn metadata(key: &str, body: &str, interval: i64, timeout: i64) -> MetadataDescription {
    MetadataDescription {
        key: key.into(),
        display_name: key.into(),
        script: body.into(),
        interval_seconds: interval,
        timeout_seconds: timeout,
    }
}

pub fn manifest(scripts: Vec<ManifestScript>) -> Manifest {
    Manifest {
        agent_id: Uuid::new_v4(),
        agent_name: "main".into(),
        owner_name: "alice".into(),
        workspace_id: Uuid::new_v4(),
        workspace_name: "dev".into(),
        directory: "~/project".into(),
        scripts,
        environment_variables: [(
            "FROM_TEMPLATE".to_string(),
            "template-$AGENT_ONLY".to_string(),
        )]
        .into(),
        ..Manifest::default()
    }
}

pub fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// A TCP echo service on 127.0.0.1, for as long as the test runs; its port.
pub async fn echo_server() -> anyhow::Result<u16> {
    let service = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = service.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = service.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    Ok(port)
}

/// A fake coderd and an agent connected to it (its lifecycle reported).
pub async fn ready_agent() -> anyhow::Result<(crate::peer::Peer, TestAgent)> {
    let peer = crate::peer::Peer::start(TOKEN, manifest(vec![])).await?;
    let agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("a connected agent", |p| !p.lifecycle().is_empty())
        .await?;
    Ok((peer, agent))
}
