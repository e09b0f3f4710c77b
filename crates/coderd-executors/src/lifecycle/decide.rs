//! What the executor should do with one workspace at one instant: a pure function of what it
//! read, so every rule is tested without a database or a clock.

use chrono::{DateTime, Duration, Utc};
use codersdk::provisioners::ProvisionerJobStatus;

use coderd_core::domain::builds::{BuildReason, VersionChoice};
use coderd_core::domain::render::job_status;
use coderd_core::domain::schedules::autostart_uses_active_version;
use coderd_schedule::Schedule;
use coderd_store::{BuildRow, JobRow, TemplateRow, WorkspaceRow, day_bits};

/// A failed autodelete is retried this long after it failed, not on every tick.
const DELETE_RETRY: Duration = Duration::days(1);

/// Everything a decision reads.
pub struct Snapshot<'a> {
    pub workspace: &'a WorkspaceRow,
    pub template: &'a TemplateRow,
    pub latest: &'a BuildRow,
    pub job: &'a JobRow,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing is due (or a build is still running).
    Nothing,
    /// The autostart schedule came due.
    Start(VersionChoice),
    Stop(BuildReason),
    Delete,
    /// Unused past the template's threshold: mark it dormant (and stop it if it runs).
    MarkDormant {
        stop: bool,
    },
    /// `next_start_at` is stale (the stop came after it, or the day is no longer allowed):
    /// store this one instead.
    Reschedule(Option<DateTime<Utc>>),
}

fn ms(ms: i64) -> Duration {
    Duration::milliseconds(ms)
}

pub fn decide(s: &Snapshot<'_>, now: DateTime<Utc>) -> Decision {
    let (w, t, latest) = (s.workspace, s.template, s.latest);
    let status = job_status(s.job);
    let finished_at = match s.job.completed_at {
        Some(at) => at,
        None => return Decision::Nothing,
    };
    let succeeded = status == ProvisionerJobStatus::Succeeded;
    let running = succeeded && latest.transition == "start";
    if let Some(dormant_at) = w.dormant_at {
        let delete_due = t.time_til_dormant_autodelete_ms > 0
            && dormant_at + ms(t.time_til_dormant_autodelete_ms) <= now;
        let retry_due = latest.transition != "delete" || finished_at + DELETE_RETRY <= now;
        if delete_due && retry_due {
            return Decision::Delete;
        }
        // A dormant workspace never starts by itself, and does not keep running.
        return if running {
            Decision::Stop(BuildReason::Dormancy)
        } else {
            Decision::Nothing
        };
    }
    if t.time_til_dormant_ms > 0 && w.last_used_at + ms(t.time_til_dormant_ms) <= now {
        return Decision::MarkDormant { stop: running };
    }
    if latest.transition == "start" && status == ProvisionerJobStatus::Failed {
        return if t.failure_ttl_ms > 0 && finished_at + ms(t.failure_ttl_ms) <= now {
            Decision::Stop(BuildReason::FailedStop)
        } else {
            Decision::Nothing
        };
    }
    if running {
        return match latest.deadline {
            Some(deadline) if deadline <= now => Decision::Stop(BuildReason::Autostop),
            _ => Decision::Nothing,
        };
    }
    if succeeded && latest.transition == "stop" {
        return autostart(w, latest, now);
    }
    Decision::Nothing
}

