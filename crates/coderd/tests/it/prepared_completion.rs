//! A build's completion prepared from the schedule facts read with its payload: one guarded
//! statement records it while the facts hold; when the workspace's or the template's schedule
//! changed in between, the completion transaction records it from the new facts.

use chrono::{DateTime, Utc};
use coderd_store::{BuildSchedule, Claimant, Completion, FinishOutcome, JobRow};
use codersdk::Client;
use codersdk::proto::Resource;
use codersdk::templates::UpdateTemplateMeta;
use codersdk::workspaces::{CreateWorkspaceRequest, UpdateWorkspaceTTLRequest};
use provisionerd::DaemonAuth;
use provisionerd::engines::echo::EchoTemplate;
use testutil::{DaemonSpec, TestApp};
use uuid::Uuid;

const HOUR_MS: i64 = 3_600_000;

/// How many completions the transaction path recorded so far (its store operation's count).
fn transaction_completions(app: &TestApp) -> u64 {
    app.state
        .metrics
        .render()
        .lines()
        .filter(|l| {
            l.starts_with("coderd_db_query_duration_seconds_count{")
                && l.contains(r#"query="complete_job""#)
                && l.contains(r#"outcome="ok""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn workspace(client: &Client, template: Uuid, name: &str) -> anyhow::Result<Uuid> {
    let ws = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: name.into(),
                ..Default::default()
            },
        )
        .await?;
    client
        .update_workspace_ttl(
            ws.id,
            &UpdateWorkspaceTTLRequest {
                ttl_ms: Some(HOUR_MS),
            },
        )
        .await?;
    Ok(ws.id)
}

fn build_id(job: &JobRow) -> anyhow::Result<Uuid> {
    Ok(job.input["workspace_build_id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no build id in {}", job.input))?
        .parse()?)
}

/// A template whose builds only a daemon with this test's tag takes: the built-in daemons
/// leave them pending for the test to claim. Its import ran on such a daemon, stopped since.
async fn tagged_template(app: &TestApp, owner: &Client) -> anyhow::Result<Uuid> {
    let tags = [("prepared-completion", "yes")];
    let importer = app.daemon(
        DaemonSpec::new(
            "importer",
            DaemonAuth::SessionToken(owner.token().unwrap_or_default().to_string()),
        )
        .tags(&tags),
    )?;
    let template = app
        .echo_template(owner, "tpl", &EchoTemplate::default(), &tags)
        .await?;
    importer.stop().await??;
    Ok(template.id)
}

/// The organization and tag key of a workspace's pending build job.
async fn queue_of(app: &TestApp, workspace: Uuid) -> anyhow::Result<(Uuid, String)> {
    Ok(sqlx::query_as(
        "SELECT j.organization_id, j.tags_key FROM provisioner_jobs j
         JOIN workspace_builds b ON b.job_id = j.id WHERE b.workspace_id = $1",
    )
    .bind(workspace)
    .fetch_one(app.pool())
    .await?)
}

fn bare_build(now: DateTime<Utc>, resources: Vec<Resource>) -> Completion {
    Completion::Build {
        state: b"state".to_vec(),
        resources,
        features: Default::default(),
        external_tokens: vec![],
        schedule: Box::new(BuildSchedule {
            now,
            quiet_hours: coderd_core::state::default_quiet_hours(),
        }),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prepared_completion_records_the_deadlines_of_the_facts_that_hold() -> anyhow::Result<()>
{
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let template = tagged_template(&app, &owner).await?;
    let unchanged = workspace(&owner, template, "unchanged").await?;
    let ttl_changed = workspace(&owner, template, "ttl-changed").await?;
    let template_changed = workspace(&owner, template, "template-changed").await?;

    let (org, key) = queue_of(&app, unchanged).await?;
    let store = &app.state.store;
    let worker = Uuid::new_v4();
    let provisioners = ["echo".to_string()];
    let keys = [key];
    let claimant = Claimant {
        org,
        provisioners: &provisioners,
        tag_keys: &keys,
        worker,
    };
    let now: DateTime<Utc> = "2030-01-07T10:00:00Z".parse()?;

    // The builds are claimed oldest first, as a daemon's session claims them: the first alone,
    // each next one with the result before it.
    let mut job = store
        .acquire_job(org, &provisioners, &keys, worker)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    for (workspace, change, ttl_ms, by_transaction, resources) in [
        (unchanged, None, HOUR_MS, false, vec![]),
        (ttl_changed, Some("workspace"), 2 * HOUR_MS, true, vec![]),
        (
            template_changed,
            Some("template"),
            3 * HOUR_MS,
            true,
            vec![],
        ),
    ] {
        let completion = bare_build(now, resources);
        let build = build_id(&job)?;
        let context = store.build_context(build).await?;
        assert_eq!(context.workspace_id, workspace, "claimed in creation order");
        let facts = context.completion_facts();
        match change {
            Some("workspace") => {
                owner
                    .update_workspace_ttl(
                        workspace,
                        &UpdateWorkspaceTTLRequest {
                            ttl_ms: Some(ttl_ms),
                        },
                    )
                    .await?;
            }
            Some(_) => {
                owner
                    .update_template_meta(
                        template,
                        &UpdateTemplateMeta {
                            allow_user_autostop: Some(false),
                            default_ttl_ms: Some(ttl_ms),
                            ..Default::default()
                        },
                    )
                    .await?;
            }
            None => {}
        }
        let before = transaction_completions(&app);
        let (outcome, next) = store
            .complete_prepared_and_claim(
                job.id,
                worker,
                &completion,
                &[],
                &[],
                Some(&claimant),
                Some(&facts),
            )
            .await?;
        assert_eq!(outcome, FinishOutcome::Recorded);
        assert_eq!(
            transaction_completions(&app) - before,
            u64::from(by_transaction),
            "{workspace}: recorded by the transaction: {by_transaction}"
        );
        let recorded = owner.workspace_build(build).await?;
        assert_eq!(
            recorded.deadline,
            Some(now + chrono::Duration::milliseconds(ttl_ms)),
            "{workspace}: the deadline follows the facts when it was recorded"
        );
        assert_eq!(
            recorded.job.status.as_str(),
            "succeeded",
            "{}",
            recorded.job.error
        );
        let names: Vec<&str> = recorded.resources.iter().map(|r| r.name.as_str()).collect();
        let wanted: Vec<&str> = match &completion {
            Completion::Build { resources, .. } => {
                resources.iter().map(|r| r.name.as_str()).collect()
            }
            Completion::Import { .. } => vec![],
        };
        assert_eq!(names, wanted, "{workspace}: its resources");
        // Resent, the result is recorded already: the guarded statement does nothing and the
        // transaction says so, claiming nothing.
        let (again, none) = store
            .complete_prepared_and_claim(
                job.id,
                worker,
                &completion,
                &[],
                &[],
                Some(&claimant),
                Some(&facts),
            )
            .await?;
        assert_eq!((again, none), (FinishOutcome::AlreadyRecorded, None));
        match next {
            Some(next) => job = next,
            None => {
                assert_eq!(workspace, template_changed, "the last build claims nothing");
                break;
            }
        }
    }
    Ok(())
}

/// A TTL change committing while the prepared statement waits for the workspace's row: the
/// statement re-checks the facts on the row as that change left it, writes nothing, and the
/// transaction records the build with the new TTL.
#[tokio::test(flavor = "multi_thread")]
async fn a_ttl_change_committed_while_the_completion_waits_wins() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let template = tagged_template(&app, &owner).await?;
    let ws = workspace(&owner, template, "raced").await?;
    let (org, key) = queue_of(&app, ws).await?;
    let store = app.state.store.clone();
    let worker = Uuid::new_v4();
    let job = store
        .acquire_job(org, &["echo".to_string()], &[key], worker)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    let build = build_id(&job)?;
    let facts = store.build_context(build).await?.completion_facts();

    // A writer holds the workspace's row with a new TTL, uncommitted (as `set_ttl` would).
    let mut writer = app.pool().begin().await?;
    sqlx::query("UPDATE workspaces SET ttl_ms = $2 WHERE id = $1")
        .bind(ws)
        .bind(2 * HOUR_MS)
        .execute(&mut *writer)
        .await?;
    let now: DateTime<Utc> = "2030-01-07T10:00:00Z".parse()?;
    let before = transaction_completions(&app);
    let completing = tokio::spawn(async move {
        store
            .complete_prepared_and_claim(
                job.id,
                worker,
                &bare_build(now, vec![]),
                &[],
                &[],
                None,
                Some(&facts),
            )
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !completing.is_finished(),
        "the completion waits for the workspace's row"
    );
    writer.commit().await?;
    let (outcome, claimed) = completing.await??;
    assert_eq!((outcome, claimed), (FinishOutcome::Recorded, None));
    assert_eq!(
        transaction_completions(&app) - before,
        1,
        "the transaction recorded it"
    );
    let recorded = owner.workspace_build(build).await?;
    assert_eq!(
        recorded.deadline,
        Some(now + chrono::Duration::milliseconds(2 * HOUR_MS)),
        "the deadline follows the TTL committed first"
    );
    Ok(())
}
