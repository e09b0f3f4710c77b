//! One module per scenario. Each returns per-run figures; `suite` turns them into rows.

pub mod agent_workspace;
pub mod agentbin;
pub mod agents;
pub mod api;
pub mod apps;
pub mod bare;
pub mod builds;
pub mod ceiling;
pub mod cpu_cost;
pub mod create;
pub mod dashboard;
pub mod insights;
pub mod list;
pub mod pickup;
pub mod prebuilds;
pub mod relay;
pub mod startup;
pub mod terraform;
pub mod uploads;
pub mod watch;

use std::time::Duration;

use anyhow::ensure;
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use uuid::Uuid;

use crate::completions::Completions;
use crate::deploy::Deployment;

/// What a load-generating task needs of the deployment, cheap to clone into the task.
#[derive(Clone)]
pub struct Driver {
    pub owner: codersdk::Client,
    pub completions: Completions,
    pub timeout: Duration,
}

impl Driver {
    pub fn of(deploy: &Deployment) -> Self {
        Self {
            owner: deploy.owner.clone(),
            completions: deploy.completions.clone(),
            timeout: deploy.timeout,
        }
    }
}

/// A workspace the build scenarios cycle between start and stop.
#[derive(Debug, Clone)]
pub struct Cycling {
    pub id: Uuid,
    /// The job of its latest build (complete, or being waited for).
    pub last_job: Uuid,
    pub running: bool,
}

impl Cycling {
    /// Starts the next build (stop if running, start if stopped) once the previous one is done,
    /// and returns its job id.
    pub async fn next_build(&mut self, driver: &Driver) -> anyhow::Result<Uuid> {
        driver
            .completions
            .wait(self.last_job, driver.timeout)
            .await?;
        let transition = if self.running { "stop" } else { "start" };
        let build = driver
            .owner
            .create_workspace_build(
                self.id,
                &CreateWorkspaceBuildRequest {
                    transition: transition.into(),
                    ..Default::default()
                },
            )
            .await?;
        self.running = !self.running;
        self.last_job = build.job.id;
        Ok(build.job.id)
    }
}

/// Forgets the completions of `jobs` except the workspaces' latest (their next build waits for
/// those), so long runs do not accumulate them.
pub fn forget_finished(driver: &Driver, jobs: &[Uuid], workspaces: &[Cycling]) {
    let keep: std::collections::HashSet<Uuid> = workspaces.iter().map(|w| w.last_job).collect();
    let done: Vec<Uuid> = jobs.iter().copied().filter(|j| !keep.contains(j)).collect();
    driver.completions.forget(&done);
}

/// Fails unless every job in `jobs` succeeded.
pub async fn all_succeeded(pool: &sqlx::PgPool, jobs: &[Uuid]) -> anyhow::Result<()> {
    let (done, failed): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE completed_at IS NOT NULL AND error IS NULL),
                count(*) FILTER (WHERE error IS NOT NULL)
         FROM provisioner_jobs WHERE id = ANY($1)",
    )
    .bind(jobs)
    .fetch_one(pool)
    .await?;
    let first_error: Option<String> = if failed > 0 {
        sqlx::query_scalar(
            "SELECT error FROM provisioner_jobs WHERE id = ANY($1) AND error IS NOT NULL LIMIT 1",
        )
        .bind(jobs)
        .fetch_optional(pool)
        .await?
    } else {
        None
    };
    ensure!(
        done as usize == jobs.len(),
        "{done} of {} jobs succeeded ({failed} failed{})",
        jobs.len(),
        first_error.map(|e| format!(": {e}")).unwrap_or_default()
    );
    Ok(())
}
