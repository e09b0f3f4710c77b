//! `coder_agent` resources: validating their names, reading their attributes, and finding the
//! resource each one runs in.

use std::collections::HashSet;

use codersdk::proto::{
    Agent, AgentAuth, AgentMetadata, DisplayApps, MemoryResourceMonitor, ResourcesMonitoring,
    Script, VolumeResourceMonitor,
};

use super::ConvertError;
use super::attrs::Attrs;
use super::graph::{Direction, Graph};
use super::show::{Mode, TfResource};

/// An agent together with where it sits in the graph.
#[derive(Debug, Clone)]
pub(crate) struct PlacedAgent {
    /// The agent's own graph label (`coder_agent.main`).
    pub label: String,
    /// Label of the resource the agent runs in.
    pub host: String,
    pub agent: Agent,
}

/// Icons and log files of the scripts made from the agent's legacy script attributes; the emoji
/// are ▶️ and ◀️.
const STARTUP_SCRIPT_ICON: &str = "/emojis/25b6-fe0f.png";
const STARTUP_SCRIPT_LOG: &str = "coder-startup-script.log";
const SHUTDOWN_SCRIPT_ICON: &str = "/emojis/25c0.png";
const SHUTDOWN_SCRIPT_LOG: &str = "coder-shutdown-script.log";

/// Labels of the resources an agent or a metadata resource can attach to: managed resources
/// that are not Coder's own, and `coder_external_agent`, which stands for a machine outside
/// the template.
pub(crate) fn host_labels(resources: &[TfResource]) -> HashSet<&str> {
    resources
        .iter()
        .filter(|r| {
            r.mode == Mode::Managed
                && (!r.kind.starts_with("coder_") || r.kind == "coder_external_agent")
        })
        .map(|r| r.label.as_str())
        .collect()
}

/// Every agent that runs inside some resource, in document order. Agents nothing depends on are
/// dropped: there is no machine for them to run on.
pub(crate) fn place(
    resources: &[TfResource],
    hosts: &HashSet<&str>,
    graph: &Graph,
) -> Result<Vec<PlacedAgent>, ConvertError> {
    let mut names = HashSet::new();
    let mut placed = Vec::new();
    for resource in resources.iter().filter(|r| r.kind == "coder_agent") {
        validate_name(&resource.name)?;
        // Names must be unique ignoring case: they become DNS names and app URL parts.
        if !names.insert(resource.name.to_lowercase()) {
            return Err(ConvertError::DuplicateAgentName {
                name: resource.name.clone(),
            });
        }
        let agent = decode(resource)?;
        let starts = graph.nodes_labelled(&resource.label);
        if starts.is_empty() {
            return Err(ConvertError::AgentNotInGraph {
                label: resource.label.clone(),
            });
        }
        let host = graph.nearest(starts, Direction::Dependents, |label| hosts.contains(label));
        if let Some(host) = host {
            placed.push(PlacedAgent {
                label: resource.label.clone(),
                host: host.to_owned(),
                agent,
            });
        }
    }
    Ok(placed)
}

pub(crate) const AGENT_NAME_PATTERN: &str = "(?i)^[a-z0-9](-?[a-z0-9])*$";

fn validate_name(name: &str) -> Result<(), ConvertError> {
    if name.is_empty() {
        return Err(ConvertError::EmptyAgentName);
    }
    if is_dns_label(&name.to_ascii_lowercase()) {
        return Ok(());
    }
    // Underscores were allowed until 2025; say so rather than only quoting the pattern.
    if name.contains('_') {
        return Err(ConvertError::AgentNameUnderscore {
            name: name.to_owned(),
        });
    }
    Err(ConvertError::InvalidAgentName {
        name: name.to_owned(),
    })
}

