//! `coder_script_order` rules on small synthetic states: what they attach to scripts, and the
//! template mistakes they refuse.

use codersdk::proto::{Script, ScriptDependency, ScriptRequirement};
use serde_json::{Value, json};

use crate::support::{agent, dependencies, error_of, graph, resource, run, state};

fn script(address: &str, agent_id: &str, phase: &str) -> Value {
    let (start, stop) = match phase {
        "start" => (true, false),
        "stop" => (false, true),
        "both" => (true, true),
        _ => (false, false),
    };
    let cron = if phase == "cron" { "0 * * * * *" } else { "" };
    resource(
        address,
        json!({"agent_id": agent_id, "display_name": address, "script": "true",
               "run_on_start": start, "run_on_stop": stop, "cron": cron}),
    )
}

fn order(address: &str, rules: Value) -> Value {
    resource(address, json!({ "rule": rules }))
}

fn rule(run: &[&str], after: &[&str]) -> Value {
    json!({"run": run, "after": after, "requires": "success", "phase": null})
}

/// `coder_agent.a` (id `a`) in `null_resource.a` and `coder_agent.b` (id `b`) in
/// `null_resource.b`, plus `more`; every address of `more` gets a graph node, as do
/// `declared_only` labels (resources with no instances).
fn template(more: Vec<Value>, declared_only: &[&str]) -> (String, String) {
    let mut resources = vec![
        resource("coder_agent.a", agent("a")),
        resource("null_resource.a", json!({})),
        resource("coder_agent.b", agent("b")),
        resource("null_resource.b", json!({})),
    ];
    resources.extend(more);
    let mut labels: Vec<String> = resources
        .iter()
        .filter_map(|r| r["address"].as_str())
        .map(label_of)
        .collect();
    labels.extend(declared_only.iter().map(|l| (*l).to_owned()));
    labels.sort();
    labels.dedup();
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let dot = graph(
        &labels,
        &[
            ("null_resource.a", "coder_agent.a"),
            ("null_resource.b", "coder_agent.b"),
        ],
    );
    (state(resources), dot)
}

