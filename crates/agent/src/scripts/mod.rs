//! The manifest's scripts: where each one logs, the environment it gets, and running a
//! phase's scripts (start, stop) as their dependencies allow (`ordering`) or one on its
//! schedule (cron, see [`crate::cron`]). Also the agent's report on dev containers
//! (`devcontainers`), which it cannot run.

mod devcontainers;
mod ordering;
mod output;
mod runner;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use codersdk::agentsdk::{ManifestScript, ScriptStage, ScriptStatus, ScriptTiming};
use tokio_util::sync::CancellationToken;

use crate::environment::expand_vars;
use crate::process::ShellCommand;
use crate::reporter::Reporter;
pub(crate) use devcontainers::report_devcontainers;
use output::ScriptOutput;
pub(crate) use runner::Graces;

/// How a script run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    /// It could not start, or ended with a non-zero status or a signal.
    Failed,
    /// It ran past its timeout and was stopped.
    TimedOut,
    /// It exited, but something it started kept its output open.
    PipesHeldOpen,
    /// The agent stopped it because it is shutting down.
    Interrupted,
    /// It did not run: a prerequisite it needed to succeed did not.
    Skipped,
}

/// Runs the manifest's scripts for one workspace.
pub(crate) struct ScriptRunner {
    pub(crate) shell: ShellCommand,
    pub(crate) reporter: Reporter,
    pub(crate) log_dir: PathBuf,
    /// `<script data dir>/coder-script-data`: a directory per log source, plus `bin`.
    pub(crate) data_dir: PathBuf,
    /// For `~` in log paths.
    pub(crate) home: Option<PathBuf>,
    pub(crate) graces: Graces,
}

impl ScriptRunner {
    /// Runs one script to its end (or until `cancel`), logging how it went and reporting the
    /// run for the build's timeline.
    pub(crate) async fn run(
        &self,
        script: &ManifestScript,
        stage: ScriptStage,
        cancel: &CancellationToken,
    ) -> Outcome {
        let name = display_name(script);
        let log_path = log_path(script, &self.log_dir, self.home.as_deref(), &self.shell.env);
        let data_dir = self.data_dir.join(script.log_source_id.to_string());
        if let Err(error) = create_private_dir(&data_dir) {
            tracing::warn!(script = %name, %error, "cannot create the script's data directory");
        }
        let extra_env = [
            (
                "CODER_SCRIPT_DATA_DIR",
                data_dir.to_string_lossy().into_owned(),
            ),
            (
                "CODER_SCRIPT_BIN_DIR",
                bin_dir(&self.data_dir).to_string_lossy().into_owned(),
            ),
        ];
        let timeout = u64::try_from(script.timeout_seconds)
            .ok()
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        let output =
            ScriptOutput::open(&log_path, self.reporter.clone(), script.log_source_id).await;
        tracing::info!(script = %name, log_path = %log_path.display(), "running script");
        let started = Instant::now();
        let started_at = chrono::Utc::now();
        let (outcome, exit_code) = runner::run(
            &self.shell,
            &script.script,
            &extra_env,
            timeout,
            &output,
            self.graces,
            cancel,
        )
        .await;
        let took = format!("{:.1}s", started.elapsed().as_secs_f64());
        if outcome == Outcome::Succeeded {
            tracing::info!(script = %name, took, "script finished");
        } else {
            tracing::warn!(script = %name, took, ?outcome, "script did not succeed");
        }
        if let Some(status) = timing_status(outcome) {
            self.reporter.push_script_timing(ScriptTiming {
                script_id: script.id,
                started_at,
                ended_at: chrono::Utc::now(),
                exit_code,
                stage,
                status,
            });
        }
        outcome
    }

    /// A line from the agent about `script` (waiting for, or skipping it), where its output
    /// goes.
    pub(crate) async fn note(&self, script: &ManifestScript, level: &str, message: &str) {
        let log_path = log_path(script, &self.log_dir, self.home.as_deref(), &self.shell.env);
        ScriptOutput::open(&log_path, self.reporter.clone(), script.log_source_id)
            .await
            .note(level, message)
            .await;
    }
}

/// A run's status as Coder's timeline names it; a skipped script did not run.
fn timing_status(outcome: Outcome) -> Option<ScriptStatus> {
    match outcome {
        Outcome::Succeeded => Some(ScriptStatus::Ok),
        Outcome::Failed | Outcome::Interrupted => Some(ScriptStatus::ExitFailure),
        Outcome::TimedOut => Some(ScriptStatus::TimedOut),
        Outcome::PipesHeldOpen => Some(ScriptStatus::PipesLeftOpen),
        Outcome::Skipped => None,
    }
}

/// How scripts are named in the agent's log.
pub(crate) fn display_name(script: &ManifestScript) -> String {
    if script.display_name.is_empty() {
        script.log_source_id.to_string()
    } else {
        script.display_name.clone()
    }
}

/// The script's log file, as Coder's agent places it: `log_path` with `~` and `$VAR`s expanded,
/// relative to the log directory; by default `coder-script-<log source id>.log`.
pub(crate) fn log_path(
    script: &ManifestScript,
    log_dir: &Path,
    home: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> PathBuf {
    let named = if script.log_path.is_empty() {
        format!("coder-script-{}.log", script.log_source_id)
    } else {
        script.log_path.clone()
    };
    let with_home = match (named.strip_prefix('~'), home) {
        (Some(rest), Some(home)) => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(&named),
    };
    let expanded = PathBuf::from(expand_vars(&with_home.to_string_lossy(), |name| {
        env.get(name).cloned()
    }));
    if expanded.is_absolute() {
        expanded
    } else {
        log_dir.join(expanded)
    }
}

/// Where scripts install binaries (it is put first in `PATH`).
pub(crate) fn bin_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("bin")
}

pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests;
