//! Dev containers over HTTP: an agent's `coder_devcontainer` shows under its containers in
//! Coder's shape, in error with the reason (no container engine here), linked to the
//! sub-agent the build recorded for it; asking to recreate it is refused with that reason,
//! never accepted silently. Who may not connect to the workspace gets 404.

use codersdk::proto::Devcontainer;
use reqwest::Method;
use serde_json::Value;
use testutil::TestApp;
use uuid::Uuid;

use crate::agents::{agent_id, agent_template};

#[tokio::test(flavor = "multi_thread")]
async fn a_dev_container_shows_in_error_and_recreating_it_fails_clearly() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    let mut template = agent_template(&Uuid::new_v4().to_string());
    if let Some(agent) = template
        .start
        .as_mut()
        .and_then(|s| s.resources.first_mut())
        .and_then(|r| r.agents.first_mut())
    {
        agent.devcontainers = vec![Devcontainer {
            name: "repo".into(),
            workspace_folder: "/repo".into(),
            subagent_id: SUBAGENT.into(),
            ..Default::default()
        }];
    }
    let template = app.echo_template(&owner, "dc", &template, &[]).await?;
    let ws = testutil::running_workspace(&alice, template.id, "dev").await?;
    let agent = agent_id(&ws);
    // The provider's `subagent_id` is the sub-agent's id: the version's import recorded it
    // first; the workspace's build, whose state has the same id, gets a sub-agent of its own.
    let imported = alice
        .template_version_resources(template.active_version_id)
        .await?;
    let [parent, imported_sub] = imported[0].agents.as_slice() else {
        panic!("an agent and a sub-agent: {imported:#?}");
    };
    assert_eq!(imported_sub.id.to_string(), SUBAGENT);
    assert_eq!(imported_sub.parent_id, Some(parent.id));
    let sub = &ws.latest_build.resources[0].agents[1];
    assert_ne!(sub.id.to_string(), SUBAGENT);
    assert_eq!(sub.parent_id, Some(agent));
    assert_eq!(sub.name, "repo");
    // Nothing ever connects as it, so the workspace's health leaves it out.
    assert!(
        !ws.health.failing_agents.contains(&sub.id),
        "{:?}",
        ws.health
    );

    let listed: Value = alice
        .request(
            Method::GET,
            &format!("/api/v2/workspaceagents/{agent}/containers"),
        )?
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let container = &listed["devcontainers"][0];
    assert_eq!(container["name"], "repo", "{listed}");
    assert_eq!(container["workspace_folder"], "/repo");
    assert_eq!(container["status"], "error");
    assert!(
        container["error"]
            .as_str()
            .is_some_and(|e| e.contains("container engine")),
        "{listed}"
    );
    assert_eq!(container["agent"]["id"], sub.id.to_string(), "{listed}");
    assert_eq!(container["agent"]["name"], "repo");
    assert_eq!(container["agent"]["directory"], "/repo");
    let id = container["id"].as_str().unwrap_or_default().to_owned();

    let recreate = |client: &codersdk::Client, devcontainer: &str| {
        let path = format!(
            "/api/v2/workspaceagents/{agent}/containers/devcontainers/{devcontainer}/recreate"
        );
        let request = client.request(Method::POST, &path);
        async move { anyhow::Ok(request?.send().await?) }
    };
    let refused = recreate(&alice, &id).await?;
    assert_eq!(refused.status(), 501);
    let body: Value = refused.json().await?;
    assert_eq!(body["message"], "Cannot recreate the dev container.");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("container engine")),
        "{body}"
    );
    // The deployment's owner may connect to any workspace: the same answer.
    assert_eq!(recreate(&owner, &id).await?.status(), 501);
    // An unknown dev container, and a caller who may not connect: 404.
    let unknown = Uuid::new_v4().to_string();
    assert_eq!(recreate(&alice, &unknown).await?.status(), 404);
    assert_eq!(recreate(&bob, &id).await?.status(), 404);
    let sub_path = format!("/api/v2/workspaceagents/{}", sub.id);
    assert_eq!(
        bob.request(Method::GET, &sub_path)?.send().await?.status(),
        404
    );
    Ok(())
}

/// The sub-agent id the template's provider gave the container.
const SUBAGENT: &str = "5c1f4bb0-2f55-4c43-9e37-0d2e1b0c6a11";
