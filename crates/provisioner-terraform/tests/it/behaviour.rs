//! What the converter makes of inputs written for these tests, one rule at a time.

use codersdk::proto::{
    AgentAuth, AppOpenIn, AppSharingLevel, DisplayApps, EnvMergeStrategy, ParameterFormType,
    Resource,
};
use serde_json::json;

use crate::support::{agent, graph, hosted, plan, resource, run, state};

type TestResult = anyhow::Result<()>;

fn find<'a>(resources: &'a [Resource], name: &str) -> anyhow::Result<&'a Resource> {
    resources
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| anyhow::anyhow!("no resource {name} in {resources:#?}"))
}

#[test]
fn agents_go_to_the_nearest_dependent_then_the_smallest_label() -> TestResult {
    // b and c depend on the agent directly and tie; b has the smaller label. a is further away.
    let show = state(vec![
        resource("coder_agent.main", agent("a1")),
        resource("null_resource.a", json!({})),
        resource("null_resource.b", json!({})),
        resource("null_resource.c", json!({})),
    ]);
    let dot = graph(
        &[
            "coder_agent.main",
            "null_resource.a",
            "null_resource.b",
            "null_resource.c",
        ],
        &[
            ("null_resource.c", "coder_agent.main"),
            ("null_resource.b", "coder_agent.main"),
            ("null_resource.a", "null_resource.b"),
        ],
    );
    let converted = run(&show, &dot)?;
    let hosts: Vec<&str> = converted
        .resources
        .iter()
        .filter(|r| !r.agents.is_empty())
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(hosts, ["b"]);
    Ok(())
}

#[test]
fn agents_skip_data_sources_and_coder_resources_and_pass_through_them() -> TestResult {
    let show = state(vec![
        resource("coder_agent.main", agent("a1")),
        resource("coder_app.web", json!({"agent_id": "a1"})),
        resource("data.null_data_source.d", json!({})),
        resource("null_resource.far", json!({})),
    ]);
    let dot = graph(
        &[
            "coder_agent.main",
            "coder_app.web",
            "data.null_data_source.d",
            "null_resource.far",
        ],
        &[
            ("coder_app.web", "coder_agent.main"),
            ("data.null_data_source.d", "coder_agent.main"),
            ("null_resource.far", "data.null_data_source.d"),
        ],
    );
    let converted = run(&show, &dot)?;
    assert_eq!(converted.resources.len(), 1);
    assert_eq!(converted.resources[0].name, "far");
    assert_eq!(converted.resources[0].agents[0].apps[0].slug, "web");
    Ok(())
}

#[test]
fn agents_without_a_host_are_dropped() -> TestResult {
    let show = state(vec![
        resource("coder_agent.lonely", agent("a1")),
        resource("null_resource.other", json!({})),
    ]);
    let dot = graph(&["coder_agent.lonely", "null_resource.other"], &[]);
    let converted = run(&show, &dot)?;
    assert_eq!(converted.resources.len(), 1);
    assert!(converted.resources[0].agents.is_empty());
    Ok(())
}

#[test]
fn agent_attributes_and_defaults() -> TestResult {
    let (show, dot) = hosted(
        json!({
            "id": "a1", "os": "darwin", "arch": "arm64", "auth": "token", "token": "t",
            "dir": "/home/coder", "env": {"A": "1", "B": null},
            "connection_timeout": 30, "troubleshooting_url": "https://help", "motd_file": "/etc/motd",
            "order": 4, "startup_script": "make", "login_before_ready": false,
            "shutdown_script": "bye",
            "metadata": [{"key": "load", "display_name": "Load", "script": "uptime",
                          "interval": 10, "timeout": 2, "order": 1}],
            "resources_monitoring": [{"memory": [{"enabled": true, "threshold": 80}],
                                      "volume": [{"path": "/", "enabled": true, "threshold": 90}]}],
        }),
        vec![],
    );
    let converted = run(&show, &dot)?;
    let agent = &converted.resources[0].agents[0];
    assert_eq!(agent.name, "main");
    assert_eq!(
        (agent.operating_system.as_str(), agent.architecture.as_str()),
        ("darwin", "arm64")
    );
    assert_eq!(agent.auth, AgentAuth::Token("t".into()));
    assert_eq!(agent.env.get("A").map(String::as_str), Some("1"));
    assert_eq!(agent.env.get("B").map(String::as_str), Some(""));
    assert_eq!(agent.connection_timeout_seconds, 30);
    assert_eq!(agent.order, 4);
    assert_eq!(agent.metadata[0].interval, 10);
    assert_eq!(agent.display_apps, DisplayApps::default());
    // Passed on as written: a provider that predates the attribute leaves it empty.
    assert_eq!(agent.api_key_scope, "");
    assert_eq!(
        agent
            .resources_monitoring
            .memory
            .as_ref()
            .map(|m| m.threshold),
        Some(80)
    );
    assert_eq!(agent.resources_monitoring.volumes[0].path, "/");
    // login_before_ready = false is the old spelling of a blocking startup script.
    let startup = &agent.scripts[0];
    assert_eq!(startup.display_name, "Startup Script");
    assert!(startup.run_on_start && startup.start_blocks_login);
    assert_eq!(startup.log_path, "coder-startup-script.log");
    let shutdown = &agent.scripts[1];
    assert!(shutdown.run_on_stop && !shutdown.run_on_start);
    assert_eq!(shutdown.icon, "/emojis/25c0.png");
    Ok(())
}

