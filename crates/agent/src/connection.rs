//! The agent's link to coderd. Each attempt authenticates afresh (a rebuilt workspace may run
//! with a new agent token), fetches the manifest and announces the agent; then the connection
//! carries the queued reports, the stats and the streams coderd opens until it drops, and the
//! agent reconnects with backoff. Refusals (401/403: a wrong token, or an agent of a build that
//! is no longer the workspace's latest) are logged plainly and retried too, as Coder's agent
//! does: the workspace may yet be rebuilt around this agent's token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codersdk::ClientError;
use codersdk::agentsdk::{AgentConnection, Manifest, Request, Response, StartupInfo};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::config::Config;
use crate::environment::{UserInfo, expand_path};
use crate::reporter::Reporter;
use crate::rpc;
use crate::stats::Stats;
use crate::streams;

/// What the latest connection told the agent, and the token it connected with (scripts get it,
/// as in Coder, for the `coder` subcommands that act as the agent).
pub(crate) struct Session {
    pub(crate) manifest: Manifest,
    pub(crate) token: String,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("agent_id", &self.manifest.agent_id)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Everything the connection loop shares with the rest of the agent.
pub(crate) struct Link {
    pub(crate) config: Arc<Config>,
    pub(crate) reporter: Reporter,
    pub(crate) stats: Arc<Stats>,
    pub(crate) services: Arc<streams::Services>,
    pub(crate) sessions: watch::Sender<Option<Arc<Session>>>,
    /// Whether coderd's latest answer was a refusal (401/403), cleared by the next connection.
    /// A refused agent cannot report anything, so its shutdown does not wait to.
    pub(crate) refused: Arc<AtomicBool>,
}

/// Connects, serves and reconnects until `stop`.
pub(crate) async fn maintain(link: Link, stop: CancellationToken) {
    let mut backoff = Backoff::new();
    loop {
        let attempt = async {
            if let Some(connection) = connect(&link).await {
                backoff.reset();
                serve(&link, connection).await;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = attempt => {}
        }
        let delay = backoff.delay();
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One attempt: dial, fetch the manifest, announce the agent. Failures are logged here.
async fn connect(link: &Link) -> Option<AgentConnection> {
    let url = &link.config.url;
    let token = match link.config.token.read() {
        Ok(token) => token,
        Err(error) => {
            tracing::error!(%error, "cannot read the agent token");
            return None;
        }
    };
    let connection = match AgentConnection::connect(url, &token).await {
        Ok(connection) => connection,
        Err(ClientError::Api { status, response }) if status == 401 || status == 403 => {
            let detail = if response.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", response.detail)
            };
            tracing::error!(
                status,
                "coderd refused this agent: {}{detail}; retrying",
                response.message
            );
            link.refused.store(true, Ordering::Relaxed);
            return None;
        }
        Err(error) => {
            tracing::warn!(url = %url, %error, "cannot connect to coderd; retrying");
            return None;
        }
    };
    link.refused.store(false, Ordering::Relaxed);
    let manifest = match rpc::call(&connection, Request::GetManifest).await {
        Ok(Response::Manifest(manifest)) => *manifest,
        Ok(other) => {
            tracing::warn!(
                ?other,
                "coderd answered the manifest request with something else"
            );
            return None;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot fetch the manifest");
            return None;
        }
    };
    let startup = startup_info(&link.config, &manifest);
    tracing::info!(
        agent_id = %manifest.agent_id,
        workspace = %manifest.workspace_name,
        agent = %manifest.agent_name,
        "connected to coderd"
    );
    link.sessions
        .send_replace(Some(Arc::new(Session { manifest, token })));
    if let Err(error) = rpc::call(&connection, Request::UpdateStartup(startup)).await {
        tracing::warn!(%error, "cannot report the agent's startup information");
        if matches!(error, rpc::CallError::Transport(_)) {
            return None;
        }
    }
    Some(connection)
}

/// Carries reports, stats and inbound streams until the connection drops.
async fn serve(link: &Link, mut connection: AgentConnection) {
    // The flusher and the stats loop share the connection while the inbound streams are
    // consumed on their own, so the receiver is taken out of it.
    let (_, closed) = mpsc::channel(1);
    let inbound = std::mem::replace(&mut connection.inbound, closed);
    // Only the connection ending ends this: the loops run forever, and the inbound streams
    // end with the session.
    tokio::select! {
        () = connection.closed() => {}
        () = link.reporter.flush_loop(&connection) => {}
        () = link.stats.report_loop(&connection) => {}
        () = streams::serve(inbound, link.services.clone()) => {}
    }
    tracing::warn!("lost the connection to coderd; reconnecting");
}

/// What the agent tells coderd about itself on each connect.
pub(crate) fn startup_info(config: &Config, manifest: &Manifest) -> StartupInfo {
    let home = UserInfo::current(&config.environment).home;
    StartupInfo {
        version: config.version.clone(),
        expanded_directory: expand_path(&manifest.directory, home.as_deref(), &config.environment)
            .map(|dir| dir.to_string_lossy().into_owned())
            .unwrap_or_default(),
        operating_system: operating_system().to_string(),
        architecture: architecture().to_string(),
        subsystems: config.subsystems.clone(),
    }
}

/// The OS as Coder names it (Go's `GOOS`).
fn operating_system() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// The architecture as Coder names it (Go's `GOARCH`).
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::*;
    use crate::config::TokenSource;

    #[test]
    fn startup_names_the_platform_as_coder_does() -> anyhow::Result<()> {
        let mut config = Config::new(Url::parse("http://coderd")?, TokenSource::Value("t".into()));
        config.environment = [("HOME".to_string(), "/home/coder".to_string())].into();
        config.subsystems = vec!["envbox".into()];
        let manifest = Manifest {
            directory: "~/src".into(),
            ..Manifest::default()
        };
        let info = startup_info(&config, &manifest);
        assert_eq!(info.expanded_directory, "/home/coder/src");
        assert_eq!(info.subsystems, ["envbox"]);
        assert!(info.version.starts_with('v'));
        assert!(["linux", "darwin"].contains(&info.operating_system.as_str()));
        assert!(!["x86_64", "aarch64"].contains(&info.architecture.as_str()));
        Ok(())
    }
}
