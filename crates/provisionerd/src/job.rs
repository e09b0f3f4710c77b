//! One job from start to end on the daemon's side: a fresh work directory, the extracted
//! template, the engine, and the clean-up. Runs as its own task so the job goes on while the
//! runner reconnects.

use std::path::PathBuf;
use std::sync::Arc;

use codersdk::provisionerd::{AcquiredJob, JobFailure, JobResult, LogLevel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, JobContext, Progress};
use crate::extract::{ArchiveLimits, extract};
use crate::logs::LogSink;

const SETUP: &str = "Setting up";
const CLEANUP: &str = "Cleaning up";

pub(crate) type Outcome = Result<JobResult, JobFailure>;

/// What the job task needs besides the job.
pub(crate) struct JobSetup {
    pub engine: Option<Arc<dyn Engine>>,
    pub advertised: Vec<String>,
    pub work_root: PathBuf,
    pub limits: ArchiveLimits,
    pub logs: LogSink,
    pub cancel: CancellationToken,
    pub progress: Progress,
}

pub(crate) fn spawn(job: AcquiredJob, setup: JobSetup) -> JoinHandle<Outcome> {
    tokio::spawn(execute(job, setup))
}

#[tracing::instrument(name = "job", skip_all, fields(job_id = %job.job_id, provisioner = %job.provisioner))]
async fn execute(mut job: AcquiredJob, setup: JobSetup) -> Outcome {
    let logs = setup.logs;
    let Some(engine) = setup.engine else {
        let message = format!(
            "this provisioner daemon cannot run {:?} jobs; it runs {}",
            job.provisioner,
            setup.advertised.join(", ")
        );
        logs.daemon(LogLevel::Error, SETUP, message.clone());
        return Err(JobFailure::new(message));
    };

    logs.daemon(LogLevel::Info, SETUP, "Setting up the work directory");
    let root = setup.work_root.clone();
    let workdir = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&root)?;
        tempfile::Builder::new()
            .prefix("coder-job-")
            .tempdir_in(&root)
    })
    .await
    .map_err(|e| JobFailure::new(format!("creating the work directory: {e}")))?
    .map_err(|e| {
        let message = format!(
            "creating a work directory under {}: {e}",
            setup.work_root.display()
        );
        logs.daemon(LogLevel::Error, SETUP, message.clone());
        JobFailure::new(message)
    })?;
    tracing::debug!(workdir = %workdir.path().display(), "work directory created");

    let outcome = run_in(
        &mut job,
        &*engine,
        workdir.path().to_path_buf(),
        &setup.limits,
        &logs,
        setup.cancel,
        setup.progress,
    )
    .await;

    logs.daemon(LogLevel::Info, CLEANUP, "Removing the work directory");
    let removal = match tokio::task::spawn_blocking(move || workdir.close()).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = removal {
        tracing::warn!(error = %e, "removing the work directory failed");
        logs.daemon(
            LogLevel::Warn,
            CLEANUP,
            format!("Removing the work directory failed: {e}"),
        );
    }
    outcome
}

async fn run_in(
    job: &mut AcquiredJob,
    engine: &dyn Engine,
    workdir: PathBuf,
    limits: &ArchiveLimits,
    logs: &LogSink,
    cancel: CancellationToken,
    progress: Progress,
) -> Outcome {
    let archive = std::mem::take(&mut job.template_source_archive);
    logs.daemon(
        LogLevel::Info,
        SETUP,
        format!("Extracting the template ({} bytes)", archive.len()),
    );
    let dest = workdir.clone();
    let limits = *limits;
    let extracted = tokio::task::spawn_blocking(move || extract(&archive, &dest, &limits))
        .await
        .map_err(|e| JobFailure::new(format!("extracting the template: {e}")))?;
    if let Err(e) = extracted {
        let message = format!("invalid template archive: {e}");
        logs.daemon(LogLevel::Error, SETUP, message.clone());
        return Err(JobFailure::new(message));
    }
    if cancel.is_cancelled() {
        return Err(JobFailure::new("the job was canceled before it started"));
    }
    let ctx = JobContext {
        job,
        workdir: &workdir,
        logs: logs.clone(),
        cancel,
        progress,
    };
    engine.run(ctx).await
}
