//! P7: what a terraform build costs beyond terraform's own work. One external daemon runs the
//! real `terraform` (from PATH) on a trivial template (an agent and a `terraform_data` per
//! start), with our `coder/coder` provider served by the `coder` binary from the daemon's
//! filesystem mirror. One workspace cycles start/stop, one build at a time, so nothing queues.
//!
//! Per build: wall time = API create request sent → completion heard (the completing
//! transaction's NOTIFY), minus terraform's own time = the time at least one of the job's
//! recorded `terraform` commands ran (the daemon stamps each from spawn to exit, so process
//! start-up and reading its output count as terraform's; `graph` runs alongside `plan`, so
//! overlapping commands count once). What remains is the control plane's:
//! the API, queueing and pickup, the daemon preparing the work directory and provider mirror,
//! parsing terraform's output between commands, and uploading the result. The same split from
//! the job's own timestamps breaks that remainder down.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use uuid::Uuid;

use super::{Cycling, Driver};
use crate::deploy::Deployment;

/// The template: the smallest one that exercises what a real one does (our provider's data
/// sources and agent, a resource that exists only while started).
pub const MAIN_TF: &str = r#"terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}

data "coder_provisioner" "me" {}
data "coder_workspace" "me" {}

resource "coder_agent" "main" {
  os   = data.coder_provisioner.me.os
  arch = data.coder_provisioner.me.arch
}

resource "terraform_data" "instance" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.token
}
"#;

/// The template as the tar archive `coder templates push` would upload.
pub fn archive() -> anyhow::Result<Vec<u8>> {
    archive_of(MAIN_TF)
}

/// A one-file template (`main.tf`) as the tar archive `coder templates push` would upload.
pub fn archive_of(main_tf: &str) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(main_tf.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    builder.append_data(&mut header, "main.tf", main_tf.as_bytes())?;
    Ok(builder.into_inner()?)
}

/// `terraform` on PATH, where the daemon will find it.
pub fn on_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("terraform"))
            .find(|candidate| candidate.is_file())
    })
}

/// One build, split (all in ms).
#[derive(Debug, Clone, Copy)]
pub struct Build {
    /// API create request → completion heard.
    pub wall: f64,
    /// Sum of the job's terraform command timings.
    pub terraform: f64,
    /// Terraform commands the job ran.
    pub commands: i64,
    /// `created_at` → `started_at`: the job waiting for, and being claimed by, the daemon.
    pub queued: f64,
    /// `started_at` → the first terraform command: the daemon's setup (payload, work
    /// directory, provider mirror).
    pub before: f64,
    /// Between the first command's start and the last one's end, time not in a command:
    /// parsing plans and state, logging.
    pub between: f64,
    /// The last command's end → `completed_at`: the result going back and being committed.
    pub after: f64,
}

impl Build {
    pub fn overhead(&self) -> f64 {
        self.wall - self.terraform
    }

    /// Wall time not inside the job's own timestamps: the API create request before the job
    /// row, and the completion's notification reaching the bench.
    pub fn outside(&self) -> f64 {
        self.wall - (self.queued + self.before + self.between + self.after + self.terraform)
    }
}

pub struct TerraformRun {
    pub builds: Vec<Build>,
    /// The template import (not measured, for context).
    pub import: Duration,
}

/// Imports the template, creates a workspace (its first build is the warm-up), then runs
/// `builds` start/stop builds one after another.
pub async fn run(deploy: &Deployment, builds: usize) -> anyhow::Result<TerraformRun> {
    let started = Instant::now();
    let (_, template) = deploy
        .template_of("bench-terraform", "terraform", archive()?, &[], true)
        .await?;
    let template = template.context("the terraform template was not created")?;
    let import = started.elapsed();
    let created = deploy.workspaces(template.id, "tf-", 1).await?;
    let ws = created.first().context("no terraform workspace")?;
    super::all_succeeded(&deploy.pool, &[ws.latest_build.job.id]).await?;
    let mut cycling = Cycling {
        id: ws.id,
        last_job: ws.latest_build.job.id,
        running: true,
    };
    let driver = Driver::of(deploy);
    let mut measured = Vec::with_capacity(builds);
    let mut jobs = Vec::with_capacity(builds);
    for _ in 0..builds {
        driver
            .completions
            .wait(cycling.last_job, driver.timeout)
            .await?;
        let sent = Instant::now();
        let job = cycling.next_build(&driver).await?;
        let done = driver.completions.wait(job, driver.timeout).await?;
        jobs.push(job);
        measured.push((job, done - sent));
    }
    super::all_succeeded(&deploy.pool, &jobs).await?;
    let mut out = Vec::with_capacity(builds);
    for (job, wall) in measured {
        out.push(split(&deploy.pool, job, wall).await?);
    }
    Ok(TerraformRun {
        builds: out,
        import,
    })
}

#[derive(sqlx::FromRow)]
struct Timestamps {
    commands: i64,
    terraform: Option<f64>,
    queued: Option<f64>,
    before: Option<f64>,
    span: Option<f64>,
    after: Option<f64>,
}

/// The job's timestamps and terraform timings, in ms relative to one another (one host clock:
/// coderd stamps the job, the daemon its commands).
async fn split(pool: &sqlx::PgPool, job: Uuid, wall: Duration) -> anyhow::Result<Build> {
    let Timestamps {
        commands,
        terraform,
        queued,
        before,
        span,
        after,
    } = sqlx::query_as(
        "SELECT count(t.*) AS commands,
                (SELECT extract(epoch FROM sum(upper(r) - lower(r)))::float8 * 1e3
                   FROM unnest((SELECT range_agg(tstzrange(o.started_at, o.ended_at))
                                FROM provisioner_job_timings o
                                WHERE o.job_id = j.id AND o.source = 'terraform')) r) AS terraform,
                extract(epoch FROM j.started_at - j.created_at)::float8 * 1e3 AS queued,
                extract(epoch FROM min(t.started_at) - j.started_at)::float8 * 1e3 AS before,
                extract(epoch FROM max(t.ended_at) - min(t.started_at))::float8 * 1e3 AS span,
                extract(epoch FROM j.completed_at - max(t.ended_at))::float8 * 1e3 AS after
         FROM provisioner_jobs j
         LEFT JOIN provisioner_job_timings t ON t.job_id = j.id AND t.source = 'terraform'
         WHERE j.id = $1
         GROUP BY j.id",
    )
    .bind(job)
    .fetch_one(pool)
    .await?;
    ensure!(
        commands > 0,
        "job {job} recorded no terraform timings: terraform's own time is unknown"
    );
    let terraform = terraform.context("timings without a sum")?;
    let wall = wall.as_secs_f64() * 1e3;
    Ok(Build {
        wall,
        terraform,
        commands,
        queued: queued.context("the job has no started_at")?,
        before: before.context("no first command")?,
        between: span.context("no command span")? - terraform,
        after: after.context("the job has no completed_at")?,
    })
}