#[test]
fn startup_script_behavior_wins_over_login_before_ready() -> TestResult {
    let (show, dot) = hosted(
        json!({"id": "a1", "startup_script": "x", "startup_script_behavior": "non-blocking",
               "login_before_ready": false}),
        vec![],
    );
    assert!(!run(&show, &dot)?.resources[0].agents[0].scripts[0].start_blocks_login);
    Ok(())
}

#[test]
fn agents_without_auth_use_a_token() -> TestResult {
    let (show, dot) = hosted(json!({"id": "a1"}), vec![]);
    let converted = run(&show, &dot)?;
    assert_eq!(
        converted.resources[0].agents[0].auth,
        AgentAuth::Token(String::new())
    );
    Ok(())
}

#[test]
fn instance_identity() -> TestResult {
    let identity = json!({"id": "a1", "auth": "aws-instance-identity"});
    let dot = graph(
        &[
            "coder_agent.main",
            "aws_instance.vm",
            "coder_agent_instance.i",
        ],
        &[
            ("aws_instance.vm", "coder_agent.main"),
            ("coder_agent_instance.i", "coder_agent.main"),
        ],
    );

    // The hosting VM's id, and its size.
    let show = state(vec![
        resource("coder_agent.main", identity.clone()),
        resource(
            "aws_instance.vm",
            json!({"id": "i-123", "instance_type": "t3.large"}),
        ),
    ]);
    let converted = run(&show, &dot)?;
    assert_eq!(converted.resources[0].instance_type, "t3.large");
    assert_eq!(
        converted.resources[0].agents[0].auth,
        AgentAuth::InstanceId("i-123".into())
    );

    // An explicit coder_agent_instance wins.
    let show = state(vec![
        resource("coder_agent.main", identity),
        resource("aws_instance.vm", json!({"id": "i-123"})),
        resource(
            "coder_agent_instance.i",
            json!({"agent_id": "a1", "instance_id": "i-999"}),
        ),
    ]);
    let converted = run(&show, &dot)?;
    assert_eq!(
        converted.resources.len(),
        1,
        "coder_agent_instance is not listed"
    );
    assert_eq!(
        converted.resources[0].agents[0].auth,
        AgentAuth::InstanceId("i-999".into())
    );

    // Token agents keep their token.
    let show = state(vec![
        resource("coder_agent.main", agent("a1")),
        resource("aws_instance.vm", json!({"id": "i-123"})),
        resource(
            "coder_agent_instance.i",
            json!({"agent_id": "a1", "instance_id": "i-999"}),
        ),
    ]);
    let converted = run(&show, &dot)?;
    assert_eq!(
        converted.resources[0].agents[0].auth,
        AgentAuth::Token("token-a1".into())
    );
    Ok(())
}

