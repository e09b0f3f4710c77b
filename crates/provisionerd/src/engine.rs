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
    /// variable values. Its `template_source_archive` is emptied: the template is in `template`.
    pub job: &'a AcquiredJob,
    /// The template, in the form the engine asked for ([`Engine::template_form`]).
    pub template: Template<'a>,
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
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

/// How an engine reads a job's template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateForm {
    /// Extracted into a fresh work directory (what terraform needs: it runs commands there).
    Extracted,
    /// The archive itself, in memory: the job touches no disk. A work directory costs a
    /// directory, a file per entry and their removal, each on its own blocking thread; for an
    /// engine that only reads a file or two of the archive that was most of its job's CPU.
    Archive,
}

/// A job's template, as the engine gets it.
#[derive(Clone, Copy)]
pub enum Template<'a> {
    /// The work directory it was extracted into; the engine may write here. Removed after the
    /// job.
    Extracted(&'a Path),
    /// The tar archive as coderd sent it.
    Archive(&'a [u8]),
}

impl std::fmt::Debug for Template<'_> {
    // The archive's bytes say nothing in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Extracted(dir) => f.debug_tuple("Extracted").field(dir).finish(),
            Self::Archive(bytes) => write!(f, "Archive({} bytes)", bytes.len()),
        }
    }
}

/// A provisioner. One instance serves every job of its type, one job at a time per daemon.
pub trait Engine: Send + Sync + 'static {
    /// How this engine reads its templates; extracted into a work directory unless it says so.
    fn template_form(&self) -> TemplateForm {
        TemplateForm::Extracted
    }

    fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>>;
}
