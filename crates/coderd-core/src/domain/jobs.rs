//! Provisioner jobs as every front door shows them: status, queue position, which daemons
//! could run them, and why a pending job waits.

use chrono::Utc;
use codersdk::provisionerd::{JobFailure, Tags};
use codersdk::provisioners::{
    MatchedProvisioners, ProvisionerDaemon, ProvisionerDaemonJob, ProvisionerDaemonStatus,
    ProvisionerJob, ProvisionerJobInput, ProvisionerJobMetadata, ProvisionerJobStatus,
    ProvisionerJobType,
};
use serde::Deserialize;
use uuid::Uuid;

use super::Result;
use super::render::job_status;
use crate::provisioners::dispatch::Reserved;
use crate::provisioners::registry::OFFLINE_AFTER;
use crate::provisioners::tags;
use crate::state::AppState;
use coderd_authz::{Action, Object, Resource, Subject};
use coderd_store::{DaemonRow, JobRow, ReleaseOutcome};

// Read in place: a listing matches every job against every daemon, and cloning each tag
// document first showed up in its profile.
pub fn job_tags(job: &JobRow) -> Tags {
    Tags::deserialize(&job.tags).unwrap_or_default()
}

pub fn daemon_tags(daemon: &DaemonRow) -> Tags {
    Tags::deserialize(&daemon.tags).unwrap_or_default()
}

pub fn daemon_online(state: &AppState, daemon: &DaemonRow) -> bool {
    state.daemons.is_connected(daemon.id)
        || (Utc::now() - daemon.last_seen_at)
            .to_std()
            .unwrap_or_default()
            < OFFLINE_AFTER
}

/// Daemons read for rendering jobs, each with its tags decoded once: a listing renders
/// thousands of jobs against the same few daemons, and decoding every daemon's tags again
/// for every job showed in its profile.
#[derive(Debug, Default)]
pub struct Daemons {
    daemons: Vec<(DaemonRow, Tags)>,
}

impl From<Vec<DaemonRow>> for Daemons {
    fn from(rows: Vec<DaemonRow>) -> Self {
        Self {
            daemons: rows
                .into_iter()
                .map(|d| {
                    let tags = daemon_tags(&d);
                    (d, tags)
                })
                .collect(),
        }
    }
}

impl Daemons {
    fn rows(&self) -> impl Iterator<Item = &DaemonRow> {
        self.daemons.iter().map(|(d, _)| d)
    }
}

/// Daemons of the job's organization that could run it (the job's tags are `tags`), and how
/// many of them are online.
pub fn matched(
    state: &AppState,
    job: &JobRow,
    tags: &Tags,
    daemons: &Daemons,
) -> (Vec<Uuid>, MatchedProvisioners) {
    let matching: Vec<&DaemonRow> = daemons
        .daemons
        .iter()
        .filter(|(d, daemon_tags)| {
            d.organization_id == job.organization_id
                && d.provisioners.contains(&job.provisioner)
                && tags::matches(daemon_tags, tags)
        })
        .map(|(d, _)| d)
        .collect();
    let online: Vec<Uuid> = matching
        .iter()
        .filter(|d| daemon_online(state, d))
        .map(|d| d.id)
        .collect();
    let summary = MatchedProvisioners {
        count: matching.len() as i64,
        available: online.len() as i64,
        most_recently_seen: matching.iter().map(|d| d.last_seen_at).max(),
    };
    (online, summary)
}

