//! One job from start to end on the daemon's side: a fresh work directory, the extracted
//! template, the engine, and the clean-up (or, for an engine that reads the archive itself,
//! only the engine). Runs as its own task so the job goes on while the runner reconnects.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use codersdk::provisionerd::{AcquiredJob, JobFailure, JobResult, LogLevel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, JobContext, Progress, Template, TemplateForm};
use crate::extract::{ArchiveLimits, ExtractError, extract};
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
    let archive = std::mem::take(&mut job.template_source_archive);
    if engine.template_form() == TemplateForm::Archive {
        // The job's first line, as the work directory's is for other engines: it says when
        // the daemon started the job.
        logs.daemon(
            LogLevel::Info,
            SETUP,
            format!("Reading the template archive ({} bytes)", archive.len()),
        );
        let size = archive.len() as u64;
        if size > setup.limits.max_archive_bytes {
            let e = ExtractError::ArchiveTooLarge {
                size,
                limit: setup.limits.max_archive_bytes,
            };
            return Err(invalid_archive(&logs, &e));
        }
        let template = Template::Archive(&archive);
        return start(
            &job,
            &*engine,
            template,
            &logs,
            setup.cancel,
            setup.progress,
        )
        .await;
    }

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

    let outcome = match extract_into(archive, workdir.path(), &setup.limits, &logs).await {
        Ok(()) => {
            let template = Template::Extracted(workdir.path());
            start(
                &job,
                &*engine,
                template,
                &logs,
                setup.cancel,
                setup.progress,
            )
            .await
        }
        Err(failure) => Err(failure),
    };

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

async fn extract_into(
    archive: impl AsRef<[u8]> + Send + 'static,
    workdir: &Path,
    limits: &ArchiveLimits,
    logs: &LogSink,
) -> Result<(), JobFailure> {
    logs.daemon(
        LogLevel::Info,
        SETUP,
        format!("Extracting the template ({} bytes)", archive.as_ref().len()),
    );
    let dest = workdir.to_path_buf();
    let limits = *limits;
    let extracted = tokio::task::spawn_blocking(move || extract(archive.as_ref(), &dest, &limits))
        .await
        .map_err(|e| JobFailure::new(format!("extracting the template: {e}")))?;
    extracted.map(|_| ()).map_err(|e| invalid_archive(logs, &e))
}

fn invalid_archive(logs: &LogSink, e: &ExtractError) -> JobFailure {
    let message = format!("invalid template archive: {e}");
    logs.daemon(LogLevel::Error, SETUP, message.clone());
    JobFailure::new(message)
}

/// Hands the prepared template to the engine, unless the job was cancelled meanwhile.
async fn start(
    job: &AcquiredJob,
    engine: &dyn Engine,
    template: Template<'_>,
    logs: &LogSink,
    cancel: CancellationToken,
    progress: Progress,
) -> Outcome {
    if cancel.is_cancelled() {
        return Err(JobFailure::new("the job was canceled before it started"));
    }
    let ctx = JobContext {
        job,
        template,
        logs: logs.clone(),
        cancel,
        progress,
    };
    engine.run(ctx).await
}
