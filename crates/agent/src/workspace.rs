//! What the agent does inside the workspace once it has its first manifest: the start scripts
//! (then the lifecycle's verdict on them, then the cron scripts), metadata collection, and on
//! shutdown the stop scripts.

use std::future::pending;
use std::path::Path;
use std::sync::Arc;

use codersdk::agentsdk::{LifecycleState, ManifestScript, ScriptStage};
use futures::future::join_all;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::connection::Session;
use crate::cron;
use crate::environment::{UserInfo, shell_for};
use crate::lifecycle::{Lifecycle, after_start, after_stop};
use crate::metadata;
use crate::process::ShellCommand;
use crate::reporter::Reporter;
use crate::scripts::{Graces, ScriptRunner, bin_dir, create_private_dir, report_devcontainers};

/// The parts of the agent the workspace tasks use.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) config: Arc<Config>,
    pub(crate) reporter: Reporter,
    pub(crate) lifecycle: Arc<Lifecycle>,
}

impl Context {
    fn shell(&self, session: &Session, data_dir: &Path) -> ShellCommand {
        shell_for(
            &self.config.environment,
            &session.manifest,
            &session.token,
            self.config.url.as_str(),
            &bin_dir(data_dir),
        )
    }
}

pub(crate) struct Workspace {
    session: Arc<Session>,
    runner: Arc<ScriptRunner>,
    /// Stops the start and cron scripts.
    scripts_cancel: CancellationToken,
    metadata_cancel: CancellationToken,
    scripts: JoinHandle<()>,
    metadata: JoinHandle<()>,
}

impl Workspace {
    /// Starts the start scripts and metadata collection for the first manifest.
    pub(crate) fn start(
        context: &Context,
        session: Arc<Session>,
        sessions: watch::Receiver<Option<Arc<Session>>>,
    ) -> Self {
        let data_dir = context.config.script_data_dir.join("coder-script-data");
        if let Err(error) = create_private_dir(&bin_dir(&data_dir)) {
            tracing::warn!(dir = %data_dir.display(), %error, "cannot create the script data directory");
        }
        let shell = context.shell(&session, &data_dir);
        let graces = Graces {
            kill: context.config.timings.kill_grace,
            pipes: context.config.timings.pipes_grace,
        };
        let runner = Arc::new(ScriptRunner {
            shell,
            reporter: context.reporter.clone(),
            log_dir: context.config.log_dir.clone(),
            data_dir: data_dir.clone(),
            home: UserInfo::current(&context.config.environment).home,
            graces,
        });
        context.lifecycle.set(LifecycleState::Starting);
        report_devcontainers(
            &context.reporter,
            &session.manifest.devcontainers,
            runner.shell.env.get("PATH").map(String::as_str),
        );
        let scripts_cancel = CancellationToken::new();
        let scripts = tokio::spawn(run_start_then_cron(
            runner.clone(),
            session.manifest.scripts.clone(),
            context.lifecycle.clone(),
            scripts_cancel.clone(),
        ));
        let metadata_cancel = CancellationToken::new();
        // An agent's apps are fixed by its build: checked for as long as the workspace runs.
        tokio::spawn(crate::apphealth::check_all(
            session.manifest.apps.clone(),
            context.reporter.clone(),
            metadata_cancel.clone(),
        ));
        let metadata = tokio::spawn(collect_metadata(
            context.clone(),
            data_dir,
            sessions,
            metadata_cancel.clone(),
        ));
        Self {
            session,
            runner,
            scripts_cancel,
            metadata_cancel,
            scripts,
            metadata,
        }
    }

    /// Stops what runs (start scripts still going are interrupted), runs the stop scripts and
    /// returns the final lifecycle state they earn.
    pub(crate) async fn stop(self) -> LifecycleState {
        self.scripts_cancel.cancel();
        self.metadata_cancel.cancel();
        for (task, handle) in [("scripts", self.scripts), ("metadata", self.metadata)] {
            if let Err(error) = handle.await {
                tracing::error!(task, %error, "a workspace task failed");
            }
        }
        let stop: Vec<&ManifestScript> = self
            .session
            .manifest
            .scripts
            .iter()
            .filter(|s| s.run_on_stop)
            .collect();
        // Stop scripts are bounded by their own timeouts only: they are the last chance to
        // save the user's work.
        let outcomes = self
            .runner
            .run_ordered(&stop, ScriptStage::Stop, &CancellationToken::new())
            .await;
        after_stop(&outcomes)
    }
}

async fn run_start_then_cron(
    runner: Arc<ScriptRunner>,
    scripts: Vec<ManifestScript>,
    lifecycle: Arc<Lifecycle>,
    cancel: CancellationToken,
) {
    let start: Vec<&ManifestScript> = scripts.iter().filter(|s| s.run_on_start).collect();
    let outcomes = runner
        .run_ordered(&start, ScriptStage::Start, &cancel)
        .await;
    if cancel.is_cancelled() {
        // Shutting down: the next state is shutting_down, whatever the scripts did.
        return;
    }
    lifecycle.set(after_start(&outcomes));
    let scheduled = scripts.iter().filter(|s| !s.cron.trim().is_empty());
    join_all(scheduled.map(|script| cron::run_on_schedule(&runner, script, &cancel))).await;
}

/// Collects the metadata of the latest manifest, starting over when a reconnect brings a
/// different one.
async fn collect_metadata(
    context: Context,
    data_dir: std::path::PathBuf,
    mut sessions: watch::Receiver<Option<Arc<Session>>>,
    cancel: CancellationToken,
) {
    loop {
        let Some(session) = sessions.borrow_and_update().clone() else {
            return;
        };
        let shell = context.shell(&session, &data_dir);
        let collecting = metadata::collect_all(
            &shell,
            &session.manifest.metadata,
            &context.reporter,
            &cancel,
        );
        let next_manifest = async {
            loop {
                if sessions.changed().await.is_err() {
                    pending::<()>().await;
                }
                let differs = sessions
                    .borrow_and_update()
                    .as_ref()
                    .is_some_and(|s| s.manifest != session.manifest);
                if differs {
                    return;
                }
            }
        };
        tokio::pin!(next_manifest);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = &mut next_manifest => continue,
            () = collecting => {}
        }
        // Every description ran once only (interval 0); wait for a new manifest.
        tokio::select! {
            () = cancel.cancelled() => return,
            () = next_manifest => {}
        }
    }
}
