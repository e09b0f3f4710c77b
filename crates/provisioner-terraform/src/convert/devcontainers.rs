//! `coder_devcontainer`: a dev container its agent starts, with a sub-agent inside. The
//! container belongs to the agent its `agent_id` names; the apps, environment variables and
//! scripts whose `agent_id` is the container's `subagent_id` belong to the container.
//!
//! At plan time both ids are unknown; then, as for an agent's children, a direct graph edge
//! decides (the container's node to the agent's, a child's node to the container's).

use codersdk::proto::Devcontainer;

use super::ConvertError;
use super::agents::PlacedAgent;
use super::apps::{decode_app, decode_env, decode_script};
use super::attrs::Attrs;
use super::graph::Graph;
use super::show::{Mode, TfResource};

/// A container with where it sits in the graph, to find its children.
struct Placed {
    label: String,
    container: Devcontainer,
}

/// Gives every agent the dev containers that name it, each with its children.
pub(crate) fn attach(
    resources: &[TfResource],
    graph: &Graph,
    agents: &mut [PlacedAgent],
) -> Result<(), ConvertError> {
    for resource in resources
        .iter()
        .filter(|r| r.mode == Mode::Managed && r.kind == "coder_devcontainer")
    {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let agent_id = attrs.string("agent_id")?;
        let mut placed = Placed {
            label: resource.label.clone(),
            container: Devcontainer {
                id: attrs.string("id")?,
                name: resource.name.clone(),
                workspace_folder: attrs.string("workspace_folder")?,
                config_path: attrs.string("config_path")?,
                subagent_id: attrs.string("subagent_id")?,
                ..Devcontainer::default()
            },
        };
        add_children(resources, graph, &mut placed)?;
        for agent in agents.iter_mut() {
            let belongs = if agent.agent.id.is_empty() && agent_id.is_empty() {
                graph.depends_on(&resource.label, &agent.label)
            } else {
                agent.agent.id == agent_id
            };
            if belongs {
                agent.agent.devcontainers.push(placed.container.clone());
            }
        }
    }
    Ok(())
}

fn add_children(
    resources: &[TfResource],
    graph: &Graph,
    placed: &mut Placed,
) -> Result<(), ConvertError> {
    let children = resources.iter().filter(|r| {
        r.mode == Mode::Managed
            && matches!(r.kind.as_str(), "coder_app" | "coder_env" | "coder_script")
    });
    for resource in children {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let agent_id = attrs.string("agent_id")?;
        let subagent = &placed.container.subagent_id;
        let belongs = if subagent.is_empty() && agent_id.is_empty() {
            graph.depends_on(&resource.label, &placed.label)
        } else {
            *subagent == agent_id
        };
        if !belongs {
            continue;
        }
        let container = &mut placed.container;
        match resource.kind.as_str() {
            "coder_app" => container.apps.push(decode_app(resource, &attrs)?),
            "coder_env" => container.envs.push(decode_env(resource, &attrs)?),
            _ => container.scripts.push(decode_script(resource, &attrs)?),
        }
    }
    Ok(())
}
