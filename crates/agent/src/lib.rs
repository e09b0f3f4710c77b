#![doc = include_str!("../README.md")]

mod apphealth;
mod backoff;
pub mod config;
mod connection;
mod cron;
mod environment;
pub mod error;
mod lifecycle;
mod login;
mod metadata;
mod process;
mod pty;
mod reporter;
mod rpc;
mod scripts;
mod ssh;
mod stats;
mod streams;
mod terminal;
mod workspace;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codersdk::agentsdk::LifecycleState;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use config::{Config, Timings, TokenSource};
pub use error::AgentError;

use connection::Link;
use lifecycle::Lifecycle;
use reporter::Reporter;
use stats::Stats;
use workspace::{Context, Workspace};

/// Runs the agent until `shutdown` is cancelled, then shuts the workspace down in order (stop
/// scripts, final lifecycle state) and returns once coderd has been told, or the final report
/// timeout has passed.
///
/// Fails only when it cannot start: an unusable log directory or token file, or a URL that is
/// not HTTP(S). Everything later is logged, reported to coderd and retried.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), AgentError> {
    if !matches!(config.url.scheme(), "http" | "https") {
        return Err(AgentError::Config(format!(
            "the agent URL must be http:// or https://, not {}",
            config.url
        )));
    }
    config::ensure_dir(&config.log_dir)?;
    config.token.read()?;

    let timings = config.timings.clone();
    let config = Arc::new(config);
    let reporter = Reporter::new(timings.log_flush_interval, timings.metadata_report_interval);
    let lifecycle = Arc::new(Lifecycle::new(reporter.clone()));
    let stats = Arc::new(Stats::new(timings.stats_interval));
    let (sessions_tx, sessions) = watch::channel(None);
    let services = Arc::new(streams::Services {
        stats: stats.clone(),
        logins: login::Logins::new(config.clone(), sessions.clone()),
        terminals: Arc::new(pty::Terminals::new(timings.pty_timeout)),
    });
    tracing::info!(url = %config.url, version = %config.version, "starting the workspace agent");

    let stop_link = CancellationToken::new();
    let refused = Arc::new(AtomicBool::new(false));
    let link = tokio::spawn(connection::maintain(
        Link {
            config: config.clone(),
            reporter: reporter.clone(),
            stats,
            services,
            sessions: sessions_tx,
            refused: refused.clone(),
        },
        stop_link.clone(),
    ));

    let context = Context {
        config,
        reporter: reporter.clone(),
        lifecycle: lifecycle.clone(),
    };
    let mut first = sessions.clone();
    let first = tokio::select! {
        session = first.wait_for(Option::is_some) => session.ok().and_then(|s| s.clone()),
        () = shutdown.cancelled() => None,
    };
    let workspace = first.map(|session| Workspace::start(&context, session, sessions));

    shutdown.cancelled().await;
    tracing::info!("shutting down");
    lifecycle.set(LifecycleState::ShuttingDown);
    let last = match workspace {
        Some(workspace) => workspace.stop().await,
        None => LifecycleState::Off,
    };
    lifecycle.set(last);
    if refused.load(Ordering::Relaxed) {
        // Waiting would only collect more refusals (an agent of an old build, a revoked
        // token) and hold up whoever is stopping the workspace.
        tracing::info!("coderd refuses this agent: not waiting to report the final state");
    } else if !reporter.wait_idle(timings.final_report_timeout).await {
        tracing::warn!(
            timeout = ?timings.final_report_timeout,
            "could not tell coderd the final lifecycle state and logs in time"
        );
    }
    stop_link.cancel();
    if let Err(error) = link.await {
        tracing::error!(%error, "the connection task failed");
    }
    tracing::info!("the agent stopped");
    Ok(())
}
