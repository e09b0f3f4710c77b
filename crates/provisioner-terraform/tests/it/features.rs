//! Presets, AI tasks, external agents and dev containers on small synthetic states.

use codersdk::proto::{
    AiTask, EnvMergeStrategy, ExpirationPolicy, Prebuild, PresetParameter, Schedule, Scheduling,
};
use serde_json::{Value, json};

use crate::support::{agent, error_of, graph, hosted, plan, resource, run, state};

fn preset(name: &str, values: Value) -> Value {
    let mut values = values;
    values["name"] = json!(name);
    resource(&format!("data.coder_workspace_preset.{name}"), values)
}

fn parameter(name: &str) -> Value {
    resource(
        &format!("data.coder_parameter.{name}"),
        json!({"name": name, "type": "string", "optional": true}),
    )
}

#[test]
fn presets_carry_parameters_and_prebuild_settings() -> anyhow::Result<()> {
    let (show, dot) = hosted(
        agent("a"),
        vec![
            parameter("region"),
            parameter("size"),
            preset(
                "fast",
                json!({"default": true, "description": "Big", "icon": "/icon/rocket.svg",
                       "parameters": {"size": "xl", "region": "eu"},
                       "prebuilds": [{"instances": 2,
                                      "expiration_policy": [{"ttl": 86400}],
                                      "scheduling": [{"timezone": "Europe/Berlin",
                                                      "schedule": [{"cron": "* 8-18 * * 1-5", "instances": 4},
                                                                   {"cron": "* 19-23 * * 1-5", "instances": 1}]}]}]}),
            ),
            preset(
                "plain",
                json!({"default": false, "parameters": null, "prebuilds": []}),
            ),
        ],
    );
    let converted = run(&show, &dot)?;
    let presets = &converted.features.presets;
    assert_eq!(presets.len(), 2);
    let fast = &presets[0];
    assert_eq!(fast.name, "fast");
    assert!(fast.default);
    assert_eq!(fast.description, "Big");
    assert_eq!(fast.icon, "/icon/rocket.svg");
    assert_eq!(
        fast.parameters,
        [
            PresetParameter {
                name: "region".into(),
                value: "eu".into()
            },
            PresetParameter {
                name: "size".into(),
                value: "xl".into()
            },
        ]
    );
    assert_eq!(
        fast.prebuild,
        Some(Prebuild {
            instances: 2,
            expiration_policy: Some(ExpirationPolicy { ttl: 86400 }),
            scheduling: Some(Scheduling {
                timezone: "Europe/Berlin".into(),
                schedule: vec![
                    Schedule {
                        cron: "* 8-18 * * 1-5".into(),
                        instances: 4
                    },
                    Schedule {
                        cron: "* 19-23 * * 1-5".into(),
                        instances: 1
                    },
                ],
            }),
        })
    );
    let plain = &presets[1];
    assert!(!plain.default && plain.parameters.is_empty() && plain.prebuild.is_none());
    assert!(converted.warnings.is_empty());
    Ok(())
}

#[test]
fn unknown_preset_parameters_warn_and_stay() -> anyhow::Result<()> {
    let (show, dot) = hosted(
        agent("a"),
        vec![
            parameter("region"),
            preset(
                "gpu",
                json!({"parameters": {"region": "eu", "gpu": "a100", "vram": "80"}}),
            ),
        ],
    );
    let converted = run(&show, &dot)?;
    assert_eq!(converted.features.presets[0].parameters.len(), 3);
    assert_eq!(
        converted.warnings,
        [
            "coder_workspace_preset \"gpu\" defines preset values for at least one parameter \
             that is not defined by the template: \"gpu\" and \"vram\""
        ]
    );
    Ok(())
}

#[test]
fn one_default_preset_at_most_and_unique_names() {
    let (show, dot) = hosted(
        agent("a"),
        vec![
            preset("a", json!({"default": true})),
            preset("b", json!({"default": true})),
        ],
    );
    assert_eq!(
        error_of(&show, &dot),
        "a maximum of 1 coder_workspace_preset can be marked as default, but 2 are set"
    );
    let (show, dot) = hosted(
        agent("a"),
        vec![
            resource("data.coder_workspace_preset.one", json!({"name": "same"})),
            resource("data.coder_workspace_preset.two", json!({"name": "same"})),
        ],
    );
    assert_eq!(
        error_of(&show, &dot),
        "coder_workspace_preset names must be unique but \"same\" appears multiple times"
    );
}

