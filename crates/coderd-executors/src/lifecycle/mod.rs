//! The lifecycle executor: the front door through which coderd acts on workspaces by itself —
//! autostart, autostop, stopping failed starts, dormancy and deletion of dormant workspaces.
//!
//! Every coderd runs one. Each tick it asks the store which workspaces have something due,
//! re-reads each one, decides ([`decide`]) and acts as the system actor through the same
//! domain operations as the API (`domain::builds::create_build`, with the lifecycle's build
//! reasons). Replicas need no leader: every build names the build it was decided from
//! (`expect_latest`), and the store creates it only if that is still the workspace's latest
//! build, checked under the workspace's row lock — so of two replicas deciding the same event,
//! one creates the build and the other finds the workspace changed and moves on. Dormancy
//! marks are conditional updates for the same reason. Candidates are visited in a random
//! order, so replicas mostly work on different workspaces instead of queueing on the same row.
//!
//! Time comes from the deployment's clock and ticks from a [`Ticks`] source, so tests stand at
//! any instant (a DST change, a second past a deadline) without sleeping.

pub mod decide;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use rand::seq::SliceRandom;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use coderd_authz::Subject;
use coderd_core::domain;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use coderd_core::state::AppState;
use coderd_store::day_bits;
use codersdk::provisionerd::Transition;
use decide::{Decision, Snapshot, decide};

/// Coder's default: once a minute.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);
/// Workspaces handled at once within a tick.
const CONCURRENCY: usize = 8;

/// What a tick did, per workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Builds created, by workspace.
    pub builds: BTreeMap<Uuid, BuildReason>,
    /// Workspaces this tick made dormant.
    pub dormant: Vec<Uuid>,
    /// Autostarts that could not be created (parameters, versions), and why.
    pub failed: BTreeMap<Uuid, String>,
    /// Workspaces another replica (or a person) changed between reading and acting.
    pub raced: usize,
}

/// A tick requested by whoever drives the executor: at `now`, answering with the report.
pub struct Tick {
    pub now: DateTime<Utc>,
    pub report: Option<oneshot::Sender<TickReport>>,
}

/// Where ticks come from.
pub enum Ticks {
    /// Every interval, at the deployment clock's time (`--autobuild-poll-interval`).
    Every(Duration),
    /// Whenever the sender sends one (tests).
    Driven(mpsc::Receiver<Tick>),
}

/// Runs the executor until `shutdown`.
pub fn spawn(
    state: AppState,
    ticks: Ticks,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        match ticks {
            Ticks::Every(period) => {
                let mut interval = tokio::time::interval(period);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        _ = interval.tick() => {}
                    }
                    let now = state.options.clock.now();
                    tick(&state, now).await;
                }
            }
            Ticks::Driven(mut rx) => loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => return,
                    next = rx.recv() => next,
                };
                let Some(Tick { now, report }) = next else {
                    return;
                };
                let done = tick(&state, now).await;
                if let Some(report) = report {
                    let _ = report.send(done);
                }
            },
        }
    })
}

enum Outcome {
    Nothing,
    Built(BuildReason),
    Dormant(Option<BuildReason>),
    Failed(String),
    Raced,
}

/// One pass over the workspaces with something due at `now`.
pub async fn tick(state: &AppState, now: DateTime<Utc>) -> TickReport {
    let started = std::time::Instant::now();
    let mut report = TickReport::default();
    let mut candidates = match state.store.lifecycle_candidates(now).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!(error = %e, "lifecycle: listing due workspaces");
            return report;
        }
    };
    candidates.shuffle(&mut rand::rng());
    let count = candidates.len();
    let outcomes: Vec<(Uuid, Outcome)> = futures::stream::iter(candidates)
        .map(|id| async move { (id, handle(state, id, now).await) })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for (id, outcome) in outcomes {
        match outcome {
            Outcome::Nothing => {}
            Outcome::Built(reason) => {
                report.builds.insert(id, reason);
            }
            Outcome::Dormant(stop) => {
                report.dormant.push(id);
                if let Some(reason) = stop {
                    report.builds.insert(id, reason);
                }
            }
            Outcome::Failed(why) => {
                report.failed.insert(id, why);
            }
            Outcome::Raced => report.raced += 1,
        }
    }
    for reason in report.builds.values() {
        metrics::counter!("coderd_lifecycle_builds_total", "reason" => reason.as_str())
            .increment(1);
    }
    metrics::histogram!("coderd_lifecycle_tick_seconds").record(started.elapsed().as_secs_f64());
    if count > 0 {
        tracing::debug!(
            %now,
            candidates = count,
            builds = report.builds.len(),
            raced = report.raced,
            "lifecycle tick"
        );
    }
    report
}

