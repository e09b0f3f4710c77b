//! Turns what Terraform reports about a plan or a state into the resources, agents, apps and
//! parameters Coder stores and shows.
//!
//! [`convert`] is a pure function of two texts: the output of `terraform show -json` (of a saved
//! plan or of the state) and of `terraform graph -type=plan`. The steps follow Coder's reference
//! converter:
//!
//! 1. Flatten all resources, recursively through modules (`show`), and label each one with its
//!    address without instance keys, which is how the graph names it.
//! 2. Validate and read each `coder_agent`, and place it in the nearest managed, non-`coder_*`
//!    resource that depends on it (`agents`). An agent no such resource depends on is dropped.
//! 3. Attach `coder_app`, `coder_env` and `coder_script` to their agent (`apps`).
//! 4. Attach `coder_devcontainer` to their agent, with the apps, envs and scripts of their
//!    sub-agent (`devcontainers`), then order scripts by `coder_script_order` rules
//!    (`script_order`).
//! 5. Attach each `coder_metadata` to the nearest resource it depends on (`metadata`).
//! 6. List the resources, and read parameters and external auth providers (`parameters`),
//!    presets, AI tasks and external agents (`features`).
//!
//! Output order is the order of the show document, children before parents; Coder's own order is
//! arbitrary except for parameters, which keep declaration order.

mod agents;
mod apps;
mod attrs;
mod devcontainers;
mod dot;
mod features;
mod graph;
mod metadata;
mod parameters;
mod script_order;
mod show;

use codersdk::proto::{ExternalAuthProviderResource, Resource, RichParameter, TemplateFeatures};
use serde::{Deserialize, Serialize};

pub use dot::DotError;
pub use script_order::{Field, RuleProblem, ScriptOrderError, SelectorError, Sighting};

use self::graph::Graph;
use self::show::Mode;

/// The two documents Terraform produces for a plan or an apply.
#[derive(Debug, Clone, Copy)]
pub struct ConvertInput<'a> {
    /// `terraform show -json` of a saved plan, or of the state.
    pub show_json: &'a str,
    /// `terraform graph -type=plan`.
    pub graph_dot: &'a str,
}

/// What a plan or state means to Coder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Converted {
    pub resources: Vec<Resource>,
    pub parameters: Vec<RichParameter>,
    pub external_auth_providers: Vec<ExternalAuthProviderResource>,
    /// Presets, AI tasks and external agents.
    #[serde(flatten)]
    pub features: TemplateFeatures,
    /// Things the template's author should hear about that do not stop the conversion.
    pub warnings: Vec<String>,
}

/// Why a plan or state cannot be converted. Most variants are mistakes in the template and their
/// messages are written for its author.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("parse terraform show output: {0}")]
    Json(#[from] serde_json::Error),
    #[error("parse terraform graph: {0}")]
    Graph(#[from] DotError),
    /// An attribute has a JSON type the provider's schema does not give it.
    #[error("decode {address}: attribute {attribute:?} must be {expected}")]
    Attribute {
        address: String,
        attribute: String,
        expected: &'static str,
    },
    /// An enumerated attribute has a value this converter does not know.
    #[error("decode {address}: unsupported {attribute} {value:?}")]
    UnsupportedValue {
        address: String,
        attribute: &'static str,
        value: String,
    },
    #[error("agent name cannot be empty")]
    EmptyAgentName,
    #[error(
        "agent name {name:?} contains underscores which are no longer supported, please use hyphens instead (regex: {pattern:?})",
        pattern = agents::AGENT_NAME_PATTERN
    )]
    AgentNameUnderscore { name: String },
    #[error("agent name {name:?} does not match regex {pattern:?}", pattern = agents::AGENT_NAME_PATTERN)]
    InvalidAgentName { name: String },
    /// Agent names must differ ignoring case.
    #[error("duplicate agent name: {name}")]
    DuplicateAgentName { name: String },
    /// The graph does not belong to the plan or state (an agent has no node in it).
    #[error("couldn't find node on graph: {label:?}")]
    AgentNotInGraph { label: String },
    #[error("app slug {slug:?} does not match regex {pattern:?}", pattern = apps::APP_SLUG_PATTERN)]
    InvalidAppSlug { slug: String },
    #[error("duplicate app slug, they must be unique per template: {slug:?}")]
    DuplicateAppSlug { slug: String },
    /// Two `coder_metadata` resources describe the same resource.
    #[error("duplicate metadata resource: {label}")]
    DuplicateMetadata { label: String },
    #[error(
        "coder_parameter names must be unique but {} multiple times",
        describe_duplicates(.names)
    )]
    DuplicateParameterNames { names: Vec<String> },
    #[error(
        "coder_workspace_preset names must be unique but {} multiple times",
        describe_duplicates(.names)
    )]
    DuplicatePresetNames { names: Vec<String> },
    #[error("a maximum of 1 coder_workspace_preset can be marked as default, but {count} are set")]
    MultipleDefaultPresets { count: usize },
    #[error(transparent)]
    ScriptOrder(#[from] ScriptOrderError),
}

