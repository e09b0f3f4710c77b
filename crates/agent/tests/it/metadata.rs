//! Metadata values, their errors, and their batching.

use crate::harness::{TOKEN, TestAgent, manifest, metadata};
use crate::peer::Peer;
use codersdk::agentsdk::Request;

#[tokio::test]
async fn metadata_values_and_errors_are_reported_in_batches() -> anyhow::Result<()> {
    let mut m = manifest(vec![]);
    m.metadata = vec![
        metadata("load", "echo 0.5 $CODER_WORKSPACE_NAME", 1, 0),
        metadata("broken", "echo partial; exit 3", 1, 0),
        metadata("slow", "echo begun; sleep 10", 1, 1),
    ];
    let peer = Peer::start(TOKEN, m).await?;
    let _agent = TestAgent::connect(&peer.url)?;
    peer.wait_for("all three keys", |p| {
        ["load", "broken", "slow"]
            .iter()
            .all(|k| p.metadata(k).is_some())
    })
    .await?;

    let load = peer
        .metadata("load")
        .ok_or_else(|| anyhow::anyhow!("load"))?;
    assert_eq!((load.value.as_str(), load.error.as_str()), ("0.5 dev", ""));
    let broken = peer
        .metadata("broken")
        .ok_or_else(|| anyhow::anyhow!("broken"))?;
    assert_eq!(
        (broken.value.as_str(), broken.error.as_str()),
        ("partial", "exit status 3")
    );
    let slow = peer
        .metadata("slow")
        .ok_or_else(|| anyhow::anyhow!("slow"))?;
    assert_eq!(
        (slow.value.as_str(), slow.error.as_str()),
        ("begun", "timed out after 1s")
    );

    let batches: Vec<usize> = peer
        .calls()
        .iter()
        .filter_map(|c| match c {
            Request::BatchUpdateMetadata { values } => Some(values.len()),
            _ => None,
        })
        .collect();
    assert!(
        batches.iter().any(|n| *n >= 2),
        "values travel together: {batches:?}"
    );
    Ok(())
}