fn describe_tags(tags: &Tags) -> String {
    tags.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Renders a job; `daemons` are the organization's daemons (fetched once per request).
pub async fn render(state: &AppState, job: &JobRow, daemons: &Daemons) -> Result<ProvisionerJob> {
    Ok(render_matched(state, job, daemons, None).await?.0)
}

/// Renders a job with the summary of the daemons that could run it.
/// `queue` is the job's (position, size) when the caller read it already; a pending job's is
/// read otherwise.
pub async fn render_matched(
    state: &AppState,
    job: &JobRow,
    daemons: &Daemons,
    queue: Option<(i64, i64)>,
) -> Result<(ProvisionerJob, MatchedProvisioners)> {
    let status = job_status(job);
    let (mut queue_position, mut queue_size) = (0, 0);
    let tags = job_tags(job);
    let (available_workers, summary) = matched(state, job, &tags, daemons);
    let mut waiting_reason = String::new();
    if status == ProvisionerJobStatus::Pending {
        (queue_position, queue_size) = match queue {
            Some(queue) => queue,
            None => state.store.queue_position(job).await?,
        };
        // A job rendered as pending is in the queue, even one a daemon claimed since it was
        // read (a build is rendered from its insert): the queue is at least as long as its
        // place in it.
        queue_size = queue_size.max(queue_position);
        if available_workers.is_empty() {
            let tags = describe_tags(&tags);
            waiting_reason = if summary.count == 0 {
                format!(
                    "No {} provisioner daemon in this organization has tags matching this job's \
                     ({tags}); start one with matching tags (coder provisionerd start --tag ...).",
                    job.provisioner
                )
            } else {
                format!(
                    "{} {} provisioner daemon(s) match this job's tags ({tags}) but none is online.",
                    summary.count, job.provisioner
                )
            };
        }
    }
    let worker_name = job
        .worker_id
        .and_then(|w| daemons.rows().find(|d| d.id == w))
        .map(|d| d.name.clone())
        .unwrap_or_default();
    let input = ProvisionerJobInput {
        template_version_id: job
            .input
            .get("template_version_id")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
        workspace_build_id: job
            .input
            .get("workspace_build_id")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok()),
    };
    let rendered = ProvisionerJob {
        id: job.id,
        created_at: job.created_at,
        started_at: job.started_at,
        completed_at: job.completed_at,
        canceled_at: job.canceled_at,
        error: job.error.clone().unwrap_or_default(),
        error_code: job.error_code.clone().unwrap_or_default(),
        status,
        worker_id: job.worker_id,
        worker_name,
        file_id: job.file_id,
        tags,
        queue_position,
        queue_size,
        organization_id: job.organization_id,
        initiator_id: job.initiator_id,
        input,
        job_type: job
            .r#type
            .parse()
            .unwrap_or(ProvisionerJobType::WorkspaceBuild),
        available_workers,
        metadata: ProvisionerJobMetadata::default(),
        logs_overflowed: job.logs_overflowed,
        waiting_reason,
    };
    Ok((rendered, summary))
}

/// Renders a job together with the daemons of its organization.
pub async fn render_one(
    state: &AppState,
    job: &JobRow,
) -> Result<(ProvisionerJob, MatchedProvisioners)> {
    let daemons = state.store.daemons(Some(job.organization_id), None).await?;
    render_matched(state, job, &daemons.into(), None).await
}

async fn daemon_job(state: &AppState, job: Option<JobRow>) -> Result<Option<ProvisionerDaemonJob>> {
    let Some(job) = job else { return Ok(None) };
    let template = state.store.job_template(job.id).await?;
    Ok(Some(ProvisionerDaemonJob {
        id: job.id,
        status: job_status(&job),
        template_name: template.name,
        template_icon: template.icon,
        template_display_name: template.display_name,
    }))
}

/// A daemon as front doors show it: online or not, busy or idle, its current and last job.
pub async fn daemon(state: &AppState, row: DaemonRow) -> Result<ProvisionerDaemon> {
    let current = state.store.current_job_of(row.id).await?;
    let previous = state.store.previous_job_of(row.id).await?;
    let status = if !daemon_online(state, &row) {
        ProvisionerDaemonStatus::Offline
    } else if current.is_some() {
        ProvisionerDaemonStatus::Busy
    } else {
        ProvisionerDaemonStatus::Idle
    };
    Ok(ProvisionerDaemon {
        id: row.id,
        organization_id: row.organization_id,
        key_id: row.key_id.unwrap_or_default(),
        created_at: row.created_at,
        last_seen_at: Some(row.last_seen_at),
        tags: daemon_tags(&row),
        name: row.name,
        version: row.version,
        api_version: row.api_version,
        provisioners: row.provisioners,
        key_name: row.key_name,
        status,
        current_job: daemon_job(state, current).await?,
        previous_job: daemon_job(state, previous).await?,
    })
}

