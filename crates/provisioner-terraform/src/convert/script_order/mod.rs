//! `coder_script_order`: turns a template's ordering rules into the dependencies of each
//! script, following Coder's design (unreleased when this was written; see the provider's
//! `coder_script_order` data source).
//!
//! 1. Each data source's rules are resolved (`rules`): selectors to concrete `coder_script`
//!    addresses relative to the module declaring the rule, a phase per rule (declared, or
//!    inferred from the scripts; module selectors are filtered to it with a warning), and
//!    one runtime per rule — scripts can only be ordered within one agent or dev container.
//! 2. Rules become edges of one graph per runtime and phase (`edges`), refused on
//!    conflicting `requires` or a cycle.
//! 3. Every dependent script gets its prerequisites (`Script::dependencies`); the agent
//!    waits for them.
//!
//! Data sources without a node in the graph are stale (a plan's prior state may keep one
//! the configuration dropped) and ignored. The graph also tells which scripts and module
//! calls the configuration declares, so a selector of a script with `count = 0` is a no-op
//! rather than an error.

mod edges;
mod error;
mod rules;
mod selector;

use std::collections::{BTreeMap, HashSet};

use codersdk::proto::{Script, ScriptDependency};

pub use error::{Field, RuleProblem, ScriptOrderError, SelectorError, Sighting};

use super::ConvertError;
use super::agents::PlacedAgent;
use super::attrs::Attrs;
use super::dot::DotGraph;
use super::graph::Graph;
use super::show::{Mode, TfResource, module_path};
use rules::{Declarations, RawRule, ScriptInfo, Source};

/// Adds every script's dependencies; returns warnings for the template's author.
pub(crate) fn apply(
    resources: &[TfResource],
    dot: &DotGraph,
    graph: &Graph,
    agents: &mut [PlacedAgent],
) -> Result<Vec<String>, ConvertError> {
    let sources = sources(resources, graph)?;
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let scripts = scripts(resources, graph)?;
    let (rules, warnings) = rules::resolve(&sources, &scripts, &declarations(dot))?;
    for (dependent, prerequisite, requirement) in edges::build(&rules)? {
        for script in all_scripts(agents).filter(|s| s.resource_address == dependent) {
            script.dependencies.push(ScriptDependency {
                prerequisite_resource_address: prerequisite.clone(),
                requirement,
            });
        }
    }
    Ok(warnings)
}

fn sources(resources: &[TfResource], graph: &Graph) -> Result<Vec<Source>, ConvertError> {
    let mut out = Vec::new();
    for resource in resources.iter().filter(|r| {
        r.mode == Mode::Data
            && r.kind == "coder_script_order"
            && !graph.nodes_labelled(&r.label).is_empty()
    }) {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let rules = attrs.map_blocks("rule", |rule| {
            Ok(RawRule {
                run: rule.strings("run")?,
                after: rule.strings("after")?,
                requires: rule.string("requires")?,
                phase: rule.string("phase")?,
            })
        })?;
        out.push(Source {
            address: resource.address.clone(),
            module: module_path(&resource.address),
            rules,
        });
    }
    Ok(out)
}

/// An agent or a dev container's sub-agent: what runs scripts.
struct Runtime<'a> {
    address: &'a str,
    label: &'a str,
    /// The agent's id, or the sub-agent's; empty at plan time.
    id: String,
}