#[test]
fn children_attach_by_id_after_apply() -> TestResult {
    // No graph edges at all: ids alone decide.
    let show = state(vec![
        resource("coder_agent.one", agent("a1")),
        resource("coder_agent.two", agent("a2")),
        resource("null_resource.host", json!({})),
        resource(
            "coder_app.web",
            json!({"id": "app-1", "agent_id": "a2", "slug": "web", "display_name": "Web",
                   "share": "Authenticated", "open_in": "tab", "subdomain": true, "order": 2,
                   "group": "g", "hidden": true, "external": true, "command": "c", "url": "u",
                   "healthcheck": [{"url": "http://h", "interval": 5, "threshold": 6}]}),
        ),
        resource(
            "coder_env.e",
            json!({"agent_id": "a1", "name": "PATH", "value": "/x", "merge_strategy": "append"}),
        ),
        resource(
            "coder_script.s",
            json!({"agent_id": "a1", "display_name": "S", "script": "run", "cron": "* * * * *",
                   "run_on_start": true, "timeout": 60, "log_path": "s.log"}),
        ),
    ]);
    let dot = graph(
        &["coder_agent.one", "coder_agent.two", "null_resource.host"],
        &[
            ("null_resource.host", "coder_agent.one"),
            ("null_resource.host", "coder_agent.two"),
        ],
    );
    let converted = run(&show, &dot)?;
    let host = find(&converted.resources, "host")?;
    let (one, two) = (&host.agents[0], &host.agents[1]);
    assert!(one.apps.is_empty());
    let app = &two.apps[0];
    assert_eq!(app.id, "app-1");
    assert_eq!(app.display_name, "Web");
    assert_eq!(app.sharing_level, AppSharingLevel::Authenticated);
    assert_eq!(app.open_in, AppOpenIn::Tab);
    assert!(app.subdomain && app.hidden && app.external);
    assert_eq!(app.healthcheck.as_ref().map(|h| h.threshold), Some(6));
    assert_eq!(one.extra_envs[0].merge_strategy, EnvMergeStrategy::Append);
    assert_eq!(one.scripts[0].timeout_seconds, 60);
    assert_eq!(one.scripts[0].cron, "* * * * *");
    // coder_env is listed as a resource (Coder does), coder_app and coder_script are not.
    let kinds: Vec<&str> = converted
        .resources
        .iter()
        .map(|r| r.kind.as_str())
        .collect();
    assert_eq!(kinds, ["null_resource", "coder_env"]);
    Ok(())
}

#[test]
fn children_attach_by_graph_edge_at_plan_time() -> TestResult {
    // Ids are unknown in a plan: the attributes are simply absent.
    let planned = vec![
        resource("coder_agent.one", json!({"auth": "token"})),
        resource("coder_agent.two", json!({"auth": "token"})),
        resource("null_resource.host", json!({})),
        resource("coder_app.web", json!({"slug": "web"})),
        resource("coder_env.e", json!({"name": "E"})),
    ];
    let dot = graph(
        &[
            "coder_agent.one",
            "coder_agent.two",
            "null_resource.host",
            "coder_app.web",
            "coder_env.e",
        ],
        &[
            ("null_resource.host", "coder_agent.one"),
            ("null_resource.host", "coder_agent.two"),
            ("coder_app.web", "coder_agent.two"),
            ("coder_env.e", "coder_agent.one"),
        ],
    );
    let converted = run(&plan(vec![], planned), &dot)?;
    let host = find(&converted.resources, "host")?;
    assert_eq!(host.agents[0].auth, AgentAuth::Token(String::new()));
    assert_eq!(host.agents[1].apps[0].slug, "web");
    assert_eq!(
        host.agents[1].apps[0].display_name, "web",
        "display name defaults to the slug"
    );
    assert!(host.agents[1].apps[0].id.is_empty());
    assert_eq!(host.agents[0].extra_envs[0].name, "E");
    assert_eq!(
        host.agents[0].extra_envs[0].merge_strategy,
        EnvMergeStrategy::Replace
    );
    Ok(())
}

#[test]
fn modules_and_counted_resources() -> TestResult {
    let show = json!({"values": {"root_module": {
        "resources": [resource("coder_agent.main", agent("a1"))],
        "child_modules": [{"address": "module.vm[0]", "resources": [
            resource("module.vm[0].null_resource.box[0]", json!({})),
            resource("module.vm[0].null_resource.box[1]", json!({})),
        ]}],
    }}})
    .to_string();
    let dot = graph(
        &["coder_agent.main", "module.vm.null_resource.box"],
        &[("module.vm.null_resource.box", "coder_agent.main")],
    );
    let converted = run(&show, &dot)?;
    assert_eq!(converted.resources.len(), 2);
    for resource in &converted.resources {
        assert_eq!(resource.module_path, "module.vm[0]");
        assert_eq!(resource.agents.len(), 1, "every instance shows the agent");
    }
    Ok(())
}

