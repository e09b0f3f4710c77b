//! Builders for small synthetic `terraform show -json` documents and graphs.

use codersdk::proto::{Script, ScriptRequirement};
use provisioner_terraform::convert::{ConvertError, ConvertInput, Converted, convert};
use serde_json::{Value, json};

/// One resource of a show document; mode, type and name come from the address.
pub fn resource(address: &str, values: Value) -> Value {
    let label = address.split('[').next().unwrap_or(address);
    let parts: Vec<&str> = label.split('.').collect();
    let (mode, kind, name) = match parts.as_slice() {
        [.., "data", kind, name] => ("data", *kind, *name),
        [.., kind, name] => ("managed", *kind, *name),
        _ => panic!("test addresses have a type and a name: {address}"),
    };
    json!({
        "address": address,
        "mode": mode,
        "type": kind,
        "name": name.split('[').next().unwrap_or(name),
        "values": values,
    })
}

/// A state document whose root module holds `resources`.
pub fn state(resources: Vec<Value>) -> String {
    json!({"format_version": "1.0", "values": {"root_module": {"resources": resources}}})
        .to_string()
}

/// A plan document: `data` in the prior state, `planned` in the planned values.
pub fn plan(data: Vec<Value>, planned: Vec<Value>) -> String {
    json!({
        "format_version": "1.0",
        "prior_state": {"values": {"root_module": {"resources": data}}},
        "planned_values": {"root_module": {"resources": planned}},
    })
    .to_string()
}

/// A graph shaped like `terraform graph -type=plan`: one labelled node per label, and an edge
/// from each dependent to each of its dependencies.
pub fn graph(labels: &[&str], depends: &[(&str, &str)]) -> String {
    let mut text = String::from("digraph {\n\tcompound = \"true\"\n\tsubgraph \"root\" {\n");
    for label in labels {
        text.push_str(&format!(
            "\t\t\"[root] {label} (expand)\" [label = \"{label}\", shape = \"box\"]\n"
        ));
    }
    for (from, to) in depends {
        text.push_str(&format!(
            "\t\t\"[root] {from} (expand)\" -> \"[root] {to} (expand)\"\n"
        ));
    }
    text.push_str("\t}\n}\n");
    text
}

/// A state with `coder_agent.main` (with `agent_values`) running in `null_resource.host`, plus
/// `more` resources that have graph nodes but no edges.
pub fn hosted(agent_values: Value, more: Vec<Value>) -> (String, String) {
    let labels: Vec<String> = more
        .iter()
        .filter_map(|r| r["address"].as_str())
        .map(|a| a.split('[').next().unwrap_or(a).to_owned())
        .chain([
            "coder_agent.main".to_owned(),
            "null_resource.host".to_owned(),
        ])
        .collect();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let dot = graph(&labels, &[("null_resource.host", "coder_agent.main")]);
    let mut resources = vec![
        resource("coder_agent.main", agent_values),
        resource("null_resource.host", json!({})),
    ];
    resources.extend(more);
    (state(resources), dot)
}

pub fn run(show_json: &str, graph_dot: &str) -> Result<Converted, ConvertError> {
    convert(&ConvertInput {
        show_json,
        graph_dot,
    })
}

/// The message of the error a conversion must fail with.
pub fn error_of(show_json: &str, graph_dot: &str) -> String {
    match run(show_json, graph_dot) {
        Ok(converted) => panic!("conversion succeeded: {converted:#?}"),
        Err(err) => err.to_string(),
    }
}

/// A token-authenticated linux agent with the given id.
pub fn agent(id: &str) -> Value {
    json!({"id": id, "os": "linux", "arch": "amd64", "auth": "token", "token": format!("token-{id}")})
}

/// `(prerequisite, requirement)` of the script at `address` among `scripts`.
pub fn dependencies(scripts: &[Script], address: &str) -> Vec<(String, ScriptRequirement)> {
    scripts
        .iter()
        .find(|s| s.resource_address == address)
        .map(|s| {
            s.dependencies
                .iter()
                .map(|d| (d.prerequisite_resource_address.clone(), d.requirement))
                .collect()
        })
        .unwrap_or_default()
}