fn autostart(w: &WorkspaceRow, latest: &BuildRow, now: DateTime<Utc>) -> Decision {
    let Some(next) = w.next_start_at.filter(|at| *at <= now) else {
        return Decision::Nothing;
    };
    let schedule = w
        .autostart_schedule
        .as_deref()
        .filter(|_| w.template_allow_user_autostart)
        .and_then(|raw| Schedule::weekly(raw).ok());
    let Some(schedule) = schedule else {
        return Decision::Reschedule(None);
    };
    let days = day_bits(w.template_autostart_allowed_days);
    let allowed = coderd_schedule::cron::day_allowed(
        days,
        chrono::Datelike::weekday(&next.with_timezone(&schedule.zone())),
    );
    // The time came before the workspace was stopped (someone stopped it after it started on
    // schedule): the next start is the schedule's next time.
    if next <= latest.created_at || !allowed {
        return Decision::Reschedule(schedule.next_allowed_after(now, days));
    }
    Decision::Start(if autostart_uses_active_version(w) {
        VersionChoice::Active
    } else {
        VersionChoice::Previous
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("test timestamp")
    }

    struct Case {
        workspace: WorkspaceRow,
        template: TemplateRow,
        latest: BuildRow,
        job: JobRow,
    }

    impl Case {
        /// A workspace whose start build finished at 2027-01-04T09:00Z.
        fn running() -> Self {
            let t0 = at("2027-01-04T09:00:00Z");
            let id = Uuid::new_v4();
            Self {
                workspace: WorkspaceRow {
                    id,
                    owner_id: Uuid::new_v4(),
                    organization_id: Uuid::new_v4(),
                    template_id: Uuid::new_v4(),
                    name: "dev".into(),
                    created_at: t0,
                    updated_at: t0,
                    last_used_at: t0,
                    deleted: false,
                    autostart_schedule: None,
                    ttl_ms: None,
                    automatic_updates: "never".into(),
                    dormant_at: None,
                    next_start_at: None,
                    autostart_failed_at: None,
                    autostart_failure: None,
                    favorite: false,
                    owner_username: "u".into(),
                    owner_avatar_url: String::new(),
                    organization_name: "o".into(),
                    template_name: "t".into(),
                    template_display_name: String::new(),
                    template_icon: String::new(),
                    template_allow_user_cancel_workspace_jobs: true,
                    template_active_version_id: Uuid::new_v4(),
                    template_require_active_version: false,
                    template_default_ttl_ms: 0,
                    template_allow_user_autostart: true,
                    template_allow_user_autostop: true,
                    template_autostart_allowed_days: 127,
                    template_time_til_dormant_autodelete_ms: 0,
                },
                template: TemplateRow {
                    id: Uuid::new_v4(),
                    organization_id: Uuid::new_v4(),
                    name: "t".into(),
                    display_name: String::new(),
                    description: String::new(),
                    icon: String::new(),
                    provisioner: "echo".into(),
                    active_version_id: Uuid::new_v4(),
                    created_by: Uuid::new_v4(),
                    created_at: t0,
                    updated_at: t0,
                    deleted: false,
                    default_ttl_ms: 0,
                    allow_user_cancel_workspace_jobs: true,
                    deprecated: String::new(),
                    activity_bump_ms: 3_600_000,
                    autostop_requirement_days_of_week: 0,
                    autostop_requirement_weeks: 1,
                    autostart_allowed_days: 127,
                    allow_user_autostart: true,
                    allow_user_autostop: true,
                    failure_ttl_ms: 0,
                    time_til_dormant_ms: 0,
                    time_til_dormant_autodelete_ms: 0,
                    require_active_version: false,
                    max_port_share_level: "owner".into(),
                    cors_behavior: "simple".into(),
                    organization_name: "o".into(),
                    organization_display_name: String::new(),
                    organization_icon: String::new(),
                    created_by_username: "u".into(),
                },
                latest: BuildRow {
                    id: Uuid::new_v4(),
                    workspace_id: id,
                    template_version_id: Uuid::new_v4(),
                    build_number: 1,
                    transition: "start".into(),
                    initiator_id: Uuid::new_v4(),
                    job_id: Uuid::new_v4(),
                    reason: "initiator".into(),
                    daily_cost: 0,
                    deadline: None,
                    max_deadline: None,
                    created_at: t0 - Duration::minutes(1),
                    updated_at: t0,
                    workspace_name: "dev".into(),
                    workspace_owner_id: Uuid::new_v4(),
                    owner_username: "u".into(),
                    owner_avatar_url: String::new(),
                    template_version_name: "v1".into(),
                    initiator_username: "u".into(),
                    template_version_preset_id: None,
                    has_ai_task: None,
                    ai_task_sidebar_app_id: None,
                    has_external_agent: None,
                },
                job: JobRow {
                    started_at: Some(t0 - Duration::minutes(1)),
                    completed_at: Some(t0),
                    updated_at: t0,
                    ..JobRow::pending_build(t0 - Duration::minutes(1))
                },
            }
        }

        fn stopped() -> Self {
            let mut c = Self::running();
            c.latest.transition = "stop".into();
            c
        }

        fn decide(&self, now: &str) -> Decision {
            decide(
                &Snapshot {
                    workspace: &self.workspace,
                    template: &self.template,
                    latest: &self.latest,
                    job: &self.job,
                },
                at(now),
            )
        }
    }

    #[test]
    fn a_running_workspace_stops_at_its_deadline_and_not_before() {
        let mut c = Case::running();
        assert_eq!(
            c.decide("2027-01-05T09:00:00Z"),
            Decision::Nothing,
            "no deadline"
        );
        c.latest.deadline = Some(at("2027-01-04T10:00:00Z"));
        assert_eq!(c.decide("2027-01-04T09:59:59Z"), Decision::Nothing);
        assert_eq!(
            c.decide("2027-01-04T10:00:00Z"),
            Decision::Stop(BuildReason::Autostop)
        );
    }

    #[test]
    fn a_build_in_progress_is_left_alone() {
        let mut c = Case::running();
        c.latest.deadline = Some(at("2027-01-04T10:00:00Z"));
        c.job.completed_at = None;
        assert_eq!(c.decide("2027-01-05T00:00:00Z"), Decision::Nothing);
    }

    #[test]
    fn a_stopped_workspace_starts_when_its_schedule_comes_due() {
        let mut c = Case::stopped();
        c.workspace.autostart_schedule = Some("CRON_TZ=Europe/Dublin 30 9 * * *".into());
        c.workspace.next_start_at = Some(at("2027-01-05T09:30:00Z"));
        assert_eq!(c.decide("2027-01-05T09:29:59Z"), Decision::Nothing);
        assert_eq!(
            c.decide("2027-01-05T09:30:00Z"),
            Decision::Start(VersionChoice::Previous)
        );
        c.workspace.automatic_updates = "always".into();
        assert_eq!(
            c.decide("2027-01-05T09:30:00Z"),
            Decision::Start(VersionChoice::Active)
        );
        // Stopped by hand after today's time: tomorrow's.
        c.latest.created_at = at("2027-01-05T09:45:00Z");
        assert_eq!(
            c.decide("2027-01-05T09:46:00Z"),
            Decision::Reschedule(Some(at("2027-01-06T09:30:00Z")))
        );
        // The template no longer allows it.
        c.latest.created_at = at("2027-01-04T18:00:00Z");
        c.workspace.template_allow_user_autostart = false;
        assert_eq!(c.decide("2027-01-05T09:30:00Z"), Decision::Reschedule(None));
    }

    #[test]
    fn a_failed_start_is_stopped_after_the_failure_ttl() {
        let mut c = Case::running();
        c.job.error = Some("boom".into());
        assert_eq!(
            c.decide("2027-01-09T00:00:00Z"),
            Decision::Nothing,
            "no TTL"
        );
        c.template.failure_ttl_ms = 3_600_000;
        assert_eq!(c.decide("2027-01-04T09:59:00Z"), Decision::Nothing);
        assert_eq!(
            c.decide("2027-01-04T10:00:00Z"),
            Decision::Stop(BuildReason::FailedStop)
        );
    }

    #[test]
    fn unused_workspaces_go_dormant_then_are_stopped_and_deleted() {
        let mut c = Case::running();
        c.template.time_til_dormant_ms = 86_400_000;
        c.template.time_til_dormant_autodelete_ms = 7 * 86_400_000;
        assert_eq!(c.decide("2027-01-05T08:59:00Z"), Decision::Nothing);
        assert_eq!(
            c.decide("2027-01-05T09:00:00Z"),
            Decision::MarkDormant { stop: true }
        );
        c.workspace.dormant_at = Some(at("2027-01-05T09:00:00Z"));
        assert_eq!(
            c.decide("2027-01-05T09:01:00Z"),
            Decision::Stop(BuildReason::Dormancy)
        );
        c.latest.transition = "stop".into();
        c.workspace.autostart_schedule = Some("0 9 * * *".into());
        c.workspace.next_start_at = Some(at("2027-01-06T09:00:00Z"));
        assert_eq!(
            c.decide("2027-01-06T09:00:00Z"),
            Decision::Nothing,
            "dormant workspaces never autostart"
        );
        assert_eq!(c.decide("2027-01-12T09:00:00Z"), Decision::Delete);
        // A failed deletion waits a day before the next attempt.
        c.latest.transition = "delete".into();
        c.job.error = Some("boom".into());
        c.job.completed_at = Some(at("2027-01-12T09:01:00Z"));
        assert_eq!(c.decide("2027-01-12T10:00:00Z"), Decision::Nothing);
        assert_eq!(c.decide("2027-01-13T09:01:00Z"), Decision::Delete);
    }
}