#[test]
fn metadata_describes_the_nearest_dependency() -> TestResult {
    let show = state(vec![
        resource("null_resource.box", json!({"id": "r1"})),
        resource("null_resource.base", json!({"id": "r0"})),
        resource(
            "coder_metadata.m",
            json!({"resource_id": "r1", "hide": true, "icon": "/i.svg", "daily_cost": 7,
                   "item": [{"key": "a", "value": "1"}, {"key": "b", "is_null": true},
                            {"key": "c", "value": "s", "sensitive": true}]}),
        ),
    ]);
    let dot = graph(
        &[
            "null_resource.box",
            "null_resource.base",
            "coder_metadata.m",
        ],
        &[
            ("coder_metadata.m", "null_resource.box"),
            ("null_resource.box", "null_resource.base"),
        ],
    );
    let converted = run(&show, &dot)?;
    let described = find(&converted.resources, "box")?;
    assert!(described.hide);
    assert_eq!(described.daily_cost, 7);
    assert_eq!(described.icon, "/i.svg");
    let keys: Vec<&str> = described.metadata.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"]);
    assert!(described.metadata[1].is_null && described.metadata[2].sensitive);
    assert!(find(&converted.resources, "base")?.metadata.is_empty());
    Ok(())
}

#[test]
fn parameters() -> TestResult {
    let data = vec![
        resource(
            "data.coder_parameter.region",
            json!({"name": "region", "display_name": "Region", "description": "where", "type": "string",
                   "mutable": true, "default": "eu", "icon": "/eu.svg", "optional": true, "order": 2,
                   "ephemeral": false, "form_type": "dropdown",
                   "option": [{"name": "Europe", "value": "eu", "description": "", "icon": ""},
                              {"name": "US", "value": "us"}],
                   "validation": [{"regex": "^[a-z]+$", "error": "lowercase", "min": 0, "max": 0,
                                   "min_disabled": true, "max_disabled": true, "monotonic": ""}]}),
        ),
        // From a provider before *_disabled: min and max both zero mean no range.
        resource(
            "data.coder_parameter.old",
            json!({"name": "old", "type": "number", "validation": [{"min": 0, "max": 0}]}),
        ),
        resource(
            "data.coder_parameter.ranged",
            json!({"name": "ranged", "type": "number", "validation": [{"min": 0, "max": 5}]}),
        ),
        resource(
            "data.coder_parameter.flag",
            json!({"name": "flag", "type": "bool"}),
        ),
        resource(
            "data.coder_parameter.tags",
            json!({"name": "tags", "type": "list(string)"}),
        ),
        resource("data.coder_external_auth.gh", json!({"id": "github"})),
        resource(
            "data.coder_external_auth.gl",
            json!({"id": "gitlab", "optional": true}),
        ),
        resource(
            "data.coder_git_auth.gh2",
            json!({"id": "github", "optional": true}),
        ),
    ];
    let converted = run(&plan(data, vec![]), &graph(&[], &[]))?;
    let names: Vec<&str> = converted
        .parameters
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["region", "old", "ranged", "flag", "tags"]);

    let region = &converted.parameters[0];
    assert_eq!(region.form_type, ParameterFormType::Dropdown);
    assert_eq!(region.options[1].value, "us");
    assert_eq!((region.validation_min, region.validation_max), (None, None));
    assert_eq!(region.validation_regex, "^[a-z]+$");
    assert!(!region.required && region.mutable);
    assert_eq!(region.order, 2);

    let old = &converted.parameters[1];
    assert_eq!((old.validation_min, old.validation_max), (None, None));
    assert!(old.required);
    assert_eq!(old.form_type, ParameterFormType::Input);
    let ranged = &converted.parameters[2];
    assert_eq!(
        (ranged.validation_min, ranged.validation_max),
        (Some(0), Some(5))
    );
    assert_eq!(
        converted.parameters[3].form_type,
        ParameterFormType::Checkbox
    );
    assert_eq!(
        converted.parameters[4].form_type,
        ParameterFormType::TagSelect
    );

    let providers: Vec<(&str, bool)> = converted
        .external_auth_providers
        .iter()
        .map(|p| (p.id.as_str(), p.optional))
        .collect();
    assert_eq!(providers, [("github", true), ("gitlab", true)]);
    Ok(())
}

#[test]
fn plans_ignore_managed_resources_of_the_prior_state() -> TestResult {
    let show = json!({
        "prior_state": {"values": {"root_module": {"resources": [
            resource("null_resource.old", json!({})),
            resource("data.coder_parameter.p", json!({"name": "p", "type": "string"})),
        ]}}},
        "planned_values": {"root_module": {}},
    })
    .to_string();
    let converted = run(&show, &graph(&[], &[]))?;
    assert!(converted.resources.is_empty());
    assert_eq!(converted.parameters.len(), 1);
    Ok(())
}

#[test]
fn empty_documents_convert_to_nothing() -> TestResult {
    for show in ["{}", "{\"format_version\":\"1.0\"}"] {
        assert_eq!(run(show, "digraph {}")?, Default::default());
    }
    Ok(())
}
