//! Template mistakes the converter must reject, on inputs written for these tests.

use serde_json::json;

use crate::support::{agent, error_of, graph, hosted, plan, resource, run, state};

/// One agent `coder_agent.<name>` inside `null_resource.host`.
fn named_agent(name: &str) -> (String, String) {
    let label = format!("coder_agent.{name}");
    (
        state(vec![
            resource(&label, agent("a1")),
            resource("null_resource.host", json!({})),
        ]),
        graph(
            &[&label, "null_resource.host"],
            &[("null_resource.host", &label)],
        ),
    )
}

#[test]
fn agent_names_must_be_dns_labels() {
    for (name, message) in [
        (
            "dev_1",
            "agent name \"dev_1\" contains underscores which are no longer supported, please use hyphens instead",
        ),
        ("-dev", "agent name \"-dev\" does not match regex"),
        ("dev-", "agent name \"dev-\" does not match regex"),
        ("de--v", "agent name \"de--v\" does not match regex"),
    ] {
        let (show, dot) = named_agent(name);
        let err = error_of(&show, &dot);
        assert!(err.starts_with(message), "{name}: {err}");
    }
    let (show, dot) = named_agent("Dev-1");
    assert!(run(&show, &dot).is_ok(), "uppercase letters are allowed");
}

#[test]
fn agent_names_are_unique_ignoring_case() {
    let show = state(vec![
        resource("coder_agent.dev", agent("a1")),
        resource("coder_agent.Dev", agent("a2")),
        resource("null_resource.host", json!({})),
    ]);
    let dot = graph(
        &["coder_agent.dev", "coder_agent.Dev", "null_resource.host"],
        &[
            ("null_resource.host", "coder_agent.dev"),
            ("null_resource.host", "coder_agent.Dev"),
        ],
    );
    assert_eq!(error_of(&show, &dot), "duplicate agent name: Dev");
}

#[test]
fn agents_must_be_in_the_graph() {
    let show = state(vec![resource("coder_agent.main", agent("a1"))]);
    assert_eq!(
        error_of(&show, &graph(&[], &[])),
        "couldn't find node on graph: \"coder_agent.main\""
    );
}

fn agent_with_apps(slugs: &[&str]) -> (String, String) {
    let apps = slugs
        .iter()
        .enumerate()
        .map(|(i, slug)| {
            resource(
                &format!("coder_app.app{i}"),
                json!({"agent_id": "a1", "slug": slug}),
            )
        })
        .collect();
    hosted(agent("a1"), apps)
}

#[test]
fn app_slugs_must_match_the_pattern() {
    for slug in [
        "$$$ invalid slug $$$",
        "App",
        "my_app",
        "-app",
        "app-",
        "a--b",
    ] {
        let (show, dot) = agent_with_apps(&[slug]);
        assert_eq!(
            error_of(&show, &dot),
            format!("app slug {slug:?} does not match regex \"^[a-z0-9](-?[a-z0-9])*$\"")
        );
    }
}

#[test]
fn app_slugs_are_unique_per_template() {
    let (show, dot) = agent_with_apps(&["code", "code"]);
    assert_eq!(
        error_of(&show, &dot),
        "duplicate app slug, they must be unique per template: \"code\""
    );

    // Across agents too, and even when an app's agent is dropped.
    let show = state(vec![
        resource("coder_agent.one", agent("a1")),
        resource("coder_agent.two", agent("a2")),
        resource("null_resource.host", json!({})),
        resource("coder_app.x", json!({"agent_id": "a1", "slug": "web"})),
        resource("coder_app.y", json!({"agent_id": "a2", "slug": "web"})),
    ]);
    let dot = graph(
        &["coder_agent.one", "coder_agent.two", "null_resource.host"],
        &[("null_resource.host", "coder_agent.one")],
    );
    assert!(error_of(&show, &dot).starts_with("duplicate app slug"));
}

#[test]
fn a_resource_takes_one_metadata() {
    let show = state(vec![
        resource("null_resource.box", json!({"id": "r1"})),
        resource(
            "coder_metadata.a",
            json!({"resource_id": "r1", "item": [{"key": "k", "value": "v"}]}),
        ),
        resource(
            "coder_metadata.b",
            json!({"resource_id": "r1", "daily_cost": 3}),
        ),
    ]);
    let dot = graph(
        &["null_resource.box", "coder_metadata.a", "coder_metadata.b"],
        &[
            ("coder_metadata.a", "null_resource.box"),
            ("coder_metadata.b", "null_resource.box"),
        ],
    );
    assert_eq!(
        error_of(&show, &dot),
        "duplicate metadata resource: null_resource.box"
    );
}

fn parameter(address: &str, name: &str) -> serde_json::Value {
    resource(
        address,
        json!({"name": name, "type": "string", "optional": true}),
    )
}

#[test]
fn parameter_names_are_unique() {
    let dot = graph(&[], &[]);
    let one = plan(
        vec![
            parameter("data.coder_parameter.a", "region"),
            parameter("data.coder_parameter.b", "region"),
        ],
        vec![],
    );
    assert_eq!(
        error_of(&one, &dot),
        "coder_parameter names must be unique but \"region\" appears multiple times"
    );

    let several = plan(
        vec![
            parameter("data.coder_parameter.a", "region"),
            parameter("data.coder_parameter.b", "size"),
            parameter("data.coder_parameter.c", "region"),
            parameter("data.coder_parameter.d", "size"),
            parameter("data.coder_parameter.e", "region"),
            parameter("data.coder_parameter.f", "zone"),
            parameter("data.coder_parameter.g", "zone"),
        ],
        vec![],
    );
    assert_eq!(
        error_of(&several, &dot),
        "coder_parameter names must be unique but \"region\", \"size\" and \"zone\" appear multiple times"
    );
}

#[test]
fn attributes_of_the_wrong_type_are_named() {
    let (show, dot) = hosted(json!({"os": "linux", "connection_timeout": "soon"}), vec![]);
    assert_eq!(
        error_of(&show, &dot),
        "decode coder_agent.main: attribute \"connection_timeout\" must be a number"
    );
}

#[test]
fn unknown_enumerations_are_rejected() {
    let show = plan(
        vec![resource(
            "data.coder_parameter.p",
            json!({"name": "p", "type": "string", "form_type": "wheel"}),
        )],
        vec![],
    );
    assert!(error_of(&show, &graph(&[], &[])).contains("unsupported form_type \"wheel\""));
}

#[test]
fn malformed_documents_are_errors() {
    let dot = graph(&[], &[]);
    assert!(error_of("{", &dot).starts_with("parse terraform show output"));
    assert!(error_of(&state(vec![]), "digraph {").starts_with("parse terraform graph"));
    let no_id = plan(
        vec![resource("data.coder_external_auth.gh", json!({}))],
        vec![],
    );
    assert_eq!(
        error_of(&no_id, &dot),
        "decode data.coder_external_auth.gh: attribute \"id\" must be a string"
    );
}