/// An address without its instance keys, as the graph labels it.
fn label_of(address: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in address.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn scripts_of(converted: &provisioner_terraform::convert::Converted, agent: &str) -> Vec<Script> {
    converted
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .filter(|a| a.name == agent)
        .flat_map(|a| a.scripts.clone())
        .collect()
}

#[test]
fn rules_chain_scripts_of_one_agent() -> anyhow::Result<()> {
    let (show, dot) = template(
        vec![
            script("coder_script.clone", "a", "start"),
            script("coder_script.install", "a", "start"),
            script("coder_script.serve", "a", "start"),
            script("coder_script.unrelated", "a", "start"),
            order(
                "data.coder_script_order.startup",
                json!([
                    rule(&["coder_script.install"], &["coder_script.clone"]),
                    {"run": ["coder_script.serve"], "after": ["coder_script.install", "coder_script.clone"],
                     "requires": "completion", "phase": "start"},
                ]),
            ),
        ],
        &[],
    );
    let converted = run(&show, &dot)?;
    let scripts = scripts_of(&converted, "a");
    assert_eq!(
        dependencies(&scripts, "coder_script.install"),
        [("coder_script.clone".to_owned(), ScriptRequirement::Success)]
    );
    assert_eq!(
        dependencies(&scripts, "coder_script.serve"),
        [
            (
                "coder_script.clone".to_owned(),
                ScriptRequirement::Completion
            ),
            (
                "coder_script.install".to_owned(),
                ScriptRequirement::Completion
            ),
        ]
    );
    assert!(dependencies(&scripts, "coder_script.clone").is_empty());
    assert!(dependencies(&scripts, "coder_script.unrelated").is_empty());
    assert!(converted.warnings.is_empty());
    Ok(())
}

#[test]
fn counted_scripts_and_instance_selectors() -> anyhow::Result<()> {
    let (show, dot) = template(
        vec![
            script("coder_script.setup[0]", "a", "start"),
            script("coder_script.setup[1]", "a", "start"),
            script("coder_script.use", "a", "start"),
            order(
                "data.coder_script_order.o",
                json!([rule(&["coder_script.use"], &["coder_script.setup[1]"])]),
            ),
        ],
        &[],
    );
    let scripts = scripts_of(&run(&show, &dot)?, "a");
    assert_eq!(
        dependencies(&scripts, "coder_script.use"),
        [(
            "coder_script.setup[1]".to_owned(),
            ScriptRequirement::Success
        )]
    );
    Ok(())
}

#[test]
fn selectors_of_declared_scripts_without_instances_are_no_ops() -> anyhow::Result<()> {
    let (show, dot) = template(
        vec![
            script("coder_script.use", "a", "start"),
            order(
                "data.coder_script_order.o",
                json!([rule(&["coder_script.use"], &["coder_script.optional"])]),
            ),
        ],
        &["coder_script.optional"],
    );
    let scripts = scripts_of(&run(&show, &dot)?, "a");
    assert!(dependencies(&scripts, "coder_script.use").is_empty());
    Ok(())
}

#[test]
fn module_selectors_take_every_script_inside_in_the_rules_phase() -> anyhow::Result<()> {
    let (show, dot) = template(
        vec![
            script("module.tools.coder_script.install", "a", "start"),
            script("module.tools.module.inner.coder_script.cache", "a", "start"),
            script("module.tools.coder_script.save", "a", "stop"),
            script("coder_script.ide", "a", "start"),
            order(
                "data.coder_script_order.o",
                json!([rule(&["coder_script.ide"], &["module.tools"])]),
            ),
        ],
        &[],
    );
    let converted = run(&show, &dot)?;
    let scripts = scripts_of(&converted, "a");
    assert_eq!(
        dependencies(&scripts, "coder_script.ide"),
        [
            (
                "module.tools.coder_script.install".to_owned(),
                ScriptRequirement::Success
            ),
            (
                "module.tools.module.inner.coder_script.cache".to_owned(),
                ScriptRequirement::Success
            ),
        ]
    );
    assert_eq!(
        converted.warnings,
        [
            "script order data source \"data.coder_script_order.o\" rule 0 inferred phase \"start\" \
             and omitted scripts in the other phase from module selectors: \"module.tools\"; set \
             phase = \"start\" explicitly to make this filtering intentional"
        ]
    );
    Ok(())
}

#[test]
fn stale_data_sources_are_ignored() -> anyhow::Result<()> {
    // A data source the configuration no longer has: no graph node.
    let mut resources = vec![
        resource("coder_agent.a", agent("a")),
        resource("null_resource.a", json!({})),
        script("coder_script.x", "a", "start"),
        script("coder_script.y", "a", "start"),
    ];
    let dot = graph(
        &[
            "coder_agent.a",
            "null_resource.a",
            "coder_script.x",
            "coder_script.y",
        ],
        &[("null_resource.a", "coder_agent.a")],
    );
    resources.push(order(
        "data.coder_script_order.gone",
        json!([rule(&["coder_script.y"], &["coder_script.x"])]),
    ));
    let scripts = scripts_of(&run(&state(resources), &dot)?, "a");
    assert!(scripts.iter().all(|s| s.dependencies.is_empty()));
    Ok(())
}

fn refused(more: Vec<Value>, declared_only: &[&str]) -> String {
    let (show, dot) = template(more, declared_only);
    error_of(&show, &dot)
}

const RULE0: &str = "script order data source \"data.coder_script_order.o\" rule 0: ";

#[test]
fn cycles_are_refused_naming_the_cycle() {
    let message = refused(
        vec![
            script("coder_script.x", "a", "start"),
            script("coder_script.y", "a", "start"),
            script("coder_script.z", "a", "start"),
            order(
                "data.coder_script_order.o",
                json!([
                    rule(&["coder_script.y"], &["coder_script.x"]),
                    rule(&["coder_script.z"], &["coder_script.y"]),
                    rule(&["coder_script.x"], &["coder_script.z"]),
                ]),
            ),
        ],
        &[],
    );
    assert!(
        message.starts_with(
            "script order dependency cycle: coder_script.x -> coder_script.y -> coder_script.z -> coder_script.x; cycle edges: "
        ),
        "{message}"
    );
    assert!(
        message.contains(
            "\"coder_script.y\" after \"coder_script.x\" from run selector \"coder_script.y\" and \
             after selector \"coder_script.x\" (data source \"data.coder_script_order.o\" rule 0)"
        ),
        "{message}"
    );
}

#[test]
fn scripts_of_two_agents_cannot_be_ordered() {
    let message = refused(
        vec![
            script("coder_script.x", "a", "start"),
            script("coder_script.y", "b", "start"),
            order(
                "data.coder_script_order.o",
                json!([rule(&["coder_script.y"], &["coder_script.x"])]),
            ),
        ],
        &[],
    );
    assert_eq!(
        message,
        format!(
            "{RULE0}selector \"coder_script.y\" expands to script \"coder_script.y\" executed by \
             \"coder_agent.b\", but selector \"coder_script.x\" expands to script \
             \"coder_script.x\" executed by \"coder_agent.a\"; scripts can be ordered only within \
             the same agent or devcontainer subagent"
        )
    );
}

#[test]
fn template_mistakes_are_explained() {
    let x_and_y = |x: &str, y: &str| {
        vec![
            script("coder_script.x", "a", x),
            script("coder_script.y", "a", y),
        ]
    };
    let with = |mut scripts: Vec<Value>, rules: Value| {
        scripts.push(order("data.coder_script_order.o", rules));
        scripts
    };
    for (more, expected) in [
        (
            with(
                x_and_y("start", "start"),
                json!([rule(&["coder_script.y"], &["coder_script.nope"])]),
            ),
            "after selector \"coder_script.nope\" does not name a declared coder_script resource",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([rule(&["coder_script.y"], &["coder_script.x[3]"])]),
            ),
            "after selector \"coder_script.x[3]\" expanded to no coder_script resources",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([rule(&["coder_script.y"], &["module.nope"])]),
            ),
            "after selector \"module.nope\" does not name a declared child module call",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([rule(&["coder_script.y"], &["null_resource.a"])]),
            ),
            "invalid after selector \"null_resource.a\": must select a coder_script or module",
        ),
        (
            with(
                x_and_y("start", "stop"),
                json!([rule(&["coder_script.y"], &["coder_script.x"])]),
            ),
            "after selector \"coder_script.x\" selects start script \"coder_script.x\", but run \
             selector \"coder_script.y\" selects stop script \"coder_script.y\"; coder_script \
             resource selectors cannot mix start and stop scripts",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([{"run": ["coder_script.y"], "after": ["coder_script.x"], "phase": "stop"}]),
            ),
            "run selector \"coder_script.y\" selects start script \"coder_script.y\", but the rule \
             phase is \"stop\"",
        ),
        (
            with(
                x_and_y("cron", "start"),
                json!([rule(&["coder_script.y"], &["coder_script.x"])]),
            ),
            "after selector \"coder_script.x\" expanded to [\"coder_script.x\"], but script \
             \"coder_script.x\" is cron-only; script ordering requires run_on_start or run_on_stop",
        ),
        (
            with(
                x_and_y("both", "start"),
                json!([rule(&["coder_script.y"], &["coder_script.x"])]),
            ),
            "after selector \"coder_script.x\" expanded to [\"coder_script.x\"], but script \
             \"coder_script.x\" has both run_on_start and run_on_stop enabled",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([rule(&["coder_script.x"], &["coder_script.x"])]),
            ),
            "run selector \"coder_script.x\" and after selector \"coder_script.x\" both select \
             script \"coder_script.x\"; a script cannot depend on itself",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([{"run": ["coder_script.y"], "after": ["coder_script.x"], "requires": "maybe"}]),
            ),
            "requires must be \"success\" or \"completion\", got \"maybe\"",
        ),
        (
            with(
                x_and_y("start", "start"),
                json!([{"run": [], "after": ["coder_script.x"]}]),
            ),
            "run must contain at least one selector",
        ),
    ] {
        assert_eq!(refused(more, &[]), format!("{RULE0}{expected}"));
    }
}

