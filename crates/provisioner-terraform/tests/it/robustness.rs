//! The converter returns a result, never panics, on arbitrary input: random bytes, random JSON,
//! truncated documents, and plausible documents with random attribute values over random graphs.

use std::collections::HashSet;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::support::{graph, resource, run};

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z_\\[\\]\". 0-9-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("values".to_owned()),
                    Just("root_module".to_owned()),
                    Just("resources".to_owned()),
                    Just("child_modules".to_owned()),
                    Just("planned_values".to_owned()),
                    Just("prior_state".to_owned()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const KINDS: [&str; 12] = [
    "coder_agent",
    "coder_app",
    "coder_env",
    "coder_script",
    "coder_metadata",
    "coder_agent_instance",
    "coder_parameter",
    "coder_external_auth",
    "null_resource",
    "aws_instance",
    "google_compute_instance",
    "terraform_data",
];

const ATTRIBUTES: [&str; 22] = [
    "id",
    "agent_id",
    "auth",
    "token",
    "slug",
    "display_name",
    "name",
    "share",
    "open_in",
    "healthcheck",
    "item",
    "option",
    "validation",
    "display_apps",
    "metadata",
    "env",
    "order",
    "connection_timeout",
    "instance_id",
    "form_type",
    "api_key_scope",
    "merge_strategy",
];

fn attribute_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop_oneof![Just("a1"), Just("a2"), Just("web"), Just("token"), Just("Bad_Slug"), Just("")]
            .prop_map(|s| json!(s)),
        1 => any_json(),
        1 => prop::collection::vec(
                prop::collection::btree_map("[a-z_]{1,10}", any_json(), 0..4), 0..3)
            .prop_map(|blocks| json!(blocks)),
    ]
}

#[derive(Debug, Clone)]
struct Plausible {
    show_json: String,
    graph_dot: String,
}

fn plausible() -> impl Strategy<Value = Plausible> {
    let one = (
        0..KINDS.len(),
        prop_oneof![
            Just("main"),
            Just("dev"),
            Just("Dev"),
            Just("x_y"),
            Just("a"),
            Just("b")
        ],
        any::<bool>(),
        prop::option::of(0u8..3),
        prop::collection::btree_map(0..ATTRIBUTES.len(), attribute_value(), 0..6),
    );
    (
        prop::collection::vec(one, 0..10),
        prop::collection::vec((0usize..10, 0usize..10), 0..20),
        any::<bool>(),
    )
        .prop_map(|(specs, edges, as_plan)| {
            let mut resources = Vec::new();
            let mut labels = Vec::new();
            for (kind, name, data, index, attrs) in specs {
                let kind = KINDS[kind];
                let label = if data {
                    format!("data.{kind}.{name}")
                } else {
                    format!("{kind}.{name}")
                };
                let address = match index {
                    Some(i) => format!("{label}[{i}]"),
                    None => label.clone(),
                };
                let values: Map<String, Value> = attrs
                    .into_iter()
                    .map(|(k, v)| (ATTRIBUTES[k].to_owned(), v))
                    .collect();
                resources.push(resource(&address, Value::Object(values)));
                labels.push(label);
            }
            let depends: Vec<(String, String)> = edges
                .into_iter()
                .filter(|_| !labels.is_empty())
                .map(|(a, b)| {
                    (
                        labels[a % labels.len()].clone(),
                        labels[b % labels.len()].clone(),
                    )
                })
                .collect();
            let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
            let depend_refs: Vec<(&str, &str)> = depends
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let graph_dot = graph(&label_refs, &depend_refs);
            let show_json = if as_plan {
                json!({"prior_state": {"values": {"root_module": {"resources": resources.clone()}}},
                       "planned_values": {"root_module": {"resources": resources}}})
            } else {
                json!({"values": {"root_module": {"resources": resources}}})
            }
            .to_string();
            Plausible {
                show_json,
                graph_dot,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(show in prop::collection::vec(any::<u8>(), 0..200),
                    dot in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = run(&String::from_utf8_lossy(&show), &String::from_utf8_lossy(&dot));
    }

    #[test]
    fn random_json(show in any_json(), dot in "\\PC{0,80}") {
        let _ = run(&show.to_string(), &dot);
        let _ = run(&show.to_string(), "digraph { a -> b }");
    }

    #[test]
    fn truncated_documents(doc in plausible(), cut_show in any::<prop::sample::Index>(),
                           cut_dot in any::<prop::sample::Index>()) {
        let show: String = doc.show_json.chars().take(cut_show.index(doc.show_json.len() + 1)).collect();
        let dot: String = doc.graph_dot.chars().take(cut_dot.index(doc.graph_dot.len() + 1)).collect();
        let _ = run(&show, &dot);
        let _ = run(&show, &doc.graph_dot);
    }

    #[test]
    fn plausible_documents_convert_or_fail_cleanly(doc in plausible()) {
        if let Ok(converted) = run(&doc.show_json, &doc.graph_dot) {
            let mut agent_names = HashSet::new();
            let mut slugs = HashSet::new();
            for resource in &converted.resources {
                prop_assert!(!["coder_agent", "coder_app", "coder_metadata", "coder_script",
                               "coder_agent_instance"].contains(&resource.kind.as_str()));
                for agent in &resource.agents {
                    // A counted host repeats its agents; distinct agents differ ignoring case.
                    agent_names.insert((agent.name.to_lowercase(), agent.id.clone()));
                    for app in &agent.apps {
                        prop_assert!(!app.slug.is_empty());
                        prop_assert!(app.slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
                        slugs.insert(app.slug.clone());
                    }
                }
            }
            let lowered: HashSet<&String> = agent_names.iter().map(|(name, _)| name).collect();
            prop_assert_eq!(lowered.len(), agent_names.len());
            let mut seen = HashSet::new();
            for parameter in &converted.parameters {
                prop_assert!(seen.insert(parameter.name.clone()), "duplicate parameter");
            }
        }
    }
}
