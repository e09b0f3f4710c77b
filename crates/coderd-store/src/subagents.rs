//! Dev containers and their sub-agents, as Coder records them at build time: each
//! `coder_devcontainer` of an agent gets an agent row of its own under that agent (same
//! resource, `parent_id` set) carrying the apps, scripts and environment variables the
//! template attached to the container's `subagent_id`; the devcontainer row points at it.
//!
//! The sub-agent takes the name of the container, its folder as directory, and from its
//! parent what the container shares with the machine it runs on: OS, architecture, display
//! apps, connection timeout and troubleshooting URL. It gets no token: in Coder the parent
//! agent hands the sub-agent its credentials when it starts the container, and no container
//! ever starts here (no container engine), so nothing could use one. Its rows are made with
//! the rest of the job's ([`super::resource_rows`]).

use codersdk::proto::{self, AgentAuth};

/// The agent a container's sub-agent is recorded as.
pub(super) fn subagent_of(parent: &proto::Agent, container: &proto::Devcontainer) -> proto::Agent {
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
