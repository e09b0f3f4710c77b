//! Dev containers as Coder shows them, through the real binaries: a template's
//! `coder_devcontainer` (with an app and an environment variable attached to its
//! `subagent_id`) goes through the real terraform and our provider, and the build records a
//! sub-agent under the agent that would run the container. The API shows it with `parent_id`
//! and the containers listing links to it; `coder create --wait` and `coder ssh` do not wait
//! for it (no container engine here ever starts it), the workspace stays healthy, and naming
//! it fails at once with the reason. Another member is told none of it exists.

use anyhow::Context as _;
use codersdk::workspaces::{WorkspaceAgent, WorkspaceAgentListContainersResponse};
use reqwest::Method;

use crate::harness::Deployment;
use crate::terraform::{Reaper, push_local_process_with, terraform};

/// Appended to the `local-process` example.
const DEVCONTAINER: &str = r#"
resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/workspace/repo"
}

resource "coder_app" "in_repo" {
  agent_id     = coder_devcontainer.repo.subagent_id
  slug         = "in-repo"
  display_name = "In the container"
  url          = "http://localhost:8080"
}

resource "coder_env" "in_repo" {
  agent_id = coder_devcontainer.repo.subagent_id
  name     = "IN_CONTAINER"
  value    = "yes"
}
"#;

async fn member(d: &Deployment, name: &str) -> anyhow::Result<String> {
    d.member_token(name).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dev_container_is_a_sub_agent_of_its_agent_and_nothing_waits_for_it() -> anyhow::Result<()>
{
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces = d.dir.path().join("workspaces");
    push_local_process_with(&d, "dc", &workspaces, DEVCONTAINER)?;

    // Ends once the agent that runs is ready; the container's agent is named, not awaited.
    let created = d.ok(&["create", "dev", "-t", "dc", "--wait", "--yes"])?;
    let ws = d.workspace("dev").await?;
    let _reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );
    assert!(created.contains("✔ Agent main is ready"), "{created}");
    assert!(
        created.contains("Not waiting for dev container agent repo"),
        "{created}"
    );

    let agents: Vec<&WorkspaceAgent> = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .collect();
    let [parent, sub] = agents.as_slice() else {
        anyhow::bail!("an agent and a sub-agent: {agents:#?}");
    };
    assert_eq!(parent.name, "main");
    assert_eq!(parent.parent_id, None);
    assert_eq!(sub.parent_id, Some(parent.id), "{sub:#?}");
    assert_eq!(sub.resource_id, parent.resource_id);
    assert_eq!(sub.name, "repo");
    assert_eq!(sub.directory, "/workspace/repo");
    assert_eq!(
        (&sub.operating_system, &sub.architecture),
        (&parent.operating_system, &parent.architecture)
    );
    // What the template attached to the container's sub-agent is the sub-agent's.
    assert_eq!(
        sub.apps.iter().map(|a| a.slug.as_str()).collect::<Vec<_>>(),
        ["in-repo"]
    );
    assert!(parent.apps.iter().all(|a| a.slug != "in-repo"));
    assert_eq!(
        sub.environment_variables
            .get("IN_CONTAINER")
            .map(String::as_str),
        Some("yes")
    );
    assert!(!parent.environment_variables.contains_key("IN_CONTAINER"));
    // It never connects, and says why; the workspace's health leaves it out.
    assert_eq!(sub.lifecycle_state, "created");
    assert!(!sub.health.healthy);
    assert!(
        sub.health.reason.contains("container engine"),
        "{:?}",
        sub.health
    );
    let ws = d.workspace("dev").await?;
    assert!(ws.health.healthy, "{:?}", ws.health);
    let shown = d.ok(&["show", "dev"])?;
    assert!(
        shown.contains(
            "dev container agent repo (in main): the dev container's sub-agent cannot start"
        ),
        "{shown}"
    );
    assert!(shown.contains("app in-repo (In the container)"), "{shown}");

    // The containers listing links the container to its sub-agent.
    let listed: WorkspaceAgentListContainersResponse = d
        .owner
        .request(
            Method::GET,
            &format!("/api/v2/workspaceagents/{}/containers", parent.id),
        )?
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let [container] = listed.devcontainers.as_slice() else {
        anyhow::bail!("one dev container: {listed:?}");
    };
    let linked = container.agent.as_ref().context("the container's agent")?;
    assert_eq!(
        (linked.id, linked.name.as_str(), linked.directory.as_str()),
        (sub.id, "repo", "/workspace/repo")
    );
    assert_eq!(container.status, "error");

    // `coder ssh` reaches the agent that runs; naming the container's agent fails at once.
    let said = d.ok(&["ssh", "dev", "--", "echo", "from-main"])?;
    assert!(said.contains("from-main"), "{said}");
    let refused = d.run(&["ssh", "dev.repo", "--", "true"])?;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("is a dev container's agent and cannot be reached: ")
            && stderr.contains("container engine"),
        "{stderr}"
    );

    // Another member: neither agent exists.
    let stranger = d.owner.clone().with_token(&member(&d, "stranger").await?);
    for path in [
        format!("/api/v2/workspaceagents/{}", sub.id),
        format!("/api/v2/workspaceagents/{}/containers", parent.id),
        format!("/api/v2/workspaceagents/{}/containers", sub.id),
    ] {
        let status = stranger.request(Method::GET, &path)?.send().await?.status();
        assert_eq!(status, 404, "{path}");
    }

    d.ok(&["delete", "dev", "--yes"])?;
    Ok(())
}