#[test]
fn ai_tasks_and_external_agents_are_found() -> anyhow::Result<()> {
    let app = "7128be08-8722-44cb-bbe1-b5a391c4d94b";
    // The external agent hosts the agent: it is the only resource that depends on it.
    let resources = vec![
        resource("coder_agent.laptop", agent("a")),
        resource(
            "coder_external_agent.laptop",
            json!({"id": "x", "agent_id": "a"}),
        ),
        resource("coder_ai_task.task", json!({"id": "t1", "app_id": app})),
        resource(
            "coder_ai_task.legacy",
            json!({"id": "t2", "app_id": "", "sidebar_app": [{"id": "a2"}]}),
        ),
    ];
    let dot = graph(
        &[
            "coder_agent.laptop",
            "coder_external_agent.laptop",
            "coder_ai_task.task",
            "coder_ai_task.legacy",
        ],
        &[("coder_external_agent.laptop", "coder_agent.laptop")],
    );
    let converted = run(&state(resources), &dot)?;
    let external = converted
        .resources
        .iter()
        .find(|r| r.kind == "coder_external_agent")
        .map(|r| r.agents.iter().map(|a| a.name.clone()).collect::<Vec<_>>());
    assert_eq!(external, Some(vec!["laptop".to_owned()]));
    assert!(converted.features.has_ai_tasks && converted.features.has_external_agents);
    assert_eq!(
        converted.features.ai_tasks,
        [
            AiTask {
                id: "t1".into(),
                app_id: app.into()
            },
            AiTask {
                id: "t2".into(),
                app_id: "a2".into()
            },
        ]
    );
    Ok(())
}

#[test]
fn declared_but_absent_ai_tasks_still_count() -> anyhow::Result<()> {
    // count = 0 in this plan: no instance, but the graph still has the node.
    let dot = graph(
        &[
            "coder_agent.a",
            "null_resource.a",
            "module.claude.coder_ai_task.task",
        ],
        &[("null_resource.a", "coder_agent.a")],
    );
    let show = plan(
        vec![],
        vec![
            resource("coder_agent.a", agent("")),
            resource("null_resource.a", json!({})),
        ],
    );
    let converted = run(&show, &dot)?;
    assert!(converted.features.has_ai_tasks);
    assert!(converted.features.ai_tasks.is_empty());
    assert!(!converted.features.has_external_agents);
    Ok(())
}

#[test]
fn dev_containers_belong_to_their_agent_and_own_their_sub_agents_children() -> anyhow::Result<()> {
    let (show, dot) = hosted(
        agent("a"),
        vec![
            resource(
                "coder_devcontainer.repo",
                json!({"id": "dc", "agent_id": "a", "workspace_folder": "/repo",
                       "config_path": "/repo/.devcontainer/devcontainer.json", "subagent_id": "sub"}),
            ),
            resource(
                "coder_app.web",
                json!({"id": "app", "agent_id": "sub", "slug": "web", "url": "http://localhost:3000"}),
            ),
            resource(
                "coder_script.setup",
                json!({"agent_id": "sub", "display_name": "Setup", "script": "make", "run_on_start": true}),
            ),
            resource(
                "coder_env.mode",
                json!({"agent_id": "sub", "name": "MODE", "value": "dev"}),
            ),
            resource(
                "coder_script.host",
                json!({"agent_id": "a", "display_name": "Host", "script": "true", "run_on_start": true}),
            ),
        ],
    );
    let converted = run(&show, &dot)?;
    let agent = &converted.resources[0].agents[0];
    assert_eq!(agent.scripts.len(), 1, "the host script only");
    assert!(agent.apps.is_empty() && agent.extra_envs.is_empty());
    let [container] = agent.devcontainers.as_slice() else {
        anyhow::bail!("one dev container: {:?}", agent.devcontainers);
    };
    assert_eq!(
        (
            container.id.as_str(),
            container.name.as_str(),
            container.subagent_id.as_str()
        ),
        ("dc", "repo", "sub")
    );
    assert_eq!(container.workspace_folder, "/repo");
    assert_eq!(
        container.config_path,
        "/repo/.devcontainer/devcontainer.json"
    );
    assert_eq!(container.apps[0].slug, "web");
    assert_eq!(container.scripts[0].resource_address, "coder_script.setup");
    assert_eq!(container.envs[0].merge_strategy, EnvMergeStrategy::Replace);
    Ok(())
}

#[test]
fn at_plan_time_dev_containers_attach_by_graph_edges() -> anyhow::Result<()> {
    let dot = graph(
        &[
            "coder_agent.a",
            "null_resource.a",
            "coder_devcontainer.repo",
            "coder_app.web",
        ],
        &[
            ("null_resource.a", "coder_agent.a"),
            ("coder_devcontainer.repo", "coder_agent.a"),
            ("coder_app.web", "coder_devcontainer.repo"),
        ],
    );
    let show = plan(
        vec![],
        vec![
            resource(
                "coder_agent.a",
                json!({"os": "linux", "arch": "amd64", "auth": "token"}),
            ),
            resource("null_resource.a", json!({})),
            resource(
                "coder_devcontainer.repo",
                json!({"workspace_folder": "/repo"}),
            ),
            resource("coder_app.web", json!({"slug": "web"})),
        ],
    );
    let converted = run(&show, &dot)?;
    let agent = &converted.resources[0].agents[0];
    assert!(agent.apps.is_empty());
    assert_eq!(agent.devcontainers[0].apps[0].slug, "web");
    Ok(())
}