/// Every `coder_script` instance, with the agent or dev container that runs it.
fn scripts(
    resources: &[TfResource],
    graph: &Graph,
) -> Result<BTreeMap<String, ScriptInfo>, ConvertError> {
    let mut runtimes = Vec::new();
    for resource in resources.iter().filter(|r| r.mode == Mode::Managed) {
        let id_attribute = match resource.kind.as_str() {
            "coder_agent" => "id",
            "coder_devcontainer" => "subagent_id",
            _ => continue,
        };
        runtimes.push(Runtime {
            address: &resource.address,
            label: &resource.label,
            id: Attrs::new(&resource.address, &resource.values).string(id_attribute)?,
        });
    }
    let mut out = BTreeMap::new();
    for resource in resources
        .iter()
        .filter(|r| r.mode == Mode::Managed && r.kind == "coder_script")
    {
        let Some(parsed) = selector::script_address(&resource.address) else {
            continue;
        };
        let attrs = Attrs::new(&resource.address, &resource.values);
        let agent_id = attrs.string("agent_id")?;
        out.insert(
            resource.address.clone(),
            ScriptInfo {
                parsed,
                run_on_start: attrs.bool("run_on_start")?,
                run_on_stop: attrs.bool("run_on_stop")?,
                cron: attrs.string("cron")?,
                runtime: runtime_of(resource, &agent_id, &runtimes, graph),
            },
        );
    }
    Ok(out)
}

/// The runtime a script's `agent_id` names: by id once known, by the graph at plan time
/// (then by label: the instances of a counted agent cannot be told apart yet). A script
/// whose agent runs nowhere (a stopped workspace) still has its runtime.
fn runtime_of(
    script: &TfResource,
    agent_id: &str,
    runtimes: &[Runtime<'_>],
    graph: &Graph,
) -> Option<String> {
    if !agent_id.is_empty() {
        return runtimes
            .iter()
            .find(|r| r.id == agent_id)
            .map(|r| r.address.to_owned());
    }
    runtimes
        .iter()
        .filter(|r| r.id.is_empty() && graph.depends_on(&script.label, r.label))
        .map(|r| r.label.to_owned())
        .min()
}

/// What the configuration declares, read from the graph terraform drew of it.
fn declarations(dot: &DotGraph) -> Declarations {
    let mut labels = HashSet::new();
    let mut module_calls = HashSet::new();
    for node in &dot.nodes {
        if let Some(label) = node.attrs.get("label") {
            labels.insert(label.clone());
            add_module_prefixes(label, &mut module_calls);
        }
        // Module calls are nodes like `[root] module.a.module.b (expand)`.
        let id = node.id.strip_prefix("[root] ").unwrap_or(&node.id);
        if let Some(path) = id
            .strip_suffix(" (expand)")
            .or_else(|| id.strip_suffix(" (close)"))
        {
            let segments: Vec<&str> = path.split('.').collect();
            if segments.len().is_multiple_of(2)
                && segments.iter().step_by(2).all(|s| *s == "module")
            {
                module_calls.insert(path.to_owned());
            }
        }
    }
    Declarations {
        labels,
        module_calls,
    }
}

/// `module.a.module.b.x.y` declares the calls `module.a` and `module.a.module.b`.
fn add_module_prefixes(label: &str, calls: &mut HashSet<String>) {
    let segments: Vec<&str> = label.split('.').collect();
    let mut at = 0;
    while at + 2 < segments.len() && segments[at] == "module" {
        calls.insert(segments[..at + 2].join("."));
        at += 2;
    }
}

fn all_scripts(agents: &mut [PlacedAgent]) -> impl Iterator<Item = &mut Script> {
    agents.iter_mut().flat_map(|placed| {
        let agent = &mut placed.agent;
        agent.scripts.iter_mut().chain(
            agent
                .devcontainers
                .iter_mut()
                .flat_map(|container| container.scripts.iter_mut()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_calls_come_from_nodes_and_labels() {
        let dot = crate::convert::dot::parse(
            r#"digraph {
                 "[root] module.tools (expand)"
                 "[root] module.a.module.b.null_resource.x (expand)" [label = "module.a.module.b.null_resource.x"]
               }"#,
        )
        .expect("valid DOT");
        let declared = declarations(&dot);
        for call in ["module.tools", "module.a", "module.a.module.b"] {
            assert!(declared.module_calls.contains(call), "{call}");
        }
        assert!(
            declared
                .labels
                .contains("module.a.module.b.null_resource.x")
        );
    }
}
