//! The lifecycle executor, driven tick by tick at chosen instants (a fixed clock for coderd,
//! explicit tick times): autostart across a zone's DST changes, autostop at the deadline, the
//! activity bump from agent stats and relay streams, failed starts, dormancy and deletion,
//! automatic updates and the active-version requirement.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use coderd_core::domain::builds::BuildReason;
use coderd_executors::lifecycle::{self, TickReport};
use coderd_schedule::clock::Clock;
use codersdk::Client;
use codersdk::agentsdk::{AgentConnection, Request, Stats};
use codersdk::proto::{Agent, AgentAuth, Resource, RichParameter};
use codersdk::templates::{TemplateAutostopRequirement, UpdateTemplateMeta};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, Workspace, WorkspaceStatus,
};
use provisionerd::engines::echo::{BuildStage, EchoError, EchoTemplate, ImportStage};
use testutil::{TestApp, eventually, wait_build, wait_job};
use uuid::Uuid;

pub fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("test timestamp")
}

/// A coderd whose clock stands wherever the test puts it, with no executor of its own: the
/// test ticks it.
pub struct Fixture {
    pub app: TestApp,
    pub owner: Client,
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl Fixture {
    pub async fn new(start: DateTime<Utc>) -> anyhow::Result<Self> {
        let now = Arc::new(Mutex::new(start));
        let read = now.clone();
        let app = TestApp::with_options(|o| {
            o.provisioner_daemons = 2;
            o.autobuild_poll_interval = None;
            o.deployment.clock =
                Clock::from_fn(move || *read.lock().unwrap_or_else(|e| e.into_inner()));
        })
        .await?;
        let (owner, _) = app.owner().await?;
        Ok(Self { app, owner, now })
    }

    pub fn set_clock(&self, at: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    /// One executor tick at `at` (the clock moves there first, as it would have).
    pub async fn tick(&self, at: DateTime<Utc>) -> TickReport {
        self.set_clock(at);
        lifecycle::tick(&self.app.state, at).await
    }

    pub async fn template(&self, name: &str, echo: &EchoTemplate) -> anyhow::Result<Uuid> {
        Ok(self
            .app
            .echo_template(&self.owner, name, echo, &[])
            .await?
            .id)
    }

    pub async fn edit(&self, template: Uuid, meta: UpdateTemplateMeta) -> anyhow::Result<()> {
        self.owner.update_template_meta(template, &meta).await?;
        Ok(())
    }

    /// Runs one build by hand and waits for it.
    pub async fn build(&self, client: &Client, ws: Uuid, transition: &str) -> anyhow::Result<()> {
        let build = client
            .create_workspace_build(
                ws,
                &CreateWorkspaceBuildRequest {
                    transition: transition.into(),
                    ..Default::default()
                },
            )
            .await?;
        let done = wait_build(client, build.id).await?;
        anyhow::ensure!(
            done.job.error.is_empty(),
            "{transition} failed: {}",
            done.job.error
        );
        Ok(())
    }

    /// Waits for the workspace's latest build and returns the workspace then.
    pub async fn settled(&self, ws: Uuid) -> anyhow::Result<Workspace> {
        let latest = self.owner.workspace_with_deleted(ws).await?.latest_build.id;
        wait_build(&self.owner, latest).await?;
        Ok(self.owner.workspace_with_deleted(ws).await?)
    }
}

fn only(report: &TickReport, ws: Uuid, reason: BuildReason) {
    assert_eq!(
        report.builds.iter().collect::<Vec<_>>(),
        [(&ws, &reason)],
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn autostart_fires_at_the_scheduled_minute_across_dublins_dst_changes() -> anyhow::Result<()>
{
    // Saturday before Ireland moves to IST (Sunday 28 March 2027, 01:00 UTC).
    let t = Fixture::new(at("2027-03-27T12:00:00Z")).await?;
    let template = t.template("tpl", &EchoTemplate::default()).await?;
    let ws = testutil::running_workspace(&t.owner, template, "dev")
        .await?
        .id;
    t.build(&t.owner, ws, "stop").await?;
    t.owner
        .update_workspace_autostart(
            ws,
            &UpdateWorkspaceAutostartRequest {
                schedule: Some("CRON_TZ=Europe/Dublin 30 9 * * *".into()),
            },
        )
        .await?;
    let next = t.owner.workspace(ws).await?.next_start_at;
    assert_eq!(
        next,
        Some(at("2027-03-28T08:30:00Z")),
        "09:30 IST is 08:30 UTC"
    );

    assert!(t.tick(at("2027-03-28T08:29:59Z")).await.builds.is_empty());
    only(
        &t.tick(at("2027-03-28T08:30:00Z")).await,
        ws,
        BuildReason::Autostart,
    );
    let started = t.settled(ws).await?;
    assert_eq!(started.latest_build.status, WorkspaceStatus::Running);
    assert_eq!(started.latest_build.reason, "autostart");
    assert_eq!(started.next_start_at, Some(at("2027-03-29T08:30:00Z")));
    // The tick after does nothing more: the start is done, the next is tomorrow.
    assert!(t.tick(at("2027-03-28T08:31:00Z")).await.builds.is_empty());

    // Sunday 31 October 2027, Ireland back on GMT at 01:00 UTC: 09:30 is 09:30 UTC again.
    t.set_clock(at("2027-10-30T12:00:00Z"));
    t.build(&t.owner, ws, "stop").await?;
    assert_eq!(
        t.owner.workspace(ws).await?.next_start_at,
        Some(at("2027-10-31T09:30:00Z"))
    );
    assert!(t.tick(at("2027-10-31T09:29:59Z")).await.builds.is_empty());
    only(
        &t.tick(at("2027-10-31T09:30:00Z")).await,
        ws,
        BuildReason::Autostart,
    );
    assert_eq!(
        t.settled(ws).await?.latest_build.status,
        WorkspaceStatus::Running
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_stops_at_its_deadline() -> anyhow::Result<()> {
    let t0 = at("2027-01-04T09:00:00Z");
    let t = Fixture::new(t0).await?;
    let template = t.template("tpl", &EchoTemplate::default()).await?;
    t.edit(
        template,
        UpdateTemplateMeta {
            default_ttl_ms: Some(3_600_000),
            ..Default::default()
        },
    )
    .await?;
    let ws = testutil::running_workspace(&t.owner, template, "dev").await?;
    assert_eq!(ws.ttl_ms, Some(3_600_000), "the template's default TTL");
    let deadline = at("2027-01-04T10:00:00Z");
    assert_eq!(ws.latest_build.deadline, Some(deadline));
    assert_eq!(ws.latest_build.max_deadline, None);

    assert!(t.tick(at("2027-01-04T09:59:59Z")).await.builds.is_empty());
    only(&t.tick(deadline).await, ws.id, BuildReason::Autostop);
    let stopped = t.settled(ws.id).await?;
    assert_eq!(stopped.latest_build.status, WorkspaceStatus::Stopped);
    assert_eq!(stopped.latest_build.reason, "autostop");
    assert!(t.tick(at("2027-01-04T10:01:00Z")).await.builds.is_empty());
    Ok(())
}

fn agent_template(token: &str) -> EchoTemplate {
    EchoTemplate {
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(token.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Reports one SSH session the way the agent does, and waits for the stats flush that
/// records it (it moves `last_used_at`).
async fn report_session(t: &Fixture, conn: &AgentConnection, ws: Uuid) -> anyhow::Result<()> {
    let before = t.owner.workspace(ws).await?.last_used_at;
    conn.call(Request::UpdateStats(Stats {
        connection_count: 1,
        session_count_ssh: 1,
        ..Default::default()
    }))
    .await?;
    eventually(Duration::from_secs(20), "stats flushed", || async {
        Ok(t.owner.workspace(ws).await?.last_used_at > before)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ssh_session_bumps_the_deadline_and_the_workspace_keeps_running() -> anyhow::Result<()> {
    let t = Fixture::new(Utc::now()).await?;
    // Deadlines in this test are the database's own time: the agent's stats are.
    t.set_clock(Utc::now());
    let token = Uuid::new_v4().to_string();
    let template = t.template("tpl", &agent_template(&token)).await?;
    let created = t
        .owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: "dev".into(),
                ttl_ms: Some(600_000),
                ..Default::default()
            },
        )
        .await?;
    t.set_clock(Utc::now());
    let ws = t.settled(created.id).await?;
    let first = ws
        .latest_build
        .deadline
        .ok_or_else(|| anyhow::anyhow!("no deadline"))?;

    let conn = AgentConnection::connect(&t.app.url, &token).await?;
    report_session(&t, &conn, ws.id).await?;
    let bumped = t.owner.workspace(ws.id).await?.latest_build;
    let deadline = bumped
        .deadline
        .ok_or_else(|| anyhow::anyhow!("no deadline"))?;
    assert!(
        deadline > first + chrono::Duration::minutes(45),
        "bumped by the template's hour: {first} -> {deadline}"
    );
    // The old deadline passes; the workspace keeps running.
    assert!(
        t.tick(first + chrono::Duration::minutes(1))
            .await
            .builds
            .is_empty()
    );
    // Another report within the minute writes nothing.
    report_session(&t, &conn, ws.id).await?;
    let again = t.owner.workspace(ws.id).await?.latest_build;
    assert_eq!(
        (again.deadline, again.updated_at),
        (bumped.deadline, bumped.updated_at)
    );
    // The bumped deadline itself still stops it.
    only(&t.tick(deadline).await, ws.id, BuildReason::Autostop);
    t.settled(ws.id).await?;

    // With a required restart, activity never pushes the deadline past it.
    t.edit(
        template,
        UpdateTemplateMeta {
            activity_bump_ms: Some(30 * 86_400_000),
            autostop_requirement: Some(TemplateAutostopRequirement {
                days_of_week: coderd_schedule::bitmap_to_days(coderd_schedule::ALL_DAYS),
                weeks: 1,
            }),
            ..Default::default()
        },
    )
    .await?;
    t.set_clock(Utc::now());
    t.build(&t.owner, ws.id, "start").await?;
    let restarted = t.owner.workspace(ws.id).await?.latest_build;
    let max = restarted
        .max_deadline
        .ok_or_else(|| anyhow::anyhow!("no max deadline"))?;
    assert!(restarted.deadline < Some(max));
    let conn = AgentConnection::connect(&t.app.url, &token).await?;
    report_session(&t, &conn, ws.id).await?;
    assert_eq!(
        t.owner.workspace(ws.id).await?.latest_build.deadline,
        Some(max)
    );
    Ok(())
}

/// A port-forward through the relay is use as well: the relay's usage flush bumps the running
/// deadline as agent stats do, and the workspace outlives its old deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_relay_stream_bumps_the_deadline() -> anyhow::Result<()> {
    let t = Fixture::new(Utc::now()).await?;
    let token = Uuid::new_v4().to_string();
    let template = t.template("tpl", &agent_template(&token)).await?;
    let created = t
        .owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: "dev".into(),
                ttl_ms: Some(600_000),
                ..Default::default()
            },
        )
        .await?;
    t.set_clock(Utc::now());
    let ws = t.settled(created.id).await?;
    let first = ws
        .latest_build
        .deadline
        .ok_or_else(|| anyhow::anyhow!("no deadline"))?;
    let agent = crate::agents::agent_id(&ws);
    let _test_agent = crate::relay::TestAgent::connect(&t.app, &token).await?;
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(t.owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;
    // Without a stream nothing moves it (the agent's connection alone is not use).
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(
        t.owner.workspace(ws.id).await?.latest_build.deadline,
        Some(first)
    );

    let port = crate::relay::echo_server().await?;
    let stream = t
        .owner
        .connect_agent(agent, codersdk::relay::Target::Tcp(port))
        .await?;
    eventually(
        Duration::from_secs(30),
        "the relay's flush bumped the deadline",
        || async {
            let deadline = t.owner.workspace(ws.id).await?.latest_build.deadline;
            Ok(deadline.is_some_and(|d| d > first + chrono::Duration::minutes(45)))
        },
    )
    .await?;
    drop(stream);
    assert!(
        t.tick(first + chrono::Duration::minutes(1))
            .await
            .builds
            .is_empty(),
        "still running past the old deadline"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_start_is_stopped_after_the_failure_ttl() -> anyhow::Result<()> {
    let t = Fixture::new(Utc::now()).await?;
    let echo = EchoTemplate {
        start: Some(BuildStage {
            error: Some(EchoError::new("the cloud is full")),
            ..Default::default()
        }),
        ..Default::default()
    };
    let template = t.template("tpl", &echo).await?;
    t.edit(
        template,
        UpdateTemplateMeta {
            failure_ttl_ms: Some(60_000),
            ..Default::default()
        },
    )
    .await?;
    let created = t
        .owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: "dev".into(),
                ..Default::default()
            },
        )
        .await?;
    let failed = t.settled(created.id).await?;
    assert_eq!(failed.latest_build.status, WorkspaceStatus::Failed);
    let failed_at = failed
        .latest_build
        .job
        .completed_at
        .ok_or_else(|| anyhow::anyhow!("not completed"))?;
    assert!(
        t.tick(failed_at + chrono::Duration::seconds(59))
            .await
            .builds
            .is_empty()
    );
    only(
        &t.tick(failed_at + chrono::Duration::seconds(60)).await,
        created.id,
        BuildReason::FailedStop,
    );
    let stopped = t.settled(created.id).await?;
    assert_eq!(stopped.latest_build.status, WorkspaceStatus::Stopped);
    assert_eq!(stopped.latest_build.reason, "failedstop");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unused_workspace_goes_dormant_refuses_to_start_and_is_deleted() -> anyhow::Result<()> {
    let t = Fixture::new(Utc::now()).await?;
    let (member, _) = t.app.user(&t.owner, "member", &[]).await?;
    let template = t.template("tpl", &EchoTemplate::default()).await?;
    t.edit(
        template,
        UpdateTemplateMeta {
            time_til_dormant_ms: Some(60_000),
            time_til_dormant_autodelete_ms: Some(120_000),
            ..Default::default()
        },
    )
    .await?;
    let ws = testutil::running_workspace(&member, template, "dev").await?;
    let used = ws.last_used_at;
    assert!(
        t.tick(used + chrono::Duration::seconds(59))
            .await
            .builds
            .is_empty()
    );

    let dormant_at = used + chrono::Duration::seconds(60);
    let report = t.tick(dormant_at).await;
    assert_eq!(report.dormant, [ws.id]);
    only(&report, ws.id, BuildReason::Dormancy);
    let stopped = t.settled(ws.id).await?;
    assert_eq!(stopped.latest_build.status, WorkspaceStatus::Stopped);
    assert_eq!(stopped.latest_build.reason, "dormancy");
    assert_eq!(stopped.dormant_at, Some(dormant_at));
    let deleting_at = dormant_at + chrono::Duration::seconds(120);
    assert_eq!(stopped.deleting_at, Some(deleting_at), "shown in advance");

    let refused = member
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                ..Default::default()
            },
        )
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("a dormant workspace started"))?;
    assert_eq!(refused.status(), Some(403));
    assert!(refused.to_string().contains("dormant"), "{refused}");

    assert!(
        t.tick(deleting_at - chrono::Duration::seconds(1))
            .await
            .builds
            .is_empty()
    );
    only(&t.tick(deleting_at).await, ws.id, BuildReason::Autodelete);
    let deleted = t.settled(ws.id).await?;
    assert_eq!(deleted.latest_build.status, WorkspaceStatus::Deleted);
    assert_eq!(deleted.latest_build.reason, "autodelete");
    assert_eq!(
        member.workspace(ws.id).await.err().and_then(|e| e.status()),
        Some(410)
    );
    Ok(())
}

/// A template whose first version has no parameters; returns it with a second version
/// (promoted) built from `next`.
async fn template_with_new_version(
    t: &Fixture,
    next: &EchoTemplate,
) -> anyhow::Result<(Uuid, Uuid, Uuid)> {
    let template = t
        .app
        .echo_template(&t.owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    let v2 = t
        .app
        .echo_version_of(&t.owner, "default", Some(template.id), next, &[])
        .await?;
    wait_job(|| async { Ok(t.owner.template_version(v2.id).await?.job) }).await?;
    Ok((template.id, template.active_version_id, v2.id))
}

#[tokio::test(flavor = "multi_thread")]
async fn automatic_updates_always_autostarts_on_the_new_version() -> anyhow::Result<()> {
    let t = Fixture::new(at("2027-01-04T12:00:00Z")).await?;
    let (template, v1, v2) = template_with_new_version(&t, &EchoTemplate::default()).await?;
    let ws = testutil::running_workspace(&t.owner, template, "dev")
        .await?
        .id;
    t.build(&t.owner, ws, "stop").await?;
    t.owner.update_active_template_version(template, v2).await?;
    t.owner
        .update_workspace_automatic_updates(
            ws,
            &UpdateWorkspaceAutomaticUpdatesRequest {
                automatic_updates: "always".into(),
            },
        )
        .await?;
    t.owner
        .update_workspace_autostart(
            ws,
            &UpdateWorkspaceAutostartRequest {
                schedule: Some("CRON_TZ=America/Chicago 0 8 * * 1-5".into()),
            },
        )
        .await?;
    let before = t.owner.workspace(ws).await?;
    assert!(before.outdated);
    assert_eq!(before.latest_build.template_version_id, v1);
    assert_eq!(before.automatic_updates, "always");
    // Monday 08:00 CST, two hours after the clock's 06:00 CST.
    assert_eq!(before.next_start_at, Some(at("2027-01-04T14:00:00Z")));
    only(
        &t.tick(at("2027-01-04T14:00:00Z")).await,
        ws,
        BuildReason::Autostart,
    );
    let after = t.settled(ws).await?;
    assert_eq!(after.latest_build.template_version_id, v2);
    assert!(!after.outdated);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_autostart_missing_parameters_is_recorded_and_not_retried_every_tick()
-> anyhow::Result<()> {
    let t = Fixture::new(at("2027-01-04T12:00:00Z")).await?;
    let needs_region = EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "region".into(),
                kind: "string".into(),
                required: true,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let (template, _, v2) = template_with_new_version(&t, &needs_region).await?;
    let ws = testutil::running_workspace(&t.owner, template, "dev")
        .await?
        .id;
    t.build(&t.owner, ws, "stop").await?;
    t.owner.update_active_template_version(template, v2).await?;
    for (path, body) in [
        (
            "autoupdates",
            serde_json::json!({"automatic_updates": "always"}),
        ),
        (
            "autostart",
            serde_json::json!({"schedule": "CRON_TZ=UTC 0 9 * * *"}),
        ),
    ] {
        t.owner
            .send_empty(
                t.owner
                    .request(
                        reqwest::Method::PUT,
                        &format!("/api/v2/workspaces/{ws}/{path}"),
                    )?
                    .json(&body),
            )
            .await?;
    }
    assert!(t.owner.resolve_autostart(ws).await?.parameter_mismatch);

    let due = at("2027-01-05T09:00:00Z");
    let report = t.tick(due).await;
    assert!(report.builds.is_empty());
    let why = report.failed.get(&ws).cloned().unwrap_or_default();
    assert!(why.contains("region"), "{why}");
    let row = t.app.state.store.workspace_by_id(ws, false).await?;
    assert_eq!(row.autostart_failed_at, Some(due));
    assert!(row.autostart_failure.is_some_and(|f| f.contains("region")));
    assert_eq!(row.next_start_at, Some(at("2027-01-06T09:00:00Z")));
    // The next ticks of the same day leave it alone.
    let later = t.tick(at("2027-01-05T09:01:00Z")).await;
    assert!(
        later.builds.is_empty() && later.failed.is_empty(),
        "{later:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn require_active_version_refuses_an_old_version_to_non_admins() -> anyhow::Result<()> {
    let t = Fixture::new(Utc::now()).await?;
    let (member, _) = t.app.user(&t.owner, "member", &[]).await?;
    let (template, v1, v2) = template_with_new_version(&t, &EchoTemplate::default()).await?;
    let ws = testutil::running_workspace(&member, template, "dev")
        .await?
        .id;
    t.build(&member, ws, "stop").await?;
    t.owner.update_active_template_version(template, v2).await?;
    t.edit(
        template,
        UpdateTemplateMeta {
            require_active_version: Some(true),
            ..Default::default()
        },
    )
    .await?;
    assert!(member.workspace(ws).await?.template_require_active_version);
    let old = CreateWorkspaceBuildRequest {
        transition: "start".into(),
        template_version_id: Some(v1),
        ..Default::default()
    };
    let refused = member
        .create_workspace_build(ws, &old)
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("an old version started"))?;
    assert_eq!(refused.status(), Some(403));
    assert!(refused.to_string().contains("active version"), "{refused}");
    // Without naming a version, a start takes the active one.
    t.build(&member, ws, "start").await?;
    assert_eq!(
        member.workspace(ws).await?.latest_build.template_version_id,
        v2
    );
    // Template admins may still run an old version.
    t.build(&t.owner, ws, "stop").await?;
    let build = t.owner.create_workspace_build(ws, &old).await?;
    assert_eq!(
        wait_build(&t.owner, build.id).await?.template_version_id,
        v1
    );
    Ok(())
}
