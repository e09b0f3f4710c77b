//! The replica registry, with real coderds on one database: each replica's row and beat, the
//! peers' probes, `GET /api/v2/replicas` in Coder's shape for owners only, a replica that stops
//! leaving the list, and the refusals at join (no relay URL beside a live peer, another
//! version).

use std::time::Duration;

use codersdk::deployment::Replica;
use reqwest::StatusCode;
use testutil::{TestApp, eventually};

async fn replicas(client: &codersdk::Client) -> anyhow::Result<Vec<Replica>> {
    Ok(client.get("/api/v2/replicas").await?)
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_register_beat_probe_each_other_and_leave() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let b = app.replica(|_| {}).await?;

    eventually(
        Duration::from_secs(10),
        "two replicas that reach each other",
        || async {
            let listed = replicas(&owner).await?;
            Ok(listed.len() == 2
                && listed
                    .iter()
                    .all(|r| r.error.is_empty() && r.database_latency > 0))
        },
    )
    .await?;
    let listed = replicas(&owner).await?;
    let ids: Vec<_> = listed.iter().map(|r| r.id).collect();
    assert!(ids.contains(&app.state.replica.id) && ids.contains(&b.state.replica.id));
    let relay_of_b = listed
        .iter()
        .find(|r| r.id == b.state.replica.id)
        .map(|r| r.relay_address.clone())
        .unwrap_or_default();
    assert_eq!(relay_of_b, b.url.as_str());
    assert!(
        listed
            .iter()
            .all(|r| !r.hostname.is_empty() && r.region_id == 0)
    );

    // Owners only: everyone else is told there is no such thing.
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (auditor, _) = app.user(&owner, "auditor", &["auditor"]).await?;
    for client in [&member, &auditor] {
        let response = client
            .request(reqwest::Method::GET, "/api/v2/replicas")?
            .send()
            .await?;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }

    // A peer whose relay URL does not answer shows up in the others' `error`.
    let deaf = app
        .replica(|o| {
            o.deployment.relay_url = Some(url::Url::parse("http://127.0.0.1:9/").expect("url"));
        })
        .await?;
    eventually(
        Duration::from_secs(10),
        "the unreachable peer reported",
        || async {
            let listed = replicas(&owner).await?;
            Ok(listed
                .iter()
                .find(|r| r.id == app.state.replica.id)
                .is_some_and(|r| {
                    r.error.contains("127.0.0.1:9") && r.error.contains("unreachable")
                }))
        },
    )
    .await?;
    drop(deaf);

    // A replica that stops leaves the list at once (it records its stop).
    drop(b);
    eventually(
        Duration::from_secs(10),
        "the stopped replicas gone",
        || async { Ok(replicas(&owner).await?.len() == 1) },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_without_a_relay_url_or_of_another_version_is_refused() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let refused = app.replica(|o| o.deployment.relay_url = None).await;
    let error = refused.err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(error.contains("CODER_DERP_SERVER_RELAY_URL"), "{error}");

    sqlx::query(
        "INSERT INTO replicas (id, hostname, relay_address, version)
         VALUES (gen_random_uuid(), 'old-host', 'http://10.0.0.9:3000', 'v2.0.0+old')",
    )
    .execute(app.pool())
    .await?;
    let refused = app.replica(|_| {}).await;
    let error = refused.err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(
        error.contains("old-host") && error.contains("v2.0.0+old"),
        "{error}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_reconnects_to_another_replica_moves_there() -> anyhow::Result<()> {
    use codersdk::agentsdk::AgentConnection;

    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let b = app.replica(|_| {}).await?;
    let token = uuid::Uuid::new_v4().to_string();
    let ws = crate::agents::workspace_for(&app, &owner, "me", "dev", &token).await?;
    let id = crate::agents::agent_id(&ws);
    let holder = || async { Ok::<_, anyhow::Error>(app.state.store.agent_holder(id).await?) };

    let first = AgentConnection::connect(&app.url, &token).await?;
    eventually(
        Duration::from_secs(5),
        "held by the first replica",
        || async { Ok(holder().await? == (Some(app.state.replica.id), 1)) },
    )
    .await?;

    // The agent comes back through the other replica (its link to the first one blipped):
    // the newer epoch wins, and the first replica closes its copy without marking the agent
    // disconnected.
    let second = AgentConnection::connect(&b.url, &token).await?;
    eventually(
        Duration::from_secs(5),
        "held by the second replica",
        || async { Ok(holder().await? == (Some(b.state.replica.id), 2)) },
    )
    .await?;
    tokio::time::timeout(Duration::from_secs(5), first.closed()).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(owner.workspace_agent(id).await?.status, "connected");

    drop(second);
    eventually(
        Duration::from_secs(10),
        "disconnected once its holder lost it",
        || async { Ok(owner.workspace_agent(id).await?.status == "disconnected") },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_cut_off_from_the_database_fences_itself_and_its_agents_move()
-> anyhow::Result<()> {
    use codersdk::agentsdk::AgentConnection;

    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let b = app.replica(|_| {}).await?;
    let token = uuid::Uuid::new_v4().to_string();
    let ws = crate::agents::workspace_for(&app, &owner, "me", "dev", &token).await?;
    let id = crate::agents::agent_id(&ws);
    let held = AgentConnection::connect(&b.url, &token).await?;
    let health = |url: &url::Url| {
        let url = url.join("/healthz").expect("url");
        async move { Ok::<_, anyhow::Error>(reqwest::get(url).await?.status()) }
    };
    assert_eq!(health(&b.url).await?, StatusCode::OK);

    // B loses the database (its connections closed for good): it fences itself within the
    // fence delay, before its peers would count it dead.
    let cut = std::time::Instant::now();
    // Closing waits for connections in use (the pubsub listener's) to come back; new
    // acquisitions fail at once.
    let pool = b.state.store.pool().clone();
    tokio::spawn(async move { pool.close().await });
    tokio::time::timeout(Duration::from_secs(8), held.closed()).await?;
    let fenced_after = cut.elapsed();
    assert_eq!(health(&b.url).await?, StatusCode::SERVICE_UNAVAILABLE);
    assert!(AgentConnection::connect(&b.url, &token).await.is_err());
    assert!(
        fenced_after < Duration::from_secs(6),
        "fenced after {fenced_after:?}"
    );

    // The agent comes back through A, which takes it over.
    let _moved = AgentConnection::connect(&app.url, &token).await?;
    eventually(Duration::from_secs(5), "held by A", || async {
        Ok(app.state.store.agent_holder(id).await?.0 == Some(app.state.replica.id))
    })
    .await?;
    assert_eq!(health(&app.url).await?, StatusCode::OK);
    Ok(())
}
