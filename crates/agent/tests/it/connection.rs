//! Authentication on every connect, refusals, reconnects, and what was queued meanwhile.

use std::time::Duration;

use agent::TokenSource;
use axum::http::StatusCode;
use codersdk::agentsdk::LifecycleState::*;

use crate::harness::{TOKEN, TestAgent, config, manifest, read, script};
use crate::peer::Peer;

#[tokio::test]
async fn a_refused_agent_keeps_retrying_and_gets_in_once_accepted() -> anyhow::Result<()> {
    let peer = Peer::start("someone-else", manifest(vec![script("true")])).await?;
    peer.refuse_with(
        StatusCode::FORBIDDEN,
        "Agent is not from the latest build of the workspace.",
    );
    let _agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("three refused attempts", |p| p.attempts().1 >= 3)
        .await?;
    assert!(
        peer.lifecycle().is_empty(),
        "nothing reported while refused"
    );

    // The workspace was rebuilt around this agent's token.
    peer.accept_only(&[TOKEN]);
    peer.wait_for("ready", |p| p.lifecycle() == [Starting, Ready])
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_refused_agent_shuts_down_without_waiting_to_report() -> anyhow::Result<()> {
    let peer = Peer::start("someone-else", manifest(vec![])).await?;
    peer.refuse_with(
        StatusCode::FORBIDDEN,
        "Agent is not from the latest build of the workspace.",
    );
    let mut agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("a refused attempt", |p| p.attempts().1 >= 1)
        .await?;
    let started = std::time::Instant::now();
    agent.stop().await?;
    // The final report timeout of the test configuration is 5 s.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    Ok(())
}

#[tokio::test]
async fn reconnects_and_delivers_what_was_queued_while_cut_off() -> anyhow::Result<()> {
    let peer = Peer::start(TOKEN, manifest(vec![])).await?;
    let agent = TestAgent::connect(&peer.url)?;
    let runs = agent.home().join("runs");
    let start = script(&format!(
        "echo run >> {}; sleep 2; echo finished",
        runs.display()
    ));
    let source = start.log_source_id;
    peer.set_manifest(manifest(vec![start]));
    peer.wait_for("starting", |p| p.lifecycle() == [Starting])
        .await?;

    // coderd goes away while the script runs, and refuses the agent for a while after.
    peer.accept_only(&[]);
    peer.disconnect().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(peer.lifecycle(), [Starting], "ready could not be delivered");

    peer.accept_only(&[TOKEN]);
    peer.wait_for("ready after the reconnect", |p| {
        p.lifecycle() == [Starting, Ready]
    })
    .await?;
    peer.wait_for("the script's last line", |p| {
        p.outputs(source).contains(&"finished".to_string())
    })
    .await?;
    assert!(
        peer.manifests_served() >= 2,
        "the manifest is fetched on each connect"
    );
    assert!(
        peer.startups().len() >= 2,
        "startup is announced on each connect"
    );
    assert_eq!(
        read(&runs)?,
        "run\n",
        "start scripts run once per agent, not per connect"
    );
    Ok(())
}

#[tokio::test]
async fn the_token_file_is_read_again_on_every_connect() -> anyhow::Result<()> {
    let peer = Peer::start("first", manifest(vec![])).await?;
    let token_dir = tempfile::tempdir()?;
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "first\n")?;
    let (config, dir) = config(&peer.url, TokenSource::File(token_file.clone()))?;
    let _agent = TestAgent::start(config, dir);
    peer.wait_for("ready", |p| p.lifecycle() == [Starting, Ready])
        .await?;

    std::fs::write(&token_file, "second")?;
    peer.accept_only(&["second"]);
    let connections = peer.attempts().0;
    peer.disconnect().await;
    peer.wait_for("a manifest fetched with the new token", |p| {
        p.attempts().0 > connections && p.manifests_served() >= 2
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_missing_token_file_fails_at_start() -> anyhow::Result<()> {
    let peer = Peer::start(TOKEN, manifest(vec![])).await?;
    let (config, _dir) = config(&peer.url, TokenSource::File("/nonexistent/token".into()))?;
    let error = agent::run(config, tokio_util::sync::CancellationToken::new())
        .await
        .err()
        .ok_or_else(|| anyhow::anyhow!("must fail"))?;
    assert!(error.to_string().contains("/nonexistent/token"), "{error}");
    Ok(())
}

#[tokio::test]
async fn shutdown_without_coderd_still_returns() -> anyhow::Result<()> {
    let unused = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = url::Url::parse(&format!("http://{}/", unused.local_addr()?))?;
    drop(unused);
    let mut agent = TestAgent::connect(&url)?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    agent.stop().await?;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    Ok(())
}

#[tokio::test]
async fn the_log_limit_stops_log_sending_but_not_the_files() -> anyhow::Result<()> {
    let start = script("echo first; sleep 1; echo second");
    let source = start.log_source_id;
    let peer = Peer::start(TOKEN, manifest(vec![start])).await?;
    peer.set_logs_full(true);
    let agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("ready", |p| p.lifecycle() == [Starting, Ready])
        .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.outputs(source), ["first"]);
    let file = read(&agent.log_dir().join(format!("coder-script-{source}.log")))?;
    assert_eq!(file, "first\nsecond\n");
    Ok(())
}