/// `^[a-z0-9](-?[a-z0-9])*$`: lowercase letters and digits in groups joined by single hyphens.
pub(crate) fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.split('-').all(|group| {
            !group.is_empty()
                && group
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

fn decode(resource: &TfResource) -> Result<Agent, ConvertError> {
    let attrs = Attrs::new(&resource.address, &resource.values);

    let mut scripts = Vec::new();
    let startup_script = attrs.string("startup_script")?;
    if !startup_script.is_empty() {
        scripts.push(Script {
            display_name: "Startup Script".to_owned(),
            icon: STARTUP_SCRIPT_ICON.to_owned(),
            script: startup_script,
            start_blocks_login: startup_blocks_login(&attrs)?,
            run_on_start: true,
            log_path: STARTUP_SCRIPT_LOG.to_owned(),
            ..Script::default()
        });
    }
    let shutdown_script = attrs.string("shutdown_script")?;
    if !shutdown_script.is_empty() {
        scripts.push(Script {
            display_name: "Shutdown Script".to_owned(),
            icon: SHUTDOWN_SCRIPT_ICON.to_owned(),
            script: shutdown_script,
            run_on_stop: true,
            log_path: SHUTDOWN_SCRIPT_LOG.to_owned(),
            ..Script::default()
        });
    }

    let metadata = attrs.map_blocks("metadata", |item| {
        Ok(AgentMetadata {
            key: item.string("key")?,
            display_name: item.string("display_name")?,
            script: item.string("script")?,
            interval: item.int("interval")?,
            timeout: item.int("timeout")?,
            order: item.int("order")?,
        })
    })?;

    // Without a display_apps block (or before it is known) the agent gets the default set.
    let display_apps = match attrs.blocks("display_apps")?.first() {
        None => DisplayApps::default(),
        Some(block) => DisplayApps {
            vscode: block.bool("vscode")?,
            vscode_insiders: block.bool("vscode_insiders")?,
            web_terminal: block.bool("web_terminal")?,
            ssh_helper: block.bool("ssh_helper")?,
            port_forwarding_helper: block.bool("port_forwarding_helper")?,
        },
    };

    let auth = match attrs.string("auth")?.as_str() {
        // "token" is the provider's default.
        "" | "token" => AgentAuth::Token(attrs.string("token")?),
        // Every other value names a cloud instance identity; the id comes later from
        // coder_agent_instance or the hosting VM.
        _ => AgentAuth::InstanceId(String::new()),
    };

    Ok(Agent {
        id: attrs.string("id")?,
        name: resource.name.clone(),
        env: attrs.string_map("env")?,
        operating_system: attrs.string("os")?,
        architecture: attrs.string("arch")?,
        directory: attrs.string("dir")?,
        apps: Vec::new(),
        auth,
        connection_timeout_seconds: attrs.int("connection_timeout")?,
        troubleshooting_url: attrs.string("troubleshooting_url")?,
        motd_file: attrs.string("motd_file")?,
        metadata,
        display_apps,
        scripts,
        extra_envs: Vec::new(),
        order: attrs.int("order")?,
        resources_monitoring: resources_monitoring(&attrs)?,
        // Passed on as written: coderd decides what an empty scope (older providers) means.
        api_key_scope: attrs.string("api_key_scope")?,
        devcontainers: Vec::new(),
    })
}

/// `startup_script_behavior = "blocking"`, or, from providers older than that attribute,
/// `login_before_ready = false`.
fn startup_blocks_login(attrs: &Attrs<'_>) -> Result<bool, ConvertError> {
    let behavior = attrs.string("startup_script_behavior")?;
    if !behavior.is_empty() {
        return Ok(behavior == "blocking");
    }
    Ok(attrs.has("login_before_ready") && !attrs.bool("login_before_ready")?)
}

fn resources_monitoring(attrs: &Attrs<'_>) -> Result<ResourcesMonitoring, ConvertError> {
    let mut monitoring = ResourcesMonitoring::default();
    for block in attrs.blocks("resources_monitoring")? {
        for memory in block.blocks("memory")? {
            monitoring.memory = Some(MemoryResourceMonitor {
                enabled: memory.bool("enabled")?,
                threshold: memory.int("threshold")?,
            });
        }
        for volume in block.blocks("volume")? {
            monitoring.volumes.push(VolumeResourceMonitor {
                path: volume.string("path")?,
                enabled: volume.bool("enabled")?,
                threshold: volume.int("threshold")?,
            });
        }
    }
    Ok(monitoring)
}

/// Gives agents that authenticate by instance identity the id a `coder_agent_instance` names.
pub(crate) fn apply_agent_instances(
    resources: &[TfResource],
    agents: &mut [PlacedAgent],
) -> Result<(), ConvertError> {
    for resource in resources
        .iter()
        .filter(|r| r.kind == "coder_agent_instance")
    {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let (Some(agent_id), Some(instance_id)) = (
            attrs.opt_string("agent_id")?,
            attrs.opt_string("instance_id")?,
        ) else {
            continue;
        };
        if agent_id.is_empty() {
            continue;
        }
        for placed in agents.iter_mut().filter(|p| p.agent.id == agent_id) {
            // A token-authenticated agent keeps its token even if an instance is declared.
            if let AgentAuth::InstanceId(id) = &mut placed.agent.auth {
                id.clone_from(&instance_id);
            }
        }
    }
    Ok(())
}

/// The attribute of the VM types Coder knows that identifies the instance to the cloud.
fn instance_id_attribute(kind: &str) -> Option<&'static str> {
    match kind {
        "google_compute_instance" => Some("instance_id"),
        "aws_instance" => Some("id"),
        "aws_spot_instance_request" => Some("spot_instance_id"),
        "azurerm_linux_virtual_machine" | "azurerm_windows_virtual_machine" => {
            Some("virtual_machine_id")
        }
        _ => None,
    }
}

/// Gives instance-identity agents that have no instance id yet the id of the VM they run in.
pub(crate) fn apply_host_instance_id(host: &TfResource, agents: &mut [Agent]) {
    let Some(key) = instance_id_attribute(&host.kind) else {
        return;
    };
    let Some(instance_id) = host.values.get(key).and_then(|v| v.as_str()) else {
        return;
    };
    for agent in agents {
        if let AgentAuth::InstanceId(id) = &mut agent.auth
            && id.is_empty()
        {
            instance_id.clone_into(id);
        }
    }
}

/// The attribute holding the machine size of the VM types Coder knows.
pub(crate) fn instance_type(host: &TfResource) -> String {
    let key = match host.kind.as_str() {
        "google_compute_instance" => "machine_type",
        "aws_instance" | "aws_spot_instance_request" => "instance_type",
        "azurerm_linux_virtual_machine" | "azurerm_windows_virtual_machine" => "size",
        _ => return String::new(),
    };
    host.values
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names() {
        for good in ["main", "dev-1", "a", "0", "Main", "DEV-x2"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for (bad, message) in [
            ("", "agent name cannot be empty"),
            ("dev_1", "contains underscores"),
            ("-dev", "does not match regex"),
            ("dev-", "does not match regex"),
            ("de--v", "does not match regex"),
            ("dév", "does not match regex"),
            ("dev.1", "does not match regex"),
        ] {
            let err = validate_name(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(message), "{bad}: {err}");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("a-b-c1"));
        assert!(!is_dns_label("A"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("a--b"));
    }
}