/// The daemons of an organization the subject may see (it must be allowed to read the
/// organization's daemons at all): a user-scoped daemon only by its owner and by those who
/// manage daemons.
pub async fn daemons(
    state: &AppState,
    subject: &Subject,
    org: Uuid,
) -> Result<Vec<ProvisionerDaemon>> {
    let object = Object::in_org(Resource::ProvisionerDaemon, org);
    coderd_authz::authorize(subject, Action::Read, &object)?;
    let manager = subject.can(Action::Update, &object);
    let rows = state.store.daemons(Some(org), None).await?;
    let mut daemons = Vec::with_capacity(rows.len());
    for row in rows {
        let owner = row.owner_key.parse::<Uuid>().ok();
        if manager || owner.is_none_or(|o| o == subject.user_id) {
            daemons.push(daemon(state, row).await?);
        }
    }
    Ok(daemons)
}

/// A pending job no online daemon can take, with what it is for and how many daemons match.
pub struct WaitingJob {
    pub job: ProvisionerJob,
    pub template_name: String,
    pub matched: MatchedProvisioners,
}

/// How many pending jobs [`waiting`] looks at, newest first.
const WAITING_SCAN: i64 = 100;

/// The organization's pending jobs that wait for want of a daemon (none matches their tags, or
/// none of those that do is online), newest first; for those who may read its jobs.
pub async fn waiting(state: &AppState, subject: &Subject, org: Uuid) -> Result<Vec<WaitingJob>> {
    let object = Object::in_org(Resource::ProvisionerJob, org);
    coderd_authz::authorize(subject, Action::Read, &object)?;
    let rows = state
        .store
        .list_jobs(org, &["pending".to_owned()], WAITING_SCAN)
        .await?;
    let daemons: Daemons = state.store.daemons(Some(org), None).await?.into();
    let mut out = Vec::new();
    for row in &rows {
        let (online, matched) = matched(state, row, &job_tags(row), &daemons);
        if !online.is_empty() {
            continue;
        }
        out.push(WaitingJob {
            job: render(state, row, &daemons).await?,
            template_name: state.store.job_template(row.id).await?.name,
            matched,
        });
    }
    Ok(out)
}

/// Sends a job just created on its way: to the daemon its insert claimed it for (see
/// [`Dispatcher::reserve`](crate::provisioners::dispatch::Dispatcher::reserve)), or, when it
/// was not claimed, gives the reservation back and posts the job to the idle daemons here (its
/// NOTIFY reaches the other replicas).
pub async fn dispatch_created(state: &AppState, job: &JobRow, reserved: Option<Reserved>) {
    if let Some(reserved) = reserved {
        if let Some(daemon) = job.worker_id.filter(|w| Some(*w) == reserved.daemon()) {
            if !reserved.hand_over(job.clone()) {
                hand_back(state, job.id, daemon).await;
            }
            return;
        }
        // Back in its place before the posting, which may well wake it.
        drop(reserved);
    }
    state.dispatcher.announce(job.into());
}

/// A job claimed for `daemon` at its creation that never reached the daemon (it disconnected,
/// stopped, or took another job meanwhile) goes back to the queue: pending again at its place
/// and announced to every replica (`JOB_REQUEUED`), as a stopping daemon's hand-back is. One
/// cancelled meanwhile ends as cancelled.
pub async fn hand_back(state: &AppState, job: Uuid, daemon: Uuid) {
    tracing::info!(job = %job, daemon = %daemon, "the daemon a job was claimed for at its creation cannot take it; it is queued again");
    match state.store.release_job(job, daemon, &[]).await {
        Ok(ReleaseOutcome::Requeued | ReleaseOutcome::NotHeld) => {}
        Ok(ReleaseOutcome::Canceled) => {
            let failure = JobFailure {
                canceled: true,
                ..JobFailure::new("the job was canceled")
            };
            if let Err(e) = state.store.fail_job(job, daemon, &failure, &[]).await {
                tracing::error!(error = %e, job = %job, "ending a cancelled job that was handed back");
            }
        }
        Err(e) => {
            // It stays claimed until it is failed for missed heartbeats.
            tracing::error!(error = %e, job = %job, "handing back a job claimed at creation");
        }
    }
}