/// Reads one workspace afresh, decides and acts; failures are logged and end in `Nothing`.
async fn handle(state: &AppState, id: Uuid, now: DateTime<Utc>) -> Outcome {
    match handle_inner(state, id, now).await {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::warn!(workspace = %id, error = %e, "lifecycle: handling workspace");
            Outcome::Nothing
        }
    }
}

async fn handle_inner(
    state: &AppState,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Outcome, domain::Error> {
    let workspace = state.store.workspace_by_id(id, false).await?;
    let template = state.store.template_by_id(workspace.template_id).await?;
    let Some(latest) = state.store.latest_builds(&[id]).await?.pop() else {
        return Ok(Outcome::Nothing);
    };
    let job = state.store.job_by_id(latest.job_id).await?;
    let decision = decide(
        &Snapshot {
            workspace: &workspace,
            template: &template,
            latest: &latest,
            job: &job,
        },
        now,
    );
    let system = Subject::system();
    let build = |transition, reason, version| {
        let mut req = BuildRequest::new(transition, reason);
        req.version = version;
        req.expect_latest = Some(latest.id);
        builds::create_build(state, &system, &workspace, req)
    };
    match decision {
        Decision::Nothing => Ok(Outcome::Nothing),
        Decision::Reschedule(next) => {
            state.store.set_next_starts(&[(id, next)]).await?;
            tracing::debug!(workspace = %id, next_start_at = ?next, "lifecycle: next autostart moved");
            Ok(Outcome::Nothing)
        }
        Decision::Stop(reason) => done(
            build(Transition::Stop, reason, VersionChoice::Previous).await,
            id,
            reason,
        ),
        Decision::Delete => {
            let reason = BuildReason::Autodelete;
            done(
                build(Transition::Delete, reason, VersionChoice::Previous).await,
                id,
                reason,
            )
        }
        Decision::Start(version) => {
            let reason = BuildReason::Autostart;
            match build(Transition::Start, reason, version).await {
                Err(e @ (domain::Error::Validation(_) | domain::Error::BadRequest { .. })) => {
                    autostart_failed(state, &workspace, now, &e).await
                }
                other => done(other, id, reason),
            }
        }
        Decision::MarkDormant { stop } => {
            if !state
                .store
                .mark_dormant(id, now, workspace.last_used_at)
                .await?
            {
                return Ok(Outcome::Raced);
            }
            tracing::info!(
                workspace = %id,
                last_used_at = %workspace.last_used_at,
                "lifecycle: unused past the template's threshold, now dormant"
            );
            if !stop {
                return Ok(Outcome::Dormant(None));
            }
            let reason = BuildReason::Dormancy;
            match done(
                build(Transition::Stop, reason, VersionChoice::Previous).await,
                id,
                reason,
            )? {
                Outcome::Built(reason) => Ok(Outcome::Dormant(Some(reason))),
                _ => Ok(Outcome::Dormant(None)),
            }
        }
    }
}

fn done(
    result: domain::Result<coderd_store::BuildRow>,
    workspace: Uuid,
    reason: BuildReason,
) -> Result<Outcome, domain::Error> {
    match result {
        Ok(build) => {
            tracing::info!(
                workspace = %workspace,
                build = %build.id,
                reason = reason.as_str(),
                "lifecycle: build created"
            );
            Ok(Outcome::Built(reason))
        }
        Err(domain::Error::Conflict { .. }) => {
            tracing::debug!(workspace = %workspace, reason = reason.as_str(), "lifecycle: workspace changed meanwhile");
            Ok(Outcome::Raced)
        }
        Err(e) => Err(e),
    }
}

/// An autostart the builder refused (parameters the version needs, a version that cannot be
/// built): recorded on the workspace with the reason, and not retried before the schedule's
/// next time.
async fn autostart_failed(
    state: &AppState,
    workspace: &coderd_store::WorkspaceRow,
    now: DateTime<Utc>,
    error: &domain::Error,
) -> Result<Outcome, domain::Error> {
    let why = match error {
        domain::Error::Validation(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.detail))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    };
    let next = workspace
        .autostart_schedule
        .as_deref()
        .and_then(|raw| coderd_schedule::Schedule::weekly(raw).ok())
        .and_then(|s| {
            s.next_allowed_after(now, day_bits(workspace.template_autostart_allowed_days))
        });
    state
        .store
        .record_autostart_failure(workspace.id, now, &why, next)
        .await?;
    tracing::warn!(
        workspace = %workspace.id,
        reason = %why,
        next_start_at = ?next,
        "lifecycle: autostart failed; not retried before the schedule's next time"
    );
    Ok(Outcome::Failed(why))
}
