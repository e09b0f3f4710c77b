//! The read routes whose session lookup hands its pooled connection to the handler's first
//! read (`store::request_scope`): many at once, from different callers, with bad tokens and
//! with reads that come before the page (`owner:<name>`), each answers what its own caller may
//! see, and a pool no larger than the requests in flight serves them all.

use codersdk::workspaces::CreateWorkspaceRequest;
use codersdk::{Client, ClientError};
use provisionerd::engines::echo::EchoTemplate;
use testutil::{TestApp, wait_build};
use uuid::Uuid;

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

/// One caller's read and what it must answer.
async fn check(
    who: &str,
    client: Client,
    i: usize,
    workspaces: Vec<Uuid>,
    template: Uuid,
) -> anyhow::Result<()> {
    let own = workspaces.len() as i64;
    let id = workspaces[i % workspaces.len()];
    match (who, i % 4) {
        ("owner", 0) => anyhow::ensure!(client.workspace(id).await?.id == id),
        ("owner", 1) => anyhow::ensure!(client.workspaces("owner:me").await?.count == own),
        ("owner", 2) => anyhow::ensure!(client.workspaces("owner:owner").await?.count == own),
        ("owner", _) => anyhow::ensure!(client.template(template).await?.id == template),
        ("other", 0) => {
            let e = client.workspace(id).await.expect_err("not theirs");
            anyhow::ensure!(status(&e) == 404, "{e}");
        }
        ("other", 1) => anyhow::ensure!(client.workspaces("owner:me").await?.count == 0),
        ("other", 2) => anyhow::ensure!(client.workspaces("owner:owner").await?.count == 0),
        ("other", _) => anyhow::ensure!(client.template(template).await?.id == template),
        (_, 0) => {
            let e = client.workspace(id).await.expect_err("bad token");
            anyhow::ensure!(status(&e) == 401, "{e}");
        }
        (_, _) => {
            let e = client.workspaces("owner:me").await.expect_err("bad token");
            anyhow::ensure!(status(&e) == 401, "{e}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_reads_answer_their_own_callers() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (other, _) = app.user(&owner, "other", &[]).await?;
    let template = app
        .echo_template(&owner, "t", &EchoTemplate::default(), &[])
        .await?;
    let mut workspaces = Vec::new();
    for name in ["a", "b", "c"] {
        let ws = owner
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(template.id),
                    name: name.into(),
                    ..Default::default()
                },
            )
            .await?;
        wait_build(&owner, ws.latest_build.id).await?;
        workspaces.push(ws.id);
    }
    let bad = app.client().with_token("0123456789-abcdefghijklmnopqrstuv");
    // More at once than coderd's pool has connections: a request holding one connection while
    // waiting for another would stall here until the pool's acquire timeout.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..240 {
        let (who, client) = match i % 3 {
            0 => ("owner", owner.clone()),
            1 => ("other", other.clone()),
            _ => ("bad", bad.clone()),
        };
        tasks.spawn(check(who, client, i / 3, workspaces.clone(), template.id));
    }
    let all = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        anyhow::Ok(())
    });
    all.await??;
    Ok(())
}
