//! The interface between the runner and what actually provisions (echo, terraform).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codersdk::provisionerd::{AcquiredJob, JobFailure, JobResult};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::logs::LogSink;

/// Everything an engine gets for one job.
pub struct JobContext<'a> {
    /// The job: its kind carries the metadata, the previous state, and the parameter and
    /// variable values. Its `template_source_archive` is already extracted into `workdir`
    /// (and emptied, to free the memory).
    pub job: &'a AcquiredJob,
    /// The extracted template; the engine may write here. Removed after the job.
    pub workdir: &'a Path,
    pub logs: LogSink,
    /// Cancelled when coderd cancels the job, coderd gives it up, or the daemon's shutdown
    /// grace ends. The engine should stop promptly and return a failure carrying whatever
    /// state it has.
    pub cancel: CancellationToken,
    /// The engine marks here when it starts changing infrastructure.
    pub progress: Progress,
}

/// Whether a job has started to change infrastructure, shared by its engine and the runner. A
/// daemon that must stop before its job ends hands back a job that changed nothing yet —
/// another daemon runs it from the start — and fails one that has, with the state it reached.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<AtomicBool>);

impl Progress {
    pub fn applying(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_applying(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for JobContext<'_> {
    // The job's metadata carries the owner's session token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("job_id", &self.job.job_id)
            .field("workdir", &self.workdir)
            .finish_non_exhaustive()
    }
}

/// A provisioner. One instance serves every job of its type, one job at a time per daemon.
pub trait Engine: Send + Sync + 'static {
    fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>>;
}