/// `"a"`, `"a" and "b"`, `"a", "b" and "c"`.
fn join_quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `"a" appears`, `"a" and "b" appear`, `"a", "b" and "c" appear`.
fn describe_duplicates(names: &[String]) -> String {
    match names.len() {
        0 => "none appear".to_owned(),
        1 => format!("{} appears", join_quoted(names)),
        _ => format!("{} appear", join_quoted(names)),
    }
}

/// Types that are part of an agent (or describe another resource) rather than infrastructure.
const NOT_LISTED: [&str; 5] = [
    "coder_agent",
    "coder_agent_instance",
    "coder_app",
    "coder_metadata",
    "coder_script",
];

/// Converts a plan or a state; see the module documentation.
pub fn convert(input: &ConvertInput<'_>) -> Result<Converted, ConvertError> {
    let dot = dot::parse(input.graph_dot)?;
    let graph = Graph::new(&dot);
    let resources = show::resources(input.show_json)?;

    let hosts = agents::host_labels(&resources);
    let mut agents = agents::place(&resources, &hosts, &graph)?;
    agents::apply_agent_instances(&resources, &mut agents)?;
    apps::attach_children(&resources, &graph, &mut agents)?;
    devcontainers::attach(&resources, &graph, &mut agents)?;
    let mut warnings = script_order::apply(&resources, &dot, &graph, &mut agents)?;
    let details = metadata::collect(&resources, &hosts, &graph)?;

    let listed = resources
        .iter()
        .filter(|r| r.mode == Mode::Managed && !NOT_LISTED.contains(&r.kind.as_str()));
    let mut out = Vec::new();
    for resource in listed {
        let mut hosted: Vec<_> = agents
            .iter()
            .filter(|placed| placed.host == resource.label)
            .map(|placed| placed.agent.clone())
            .collect();
        agents::apply_host_instance_id(resource, &mut hosted);
        // Every instance of a counted resource shows the same metadata.
        let found = details.get(&resource.label).cloned().unwrap_or_default();
        out.push(Resource {
            name: resource.name.clone(),
            kind: resource.kind.clone(),
            agents: hosted,
            metadata: found.items,
            hide: found.hide,
            icon: found.icon,
            instance_type: agents::instance_type(resource),
            daily_cost: found.daily_cost,
            module_path: show::module_path(&resource.address),
        });
    }

    let parameters = parameters::collect(&resources)?;
    let labels: Vec<&str> = dot
        .nodes
        .iter()
        .filter_map(|node| node.attrs.get("label").map(String::as_str))
        .collect();
    let (features, preset_warnings) = features::collect(&resources, &labels, &parameters)?;
    warnings.extend(preset_warnings);
    Ok(Converted {
        resources: out,
        parameters,
        external_auth_providers: parameters::external_auth(&resources)?,
        features,
        warnings,
    })
}
