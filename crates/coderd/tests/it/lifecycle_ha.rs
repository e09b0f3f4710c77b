//! Two coderds on one database, both executors running and ticking at the same instant over
//! 200 workspaces due at once: every workspace gets exactly one autostop build.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use coderd_core::domain::builds::BuildReason;
use coderd_executors::lifecycle::{self, Tick, TickReport, Ticks};
use coderd_schedule::clock::Clock;
use codersdk::templates::UpdateTemplateMeta;
use codersdk::workspaces::CreateWorkspaceRequest;
use futures::StreamExt;
use provisionerd::engines::echo::EchoTemplate;
use testutil::{TestApp, eventually};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const WORKSPACES: usize = 200;

async fn tick_both(
    a: &mpsc::Sender<Tick>,
    b: &mpsc::Sender<Tick>,
    now: DateTime<Utc>,
) -> anyhow::Result<(TickReport, TickReport)> {
    let (ra, wa) = oneshot::channel();
    let (rb, wb) = oneshot::channel();
    a.send(Tick {
        now,
        report: Some(ra),
    })
    .await?;
    b.send(Tick {
        now,
        report: Some(rb),
    })
    .await?;
    Ok((wa.await?, wb.await?))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_create_exactly_one_build_per_due_workspace() -> anyhow::Result<()> {
    let t0: DateTime<Utc> = "2027-01-04T09:00:00Z".parse()?;
    let clock = Clock::from_fn(move || t0);
    let fixed = clock.clone();
    let a = TestApp::with_options(|o| {
        o.provisioner_daemons = 3;
        o.autobuild_poll_interval = None;
        o.deployment.clock = fixed;
    })
    .await?;
    let fixed = clock.clone();
    let b = a
        .replica(|o| {
            o.provisioner_daemons = 3;
            o.autobuild_poll_interval = None;
            o.deployment.clock = fixed;
        })
        .await?;
    let (owner, _) = a.owner().await?;
    let template = a
        .echo_template(&owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    owner
        .update_template_meta(
            template.id,
            &UpdateTemplateMeta {
                default_ttl_ms: Some(3_600_000),
                ..Default::default()
            },
        )
        .await?;
    // Created through both replicas; every build completes at the fixed clock's time, so
    // every deadline is the same instant.
    let via_b = codersdk::Client::new(b.url.clone())
        .with_token(owner.token().unwrap_or_default().to_string());
    let clients = [owner.clone(), via_b];
    let owner = &owner;
    let ids: Vec<Uuid> = futures::stream::iter(0..WORKSPACES)
        .map(|i| {
            let client = clients[i % 2].clone();
            async move {
                let ws = client
                    .create_workspace(
                        "me",
                        &CreateWorkspaceRequest {
                            template_id: Some(template.id),
                            name: format!("ws-{i}"),
                            ..Default::default()
                        },
                    )
                    .await?;
                anyhow::Ok(ws.id)
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let deadline = t0 + chrono::Duration::hours(1);
    eventually(
        Duration::from_secs(120),
        "all workspaces running",
        || async {
            let page = owner.workspaces("owner:me status:running").await?;
            Ok(page.count == WORKSPACES as i64)
        },
    )
    .await?;
    let all = owner.workspaces("owner:me").await?.workspaces;
    assert!(
        all.iter()
            .all(|w| w.latest_build.deadline == Some(deadline))
    );

    let stop = CancellationToken::new();
    let (to_a, from_test_a) = mpsc::channel(1);
    let (to_b, from_test_b) = mpsc::channel(1);
    lifecycle::spawn(
        a.state.clone(),
        Ticks::Driven(from_test_a),
        stop.child_token(),
    );
    lifecycle::spawn(
        b.state.clone(),
        Ticks::Driven(from_test_b),
        stop.child_token(),
    );

    let (before_a, before_b) =
        tick_both(&to_a, &to_b, deadline - chrono::Duration::seconds(1)).await?;
    assert!(before_a.builds.is_empty() && before_b.builds.is_empty());

    let started = Instant::now();
    let (ra, rb) = tick_both(&to_a, &to_b, deadline).await?;
    let elapsed = started.elapsed();
    let mut by_workspace: BTreeMap<Uuid, usize> = BTreeMap::new();
    for report in [&ra, &rb] {
        for (ws, reason) in &report.builds {
            assert_eq!(*reason, BuildReason::Autostop);
            *by_workspace.entry(*ws).or_default() += 1;
        }
    }
    let total = ra.builds.len() + rb.builds.len();
    println!(
        "{WORKSPACES} due: {total} builds (replica A {}, B {}; raced A {}, B {}) in {elapsed:?}",
        ra.builds.len(),
        rb.builds.len(),
        ra.raced,
        rb.raced
    );
    assert_eq!(total, WORKSPACES, "exactly one build per workspace");
    assert_eq!(by_workspace.len(), WORKSPACES, "none twice");
    assert!(by_workspace.keys().all(|id| ids.contains(id)));

    let autostops: i64 =
        sqlx::query_scalar("SELECT count(*) FROM workspace_builds WHERE reason = 'autostop'")
            .fetch_one(a.pool())
            .await?;
    assert_eq!(autostops, WORKSPACES as i64, "the database agrees");
    let per_workspace: i64 = sqlx::query_scalar(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM workspace_builds GROUP BY workspace_id) c",
    )
    .fetch_one(a.pool())
    .await?;
    assert_eq!(per_workspace, 2, "a start and one stop each");

    // A minute later nothing is due any more, whoever looks.
    let (later_a, later_b) =
        tick_both(&to_a, &to_b, deadline + chrono::Duration::minutes(1)).await?;
    assert!(later_a.builds.is_empty() && later_b.builds.is_empty());
    eventually(
        Duration::from_secs(120),
        "all workspaces stopped",
        || async {
            Ok(owner.workspaces("owner:me status:stopped").await?.count == WORKSPACES as i64)
        },
    )
    .await?;
    stop.cancel();
    Ok(())
}
