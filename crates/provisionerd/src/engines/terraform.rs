//! The terraform engine: provisioner type `terraform`, run by
//! [`provisioner_terraform::Terraform`] (which owns the commands, their logs, cancellation and
//! the conversion of plans and states). This module connects it to the runner: the job's
//! context in, the engine's log lines into the job's [`LogSink`].

use std::path::PathBuf;

use codersdk::provisionerd::{JobFailure, JobResult, LogLevel, LogSource};
use futures::future::BoxFuture;
use provisioner_terraform::{JobLogs, Terraform, version::Version};
pub use provisioner_terraform::{Settings, SetupError};

use crate::engine::{Engine, JobContext, Progress, Template};
use crate::logs::LogSink;

/// The provisioner type the terraform engine is registered under.
pub const PROVISIONER: &str = "terraform";

/// Runs terraform jobs with one daemon's settings (binary, provider, cache directory).
#[derive(Debug)]
pub struct TerraformEngine {
    terraform: Terraform,
}

impl TerraformEngine {
    /// Prepares the cache directory (provider mirror, plugin cache, CLI config). Terraform
    /// itself is looked for when a job runs, or by [`Self::check`].
    pub fn new(settings: Settings) -> Result<Self, SetupError> {
        Ok(Self {
            terraform: Terraform::new(settings)?,
        })
    }

    /// Finds terraform and checks its version, as every job does first: where it is and which
    /// version it is, or why it cannot be used.
    pub async fn check(&self) -> Result<(PathBuf, Version), provisioner_terraform::Error> {
        self.terraform.check().await
    }
}

impl Engine for TerraformEngine {
    fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>> {
        Box::pin(async move {
            let Template::Extracted(workdir) = ctx.template else {
                return Err(JobFailure::new("terraform runs in a work directory"));
            };
            let reporter = Reporter {
                logs: &ctx.logs,
                progress: &ctx.progress,
            };
            self.terraform
                .run(ctx.job, workdir, &reporter, &ctx.cancel)
                .await
        })
    }
}

/// What terraform reports, into the job's logs and progress.
struct Reporter<'a> {
    logs: &'a LogSink,
    progress: &'a Progress,
}

impl JobLogs for Reporter<'_> {
    fn log(&self, level: LogLevel, stage: &str, output: &str) {
        self.logs
            .write(LogSource::Provisioner, level, stage, output);
    }

    fn applying(&self) {
        self.progress.applying();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_lines_are_the_provisioners() {
        let sink = LogSink::new();
        let progress = Progress::default();
        let reporter = Reporter {
            logs: &sink,
            progress: &progress,
        };
        JobLogs::log(
            &reporter,
            LogLevel::Warn,
            "Planning infrastructure",
            "careful",
        );
        assert!(!progress.is_applying());
        reporter.applying();
        assert!(progress.is_applying());
        let lines = sink.take();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].source, LogSource::Provisioner);
        assert_eq!(lines[0].level, LogLevel::Warn);
        assert_eq!(lines[0].stage, "Planning infrastructure");
        assert_eq!(lines[0].output, "careful");
    }

    #[tokio::test]
    async fn a_missing_terraform_is_reported_by_the_check() -> Result<(), Box<dyn std::error::Error>>
    {
        let cache = tempfile::tempdir()?;
        let mut settings = Settings::new("/bin/true", cache.path());
        settings.terraform = "/nonexistent/terraform".into();
        let engine = TerraformEngine::new(settings)?;
        let error = engine.check().await.expect_err("no terraform there");
        assert!(
            error.to_string().contains("/nonexistent/terraform"),
            "{error}"
        );
        Ok(())
    }
}