#[test]
fn conflicting_requirements_for_one_edge_are_refused() {
    let message = refused(
        vec![
            script("coder_script.x", "a", "start"),
            script("coder_script.y", "a", "start"),
            order(
                "data.coder_script_order.o",
                json!([
                    rule(&["coder_script.y"], &["coder_script.x"]),
                    {"run": ["coder_script.y"], "after": ["coder_script.x"], "requires": "completion"},
                ]),
            ),
        ],
        &[],
    );
    assert_eq!(
        message,
        "script order data source \"data.coder_script_order.o\" rule 1: run selector \
         \"coder_script.y\" and after selector \"coder_script.x\" declare script \
         \"coder_script.y\" after \"coder_script.x\" with requires \"completion\", conflicting \
         with requires \"success\" from data source \"data.coder_script_order.o\" rule 0"
    );
}

#[test]
fn dependencies_travel_in_the_script_json() -> anyhow::Result<()> {
    let script = Script {
        resource_address: "coder_script.b".into(),
        dependencies: vec![ScriptDependency {
            prerequisite_resource_address: "coder_script.a".into(),
            requirement: ScriptRequirement::Completion,
        }],
        ..Script::default()
    };
    let json = serde_json::to_value(&script)?;
    assert_eq!(
        json["dependencies"],
        json!([{"prerequisite_resource_address": "coder_script.a", "requirement": "completion"}])
    );
    Ok(())
}
