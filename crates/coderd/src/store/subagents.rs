//! Dev containers and their sub-agents, as Coder records them at build time: each
//! `coder_devcontainer` of an agent gets an agent row of its own under that agent (same
//! resource, `parent_id` set) carrying the apps, scripts and environment variables the
//! template attached to the container's `subagent_id`; the devcontainer row points at it.
//!
//! The sub-agent takes the name of the container, its folder as directory, and from its
//! parent what the container shares with the machine it runs on: OS, architecture, display
//! apps, connection timeout and troubleshooting URL. It gets no token: in Coder the parent
//! agent hands the sub-agent its credentials when it starts the container, and no container
//! ever starts here (no container engine), so nothing could use one.

use chrono::{DateTime, Utc};
use codersdk::proto::{self, AgentAuth};
use uuid::Uuid;

use super::Result;
use super::resources::{insert_agent, insert_log_source};

/// The agent a container's sub-agent is recorded as.
fn subagent_of(parent: &proto::Agent, container: &proto::Devcontainer) -> proto::Agent {
    proto::Agent {
        id: container.subagent_id.clone(),
        name: container.name.clone(),
        operating_system: parent.operating_system.clone(),
        architecture: parent.architecture.clone(),
        directory: container.workspace_folder.clone(),
        apps: container.apps.clone(),
        auth: AgentAuth::Token(String::new()),
        connection_timeout_seconds: parent.connection_timeout_seconds,
        troubleshooting_url: parent.troubleshooting_url.clone(),
        display_apps: parent.display_apps.clone(),
        scripts: container.scripts.clone(),
        extra_envs: container.envs.clone(),
        order: parent.order,
        api_key_scope: parent.api_key_scope.clone(),
        ..proto::Agent::default()
    }
}

/// The sub-agent's id: the provider's `subagent_id` (so the API shows the id the template
/// sees), unless it is not a UUID or an earlier build's row already holds it (a stop build
/// keeps the container's state, and every build's rows are its own).
async fn subagent_id(tx: &mut sqlx::PgConnection, container: &proto::Devcontainer) -> Result<Uuid> {
    let Ok(wanted) = container.subagent_id.parse::<Uuid>() else {
        return Ok(Uuid::new_v4());
    };
    let taken = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM workspace_agents WHERE id = $1) AS "taken!""#,
        wanted
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(if taken { Uuid::new_v4() } else { wanted })
}

/// Stores one of `parent`'s dev containers with its sub-agent, inside the caller's transaction.
pub(super) async fn insert_devcontainer(
    tx: &mut sqlx::PgConnection,
    resource_id: Uuid,
    parent: &proto::Agent,
    parent_id: Uuid,
    container: &proto::Devcontainer,
    now: DateTime<Utc>,
) -> Result<()> {
    let id = subagent_id(tx, container).await?;
    let subagent = insert_agent(
        tx,
        resource_id,
        &subagent_of(parent, container),
        Some((parent_id, id)),
        now,
    )
    .await?;
    // The parent reports on the container (starting it, or why it cannot) under a log source
    // of its own.
    let name = format!("Dev container {}", container.name);
    let log_source = insert_log_source(tx, parent_id, &name, "", now).await?;
    sqlx::query!(
        r#"INSERT INTO workspace_agent_devcontainers (id, agent_id, log_source_id, name,
               workspace_folder, config_path, created_at, subagent_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"#,
        Uuid::new_v4(),
        parent_id,
        log_source,
        container.name,
        container.workspace_folder,
        container.config_path,
        now,
        subagent
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subagent_takes_the_container_and_what_it_shares_with_its_parent() {
        let parent = proto::Agent {
            name: "main".into(),
            operating_system: "linux".into(),
            architecture: "arm64".into(),
            directory: "/home/coder".into(),
            connection_timeout_seconds: 90,
            troubleshooting_url: "https://help".into(),
            auth: AgentAuth::Token("secret".into()),
            env: [("PARENT_ONLY".to_string(), "1".to_string())].into(),
            ..proto::Agent::default()
        };
        let container = proto::Devcontainer {
            name: "repo".into(),
            workspace_folder: "/workspace/repo".into(),
            subagent_id: "f0b6f1b2-64f5-4d50-9d3c-0c3e0b1d1b8e".into(),
            envs: vec![proto::Env {
                name: "IN_CONTAINER".into(),
                value: "yes".into(),
                ..proto::Env::default()
            }],
            ..proto::Devcontainer::default()
        };
        let sub = subagent_of(&parent, &container);
        assert_eq!(sub.name, "repo");
        assert_eq!(sub.directory, "/workspace/repo");
        assert_eq!(
            (sub.operating_system.as_str(), sub.architecture.as_str()),
            ("linux", "arm64")
        );
        assert_eq!(sub.connection_timeout_seconds, 90);
        assert_eq!(sub.troubleshooting_url, "https://help");
        // Never the parent's secret, nor its own environment.
        assert_eq!(sub.auth, AgentAuth::Token(String::new()));
        assert!(sub.env.is_empty());
        assert_eq!(sub.extra_envs.len(), 1);
    }
}
