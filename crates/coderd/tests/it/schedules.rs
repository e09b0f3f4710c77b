//! The schedule API: a workspace's autostart, TTL, deadline extension, dormancy and automatic
//! updates; a template's schedule settings; and the JSON shapes (names and types) Coder's
//! clients read.

use chrono::Utc;
use codersdk::templates::{
    CreateTemplateRequest, TemplateAutostartRequirement, TemplateAutostopRequirement,
    UpdateTemplateMeta,
};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, PutExtendWorkspaceRequest, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, UpdateWorkspaceDormancy, UpdateWorkspaceTTLRequest,
};
use codersdk::{Client, ClientError};
use provisionerd::engines::echo::EchoTemplate;
use serde_json::Value;
use testutil::{TestApp, wait_build, wait_job};
use uuid::Uuid;

fn refusal(result: Result<impl std::fmt::Debug, ClientError>) -> (u16, codersdk::Response) {
    match result {
        Err(ClientError::Api { status, response }) => (status, response),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn field(response: &codersdk::Response) -> &str {
    response
        .validations
        .first()
        .map_or("", |v| v.field.as_str())
}

async fn running(app: &TestApp, owner: &Client) -> anyhow::Result<(Uuid, Uuid)> {
    let template = app
        .echo_template(owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    let ws = testutil::running_workspace(owner, template.id, "dev").await?;
    Ok((template.id, ws.id))
}

fn autostart(schedule: Option<&str>) -> UpdateWorkspaceAutostartRequest {
    UpdateWorkspaceAutostartRequest {
        schedule: schedule.map(str::to_string),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn autostart_and_ttl_are_validated_and_honour_the_template() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (template, ws) = running(&app, &owner).await?;

    let (status, r) = refusal(
        owner
            .update_workspace_autostart(ws, &autostart(Some("9am daily")))
            .await,
    );
    assert_eq!((status, field(&r)), (400, "schedule"));
    assert!(r.validations[0].detail.contains("CRON_TZ="), "{r:?}");
    let (status, r) = refusal(
        owner
            .update_workspace_autostart(ws, &autostart(Some("CRON_TZ=Nowhere/Land 0 9 * * *")))
            .await,
    );
    assert_eq!((status, field(&r)), (400, "schedule"));
    assert!(r.validations[0].detail.contains("time zone"), "{r:?}");

    owner
        .update_workspace_autostart(ws, &autostart(Some("CRON_TZ=Asia/Tokyo 30 8 * * 1-5")))
        .await?;
    let w = owner.workspace(ws).await?;
    assert_eq!(
        w.autostart_schedule.as_deref(),
        Some("CRON_TZ=Asia/Tokyo 30 8 * * 1-5")
    );
    let next = w
        .next_start_at
        .ok_or_else(|| anyhow::anyhow!("no next start"))?;
    assert!(next > Utc::now() && next < Utc::now() + chrono::Duration::days(4));
    owner
        .update_workspace_autostart(ws, &autostart(None))
        .await?;
    let w = owner.workspace(ws).await?;
    assert_eq!((w.autostart_schedule, w.next_start_at), (None, None));

    let ttl = |ms| UpdateWorkspaceTTLRequest { ttl_ms: ms };
    let (status, r) = refusal(owner.update_workspace_ttl(ws, &ttl(Some(1000))).await);
    assert_eq!((status, field(&r)), (400, "ttl_ms"));
    assert!(r.validations[0].detail.contains("at least one minute"));
    let (status, _) = refusal(
        owner
            .update_workspace_ttl(ws, &ttl(Some(31 * 86_400_000)))
            .await,
    );
    assert_eq!(status, 400);
    owner
        .update_workspace_ttl(ws, &ttl(Some(7_200_000)))
        .await?;
    assert_eq!(owner.workspace(ws).await?.ttl_ms, Some(7_200_000));
    // Restarted, the workspace has a deadline; turning autostop off clears it.
    for transition in ["stop", "start"] {
        let b = owner
            .create_workspace_build(
                ws,
                &CreateWorkspaceBuildRequest {
                    transition: transition.into(),
                    ..Default::default()
                },
            )
            .await?;
        wait_build(&owner, b.id).await?;
    }
    assert!(owner.workspace(ws).await?.latest_build.deadline.is_some());
    owner.update_workspace_ttl(ws, &ttl(None)).await?;
    let w = owner.workspace(ws).await?;
    assert_eq!((w.ttl_ms, w.latest_build.deadline), (None, None));

    let (status, r) = refusal(
        owner
            .update_workspace_automatic_updates(
                ws,
                &UpdateWorkspaceAutomaticUpdatesRequest {
                    automatic_updates: "sometimes".into(),
                },
            )
            .await,
    );
    assert_eq!((status, field(&r)), (400, "automatic_updates"));

    // A template may keep these decisions to itself.
    owner
        .update_template_meta(
            template,
            &UpdateTemplateMeta {
                allow_user_autostart: Some(false),
                allow_user_autostop: Some(false),
                default_ttl_ms: Some(3_600_000),
                ..Default::default()
            },
        )
        .await?;
    let (status, r) = refusal(
        owner
            .update_workspace_autostart(ws, &autostart(Some("0 9 * * *")))
            .await,
    );
    assert_eq!(status, 400);
    assert!(r.validations[0].detail.contains("not allowed"), "{r:?}");
    let (status, r) = refusal(owner.update_workspace_ttl(ws, &ttl(Some(600_000))).await);
    assert_eq!((status, field(&r)), (400, "ttl_ms"));
    assert_eq!(
        owner.workspace(ws).await?.ttl_ms,
        Some(3_600_000),
        "the template's TTL applies"
    );

    // Someone who cannot see the workspace cannot learn it exists.
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (status, _) = refusal(member.update_workspace_ttl(ws, &ttl(Some(600_000))).await);
    assert_eq!(status, 404);
    let (status, _) = refusal(member.resolve_autostart(ws).await);
    assert_eq!(status, 404);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn extending_moves_the_deadline_within_the_rules() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (template, ws) = running(&app, &owner).await?;
    let extend = |minutes: i64| PutExtendWorkspaceRequest {
        deadline: Utc::now() + chrono::Duration::minutes(minutes),
    };
    let (status, r) = refusal(owner.extend_workspace(ws, &extend(60)).await);
    assert_eq!(
        (status, r.message.as_str()),
        (409, "Workspace shutdown is manual.")
    );

    owner
        .update_template_meta(
            template,
            &UpdateTemplateMeta {
                autostop_requirement: Some(TemplateAutostopRequirement {
                    days_of_week: coderd_schedule::bitmap_to_days(coderd_schedule::ALL_DAYS),
                    weeks: 1,
                }),
                ..Default::default()
            },
        )
        .await?;
    owner
        .update_workspace_ttl(
            ws,
            &UpdateWorkspaceTTLRequest {
                ttl_ms: Some(600_000),
            },
        )
        .await?;
    for transition in ["stop", "start"] {
        let b = owner
            .create_workspace_build(
                ws,
                &CreateWorkspaceBuildRequest {
                    transition: transition.into(),
                    ..Default::default()
                },
            )
            .await?;
        wait_build(&owner, b.id).await?;
    }
    let build = owner.workspace(ws).await?.latest_build;
    let max = build
        .max_deadline
        .ok_or_else(|| anyhow::anyhow!("no max deadline"))?;
    assert!(build.deadline.is_some_and(|d| d < max));

    let (status, r) = refusal(owner.extend_workspace(ws, &extend(10)).await);
    assert_eq!(status, 400);
    assert!(r.message.contains("at least 30 minutes"), "{r:?}");
    let (status, r) = refusal(
        owner
            .extend_workspace(
                ws,
                &PutExtendWorkspaceRequest {
                    deadline: max + chrono::Duration::minutes(1),
                },
            )
            .await,
    );
    assert_eq!(
        (status, r.message.as_str()),
        (400, "Cannot extend workspace beyond max deadline.")
    );

    let wanted = (Utc::now() + chrono::Duration::minutes(70)).min(max);
    let wanted = wanted - chrono::Duration::nanoseconds(i64::from(wanted.timestamp_subsec_nanos()));
    let ok = owner
        .extend_workspace(ws, &PutExtendWorkspaceRequest { deadline: wanted })
        .await?;
    assert!(ok.message.starts_with("Deadline updated to "), "{ok:?}");
    assert_eq!(
        owner.workspace(ws).await?.latest_build.deadline,
        Some(wanted)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn dormancy_is_set_by_hand_and_lifted() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (_, ws) = running(&app, &owner).await?;
    let stop = owner
        .create_workspace_build(
            ws,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&owner, stop.id).await?;
    let dormant = UpdateWorkspaceDormancy { dormant: true };
    let w: codersdk::workspaces::Workspace = owner
        .put(&format!("/api/v2/workspaces/{ws}/dormant"), &dormant)
        .await?;
    assert!(w.dormant_at.is_some());
    assert_eq!(w.deleting_at, None, "the template deletes nothing");
    let again = owner
        .request(
            reqwest::Method::PUT,
            &format!("/api/v2/workspaces/{ws}/dormant"),
        )?
        .json(&dormant)
        .send()
        .await?;
    assert_eq!(again.status().as_u16(), 304);
    let start = CreateWorkspaceBuildRequest {
        transition: "start".into(),
        ..Default::default()
    };
    let (status, _) = refusal(owner.create_workspace_build(ws, &start).await);
    assert_eq!(status, 403);
    owner
        .update_workspace_dormancy(ws, &UpdateWorkspaceDormancy { dormant: false })
        .await?;
    assert_eq!(owner.workspace(ws).await?.dormant_at, None);
    let b = owner.create_workspace_build(ws, &start).await?;
    assert!(wait_build(&owner, b.id).await?.job.error.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn template_schedule_settings_are_validated_and_round_trip() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let version = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[])
        .await?;
    wait_job(|| async { Ok(owner.template_version(version.id).await?.job) }).await?;
    let created = owner
        .create_template(
            "default",
            &CreateTemplateRequest {
                name: "scheduled".into(),
                template_version_id: version.id,
                default_ttl_ms: Some(8 * 3_600_000),
                activity_bump_ms: Some(1_800_000),
                autostop_requirement: Some(TemplateAutostopRequirement {
                    days_of_week: vec!["saturday".into(), "Sunday".into()],
                    weeks: 2,
                }),
                autostart_requirement: Some(TemplateAutostartRequirement {
                    days_of_week: vec!["monday".into(), "friday".into()],
                }),
                failure_ttl_ms: Some(3_600_000),
                dormant_ttl_ms: Some(30 * 86_400_000),
                delete_ttl_ms: Some(7 * 86_400_000),
                require_active_version: true,
                max_port_share_level: Some("authenticated".into()),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(created.activity_bump_ms, 1_800_000);
    assert_eq!(
        created.autostop_requirement.days_of_week,
        ["saturday", "sunday"]
    );
    assert_eq!(created.autostop_requirement.weeks, 2);
    assert_eq!(
        created.autostart_requirement.days_of_week,
        ["monday", "friday"]
    );
    assert_eq!(
        (
            created.failure_ttl_ms,
            created.time_til_dormant_ms,
            created.time_til_dormant_autodelete_ms
        ),
        (3_600_000, 30 * 86_400_000, 7 * 86_400_000)
    );
    assert!(created.require_active_version && created.allow_user_autostart);
    assert_eq!(created.max_port_share_level, "authenticated");

    let (status, r) = refusal(
        owner
            .update_template_meta(
                created.id,
                &UpdateTemplateMeta {
                    activity_bump_ms: Some(-1),
                    failure_ttl_ms: Some(500),
                    autostop_requirement: Some(TemplateAutostopRequirement {
                        days_of_week: vec!["someday".into()],
                        weeks: 1,
                    }),
                    max_port_share_level: Some("everyone".into()),
                    ..Default::default()
                },
            )
            .await,
    );
    assert_eq!(status, 400);
    let mut fields: Vec<&str> = r.validations.iter().map(|v| v.field.as_str()).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "activity_bump_ms",
            "autostop_requirement.days_of_week",
            "failure_ttl_ms",
            "max_port_share_level"
        ]
    );
    let unchanged = owner.template(created.id).await?;
    assert_eq!(
        unchanged.activity_bump_ms, 1_800_000,
        "bad input changes nothing"
    );

    let edited = owner
        .update_template_meta(
            created.id,
            &UpdateTemplateMeta {
                activity_bump_ms: Some(0),
                autostart_requirement: Some(TemplateAutostartRequirement {
                    days_of_week: coderd_schedule::bitmap_to_days(coderd_schedule::ALL_DAYS),
                }),
                require_active_version: Some(false),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(edited.activity_bump_ms, 0);
    assert_eq!(edited.autostart_requirement.days_of_week.len(), 7);
    assert_eq!(
        edited.default_ttl_ms,
        8 * 3_600_000,
        "untouched fields stay"
    );
    assert!(!edited.require_active_version);
    Ok(())
}

fn is_time_or_null(v: &Value) -> bool {
    v.is_null()
        || v.as_str()
            .is_some_and(|s| s.parse::<chrono::DateTime<Utc>>().is_ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn new_fields_have_coders_names_and_json_types() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (template, ws) = running(&app, &owner).await?;
    owner
        .update_workspace_autostart(ws, &autostart(Some("CRON_TZ=Europe/Paris 0 9 * * *")))
        .await?;

    let w: Value = owner.get(&format!("/api/v2/workspaces/{ws}")).await?;
    assert!(w["autostart_schedule"].is_string());
    assert!(w["ttl_ms"].is_null() || w["ttl_ms"].is_i64());
    assert!(w["next_start_at"].is_string() && is_time_or_null(&w["next_start_at"]));
    for key in ["dormant_at", "deleting_at"] {
        assert!(w.get(key).is_some_and(is_time_or_null), "{key}: {}", w[key]);
    }
    assert!(w["automatic_updates"].is_string());
    assert!(w["template_require_active_version"].is_boolean());
    assert!(w["outdated"].is_boolean());
    for key in ["deadline", "max_deadline"] {
        assert!(
            w["latest_build"].get(key).is_some_and(is_time_or_null),
            "latest_build.{key}"
        );
    }

    // Build times are refreshed off the request path, about a second after a job completes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let t: Value = loop {
        let t: Value = owner.get(&format!("/api/v2/templates/{template}")).await?;
        if t["build_time_stats"]["start"]["P50"].is_i64() || std::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for key in [
        "default_ttl_ms",
        "activity_bump_ms",
        "failure_ttl_ms",
        "time_til_dormant_ms",
        "time_til_dormant_autodelete_ms",
    ] {
        assert!(t[key].is_i64(), "{key}: {}", t[key]);
    }
    assert_eq!(
        t["activity_bump_ms"], 3_600_000,
        "Coder's default bump: an hour"
    );
    for key in [
        "allow_user_autostart",
        "allow_user_autostop",
        "require_active_version",
    ] {
        assert!(t[key].is_boolean(), "{key}");
    }
    assert!(t["deprecation_message"].is_string());
    assert_eq!(t["max_port_share_level"], "owner");
    assert!(t["autostop_requirement"]["days_of_week"].is_array());
    assert_eq!(t["autostop_requirement"]["weeks"], 1);
    assert_eq!(
        t["autostart_requirement"]["days_of_week"]
            .as_array()
            .map(Vec::len),
        Some(7)
    );
    let stats = &t["build_time_stats"];
    for transition in ["start", "stop", "delete"] {
        for p in ["P50", "P95"] {
            let v = &stats[transition][p];
            assert!(v.is_null() || v.is_i64(), "{transition}.{p}: {v}");
        }
    }
    assert!(
        stats["start"]["P50"].is_i64(),
        "the workspace's start counts: {stats}"
    );
    assert!(stats["delete"]["P50"].is_null(), "nothing deleted yet");

    let r: Value = owner
        .get(&format!("/api/v2/workspaces/{ws}/resolve-autostart"))
        .await?;
    assert_eq!(r, serde_json::json!({"parameter_mismatch": false}));
    Ok(())
}
