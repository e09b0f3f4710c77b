//! Prebuilt workspaces with the echo engine: the reconciler fills each preset's pool (never
//! beyond its count), a create with the preset claims one, the pool refills, a new version
//! without the preset empties it, a failing preset is retried with backoff, the pool's size
//! follows the preset's schedules by the server's clock, and expired prebuilds are replaced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use coderd_schedule::clock::Clock;

use coderd_store::PREBUILDS_USER_ID;
use codersdk::proto::{
    ExpirationPolicy, Prebuild, Preset, PresetParameter, Resource, RichParameter, Schedule,
    Scheduling,
};
use codersdk::provisionerd::{JobKind, PrebuiltWorkspaceBuildStage};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{CreateWorkspaceRequest, WorkspaceBuildParameter};
use provisionerd::engines::echo::{BuildStage, EchoError, EchoTemplate, ImportStage};
use testutil::{TestApp, eventually, wait_build, wait_job};
use uuid::Uuid;

fn template(presets: Vec<Preset>, fail: bool) -> EchoTemplate {
    EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "size".into(),
                kind: "string".into(),
                default_value: "s".into(),
                mutable: true,
                ..Default::default()
            }],
            presets,
            ..Default::default()
        }),
        start: Some(BuildStage {
            // No agent: a successful start is a ready prebuild.
            resources: vec![Resource {
                name: "box".into(),
                kind: "null_resource".into(),
                ..Default::default()
            }],
            error: fail.then(|| EchoError::new("the cloud is out of boxes")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn preset(name: &str, instances: Option<i32>) -> Preset {
    Preset {
        name: name.into(),
        parameters: vec![PresetParameter {
            name: "size".into(),
            value: "xl".into(),
        }],
        prebuild: instances.map(|instances| Prebuild {
            instances,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Live prebuilds (not deleted) of a template, and how many of them are ready.
async fn pool(app: &TestApp, template: Uuid) -> anyhow::Result<(usize, usize)> {
    let all = app.state.store.prebuilds().await?;
    let mine: Vec<_> = all
        .iter()
        .filter(|p| p.template_id == template && p.transition == "start" && !p.failed)
        .collect();
    Ok((mine.len(), mine.iter().filter(|p| p.ready).count()))
}

/// The build stage the daemon is told for a job.
async fn stage_of(app: &TestApp, job: Uuid) -> anyhow::Result<PrebuiltWorkspaceBuildStage> {
    let row = app.state.store.job_by_id(job).await?;
    match coderd_core::provisioners::payload::build(&app.state, &row, None)
        .await?
        .kind
    {
        JobKind::WorkspaceBuild { metadata, .. } => Ok(metadata.prebuilt_workspace_build_stage),
        other => anyhow::bail!("not a build: {other:?}"),
    }
}

async fn start_attempts(app: &TestApp, template: Uuid) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar::<_, i64>(
        "SELECT count(*) FROM workspace_builds b JOIN workspaces w ON w.id = b.workspace_id
         WHERE w.template_id = $1 AND b.transition = 'start' AND b.initiator_id = $2",
    )
    .bind(template)
    .bind(PREBUILDS_USER_ID)
    .fetch_one(app.pool())
    .await?)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pool_is_kept_claimed_refilled_and_emptied() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 2;
        o.prebuilds = Some(coderd_executors::prebuilds::Options {
            interval: Duration::from_millis(200),
            backoff: Duration::from_secs(60),
        });
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let (member, me) = app.user(&owner, "member", &[]).await?;
    let t = app
        .echo_template(
            &owner,
            "pooled",
            &template(vec![preset("pool", Some(2)), preset("plain", None)], false),
            &[],
        )
        .await?;

    // The pool fills on its own, and never beyond its count.
    eventually(Duration::from_secs(30), "two ready prebuilds", || async {
        let (live, ready) = pool(&app, t.id).await?;
        anyhow::ensure!(live <= 2, "{live} prebuilds for a count of 2");
        Ok(ready == 2)
    })
    .await?;
    let before: Vec<Uuid> = app
        .state
        .store
        .prebuilds()
        .await?
        .iter()
        .map(|p| p.workspace_id)
        .collect();

    // A create with the preset claims one: same workspace, new owner and name, a claim build.
    let presets = member.template_version_presets(t.active_version_id).await?;
    let pool_preset = presets.iter().find(|p| p.name == "pool").expect("pool");
    let ws = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_version_id: Some(t.active_version_id),
                name: "mine".into(),
                template_version_preset_id: Some(pool_preset.id),
                ..Default::default()
            },
        )
        .await?;
    assert!(before.contains(&ws.id), "a prebuild was claimed");
    assert_eq!((ws.owner_id, ws.name.as_str()), (me.id, "mine"));
    assert_eq!(
        ws.latest_build.build_number, 2,
        "the claim build follows the prebuild's"
    );
    let claim = wait_build(&member, ws.latest_build.id).await?;
    assert_eq!(claim.job.status, ProvisionerJobStatus::Succeeded);
    assert_eq!(
        (claim.initiator_id, claim.template_version_preset_id),
        (me.id, Some(pool_preset.id))
    );
    // The daemon is told which build made the prebuild and which claims it.
    let unclaimed = before.iter().find(|id| **id != ws.id).expect("another");
    let unclaimed = owner.workspace(*unclaimed).await?;
    assert_eq!(
        stage_of(&app, unclaimed.latest_build.job.id).await?,
        PrebuiltWorkspaceBuildStage::Create
    );
    assert_eq!(
        stage_of(&app, claim.job.id).await?,
        PrebuiltWorkspaceBuildStage::Claim
    );
    assert!(member.workspace_build_parameters(claim.id).await?.contains(
        &WorkspaceBuildParameter {
            name: "size".into(),
            value: "xl".into()
        }
    ));

    // The pool refills without the claimed one.
    eventually(Duration::from_secs(30), "the pool refilled", || async {
        let (live, ready) = pool(&app, t.id).await?;
        anyhow::ensure!(live <= 2, "{live} prebuilds for a count of 2");
        Ok(ready == 2)
    })
    .await?;
    assert!(
        app.state
            .store
            .prebuilds()
            .await?
            .iter()
            .all(|p| p.workspace_id != ws.id)
    );

    // A preset without prebuilds is built normally.
    let plain = presets.iter().find(|p| p.name == "plain").expect("plain");
    let normal = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_version_id: Some(t.active_version_id),
                name: "normal".into(),
                template_version_preset_id: Some(plain.id),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(normal.latest_build.build_number, 1);
    assert_eq!(
        stage_of(&app, normal.latest_build.job.id).await?,
        PrebuiltWorkspaceBuildStage::None
    );

    // A new active version without the preset: its prebuilds go, the claimed one stays.
    let v2 = app
        .echo_version_of(
            &owner,
            "default",
            Some(t.id),
            &template(vec![preset("plain", None)], false),
            &[],
        )
        .await?;
    wait_job(|| async { Ok(owner.template_version(v2.id).await?.job) }).await?;
    owner.update_active_template_version(t.id, v2.id).await?;
    eventually(Duration::from_secs(30), "the old pool deleted", || async {
        let left = app
            .state
            .store
            .prebuilds()
            .await?
            .into_iter()
            .filter(|p| p.template_id == t.id && !(p.transition == "delete" && p.done))
            .count();
        Ok(left == 0)
    })
    .await?;
    assert_eq!(member.workspace(ws.id).await?.owner_id, me.id);

    let metrics = reqwest::get(app.url.join("/metrics")?)
        .await?
        .text()
        .await?;
    for name in [
        "coderd_prebuilt_workspaces_desired",
        "coderd_prebuilt_workspaces_running",
        "coderd_prebuilt_workspaces_eligible",
        "coderd_prebuilt_workspaces_created_total",
        "coderd_prebuilt_workspaces_claimed_total",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_prebuild_is_retried_with_backoff() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.prebuilds = Some(coderd_executors::prebuilds::Options {
            interval: Duration::from_millis(100),
            backoff: Duration::from_secs(1),
        });
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let t = app
        .echo_template(
            &owner,
            "failing",
            &template(vec![preset("pool", Some(1))], true),
            &[],
        )
        .await?;
    eventually(Duration::from_secs(30), "a first failure", || async {
        Ok(start_attempts(&app, t.id).await? >= 1)
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(8)).await;
    // Waits of 1, 2 and 4 s after each failure allow about four attempts in 8 s; a tight loop
    // at the 100 ms interval would make dozens.
    let attempts = start_attempts(&app, t.id).await?;
    assert!(
        (2..=6).contains(&attempts),
        "{attempts} attempts in 8 s: not retried, or not backing off"
    );
    let metrics = reqwest::get(app.url.join("/metrics")?)
        .await?
        .text()
        .await?;
    assert!(metrics.contains("coderd_prebuilt_workspaces_failed_total"));
    Ok(())
}

/// A test clock the reconciler reads, moved by the test.
fn settable_clock(start: DateTime<Utc>) -> (Arc<Mutex<DateTime<Utc>>>, Clock) {
    let now = Arc::new(Mutex::new(start));
    let read = now.clone();
    let clock = Clock::from_fn(move || *read.lock().unwrap_or_else(|e| e.into_inner()));
    (now, clock)
}

fn set(now: &Mutex<DateTime<Utc>>, at: DateTime<Utc>) {
    *now.lock().unwrap_or_else(|e| e.into_inner()) = at;
}

async fn pool_size_becomes(app: &TestApp, t: Uuid, want: usize, what: &str) -> anyhow::Result<()> {
    eventually(Duration::from_secs(30), what, || async {
        let all = app.state.store.prebuilds().await?;
        let mine: Vec<_> = all
            .iter()
            .filter(|p| p.template_id == t && !(p.transition == "delete" && p.done))
            .collect();
        let ready = mine
            .iter()
            .filter(|p| p.ready && p.transition == "start")
            .count();
        Ok(mine.len() == want && ready == want)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pool_follows_its_schedule_and_expired_prebuilds_are_replaced() -> anyhow::Result<()> {
    // Monday 2 June 2025, 09:00 in Berlin (07:00 UTC): inside the weekday schedule.
    let monday_nine = Utc
        .with_ymd_and_hms(2025, 6, 2, 7, 0, 0)
        .single()
        .expect("a time");
    let (now, clock) = settable_clock(monday_nine);
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 2;
        o.deployment.clock = clock;
        o.prebuilds = Some(coderd_executors::prebuilds::Options {
            interval: Duration::from_millis(200),
            backoff: Duration::from_secs(60),
        });
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let mut scheduled = preset("scheduled", Some(0));
    if let Some(prebuild) = scheduled.prebuild.as_mut() {
        prebuild.scheduling = Some(Scheduling {
            timezone: "Europe/Berlin".into(),
            schedule: vec![
                Schedule {
                    cron: "* 8-17 * * 1-5".into(),
                    instances: 2,
                },
                Schedule {
                    cron: "* 18-19 * * *".into(),
                    instances: 1,
                },
            ],
        });
    }
    let t = app
        .echo_template(&owner, "scheduled", &template(vec![scheduled], false), &[])
        .await?;

    pool_size_becomes(&app, t.id, 2, "two prebuilds in working hours").await?;
    let first: Vec<Uuid> = app
        .state
        .store
        .prebuilds()
        .await?
        .iter()
        .map(|p| p.workspace_id)
        .collect();

    // 18:30 Berlin: the second schedule's one instance.
    set(&now, monday_nine + chrono::Duration::minutes(9 * 60 + 30));
    pool_size_becomes(&app, t.id, 1, "one prebuild in the evening").await?;

    // 21:00 Berlin: no schedule matches, so the preset's own count (0) applies.
    set(&now, monday_nine + chrono::Duration::hours(12));
    pool_size_becomes(&app, t.id, 0, "an empty pool at night").await?;

    // Tuesday 09:00 again: two new prebuilds, none of the morning's.
    let tuesday_nine = monday_nine + chrono::Duration::days(1);
    set(&now, tuesday_nine);
    pool_size_becomes(&app, t.id, 2, "the pool refilled on Tuesday").await?;
    let tuesday: Vec<Uuid> = app
        .state
        .store
        .prebuilds()
        .await?
        .iter()
        .filter(|p| p.transition == "start")
        .map(|p| p.workspace_id)
        .collect();
    assert!(tuesday.iter().all(|id| !first.contains(id)));

    // A preset with an hour's expiration TTL: once its prebuild is an hour old (by the
    // server's clock; rows are stamped with the real time), it is replaced by a fresh one.
    let mut expiring = preset("expiring", Some(1));
    if let Some(prebuild) = expiring.prebuild.as_mut() {
        prebuild.expiration_policy = Some(ExpirationPolicy { ttl: 3600 });
    }
    let e = app
        .echo_template(&owner, "expiring", &template(vec![expiring], false), &[])
        .await?;
    pool_size_becomes(&app, e.id, 1, "one expiring prebuild").await?;
    let old: Vec<Uuid> = app
        .state
        .store
        .prebuilds()
        .await?
        .iter()
        .filter(|p| p.template_id == e.id)
        .map(|p| p.workspace_id)
        .collect();
    set(&now, Utc::now() + chrono::Duration::minutes(30));
    tokio::time::sleep(Duration::from_secs(1)).await;
    pool_size_becomes(&app, e.id, 1, "not yet expired").await?;
    assert!(
        app.state
            .store
            .prebuilds()
            .await?
            .iter()
            .any(|p| old.contains(&p.workspace_id) && p.transition == "start"),
        "replaced before its TTL"
    );
    set(&now, Utc::now() + chrono::Duration::minutes(61));
    eventually(
        Duration::from_secs(30),
        "the expired prebuild replaced",
        || async {
            let live: Vec<Uuid> = app
                .state
                .store
                .prebuilds()
                .await?
                .iter()
                .filter(|p| p.template_id == e.id && p.transition == "start" && p.ready)
                .map(|p| p.workspace_id)
                .collect();
            Ok(live.len() == 1 && !old.contains(&live[0]))
        },
    )
    .await?;
    Ok(())
}
