//! Metadata values, their errors, and their batching.

use codersdk::agentsdk::Request;
use codersdk::proto::AgentMetadata;
use testutil::eventually;
use uuid::Uuid;

use crate::coderd::{PATIENCE, agent, deployment};
use crate::harness::{TOKEN, TestAgent, manifest, metadata};
use crate::peer::Peer;

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

#[tokio::test(flavor = "multi_thread")]
async fn a_metadata_timeout_shows_in_coderds_value_until_a_run_succeeds() -> anyhow::Result<()> {
    let d = deployment().await?;
    let token = Uuid::new_v4().to_string();
    let switch = tempfile::tempdir()?;
    let fast = switch.path().join("fast");
    let mut spec = agent(&token, vec![]);
    spec.metadata = vec![AgentMetadata {
        key: "slow".into(),
        display_name: "Slow".into(),
        script: format!(
            "if [ -e '{}' ]; then echo quick; else echo begun; sleep 10; fi",
            fast.display()
        ),
        interval: 1,
        timeout: 1,
        order: 0,
    }];
    let (_, id) = d.workspace("dev", spec).await?;
    let _agent = TestAgent::connect_with(&d.app.url, &token)?;
    let value = |wanted: (&'static str, &'static str)| {
        let owner = d.owner.clone();
        move || {
            let owner = owner.clone();
            async move {
                let values = owner.workspace_agent_metadata(id).await?;
                Ok(values.iter().any(|m| {
                    m.description.key == "slow"
                        && (m.result.value.as_str(), m.result.error.as_str()) == wanted
                }))
            }
        }
    };

    // What the script printed before it was stopped, with the reason.
    eventually(
        PATIENCE,
        "the timed-out value",
        value(("begun", "timed out after 1s")),
    )
    .await?;
    // A later run that finishes replaces both.
    std::fs::write(&fast, "")?;
    eventually(PATIENCE, "the next good value", value(("quick", ""))).await?;
    Ok(())
}
