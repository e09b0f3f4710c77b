//! The JSON shape of a conversion result. The echo engine, coderd's storage and the agent manifest
//! read these names, so a change to them should be a deliberate, reviewed snapshot update.

use serde_json::json;

use crate::support::{hosted, resource, run};

#[test]
fn converted_json_shape() -> anyhow::Result<()> {
    let (show, dot) = hosted(
        json!({"id": "agent-1", "os": "linux", "arch": "amd64", "auth": "token", "token": "secret",
               "dir": "/home/coder", "env": {"EDITOR": "vim"}, "connection_timeout": 120,
               "shutdown_script": "sync", "api_key_scope": "no_user_data",
               "metadata": [{"key": "load", "display_name": "Load", "script": "uptime",
                             "interval": 10, "timeout": 1, "order": 1}],
               "display_apps": [{"vscode": false, "vscode_insiders": false, "web_terminal": true,
                                 "ssh_helper": true, "port_forwarding_helper": false}]}),
        vec![
            resource(
                "coder_app.ide",
                json!({"id": "app-1", "agent_id": "agent-1", "slug": "ide", "display_name": "IDE",
                       "url": "http://localhost:8080", "share": "authenticated", "open_in": "tab",
                       "healthcheck": [{"url": "http://localhost:8080/health", "interval": 5,
                                        "threshold": 3}]}),
            ),
            resource(
                "coder_env.path",
                json!({"agent_id": "agent-1", "name": "PATH", "value": "/opt/bin",
                       "merge_strategy": "prepend"}),
            ),
            resource(
                "coder_script.hello",
                json!({"agent_id": "agent-1", "display_name": "Hello", "script": "echo hi",
                       "run_on_start": true}),
            ),
            resource(
                "data.coder_parameter.size",
                json!({"name": "size", "type": "number", "default": "2", "mutable": true,
                       "optional": true, "validation": [{"min": 1, "max": 8, "min_disabled": false,
                                                         "max_disabled": false}]}),
            ),
            resource("data.coder_external_auth.github", json!({"id": "github"})),
            resource(
                "coder_script.after_hello",
                json!({"agent_id": "agent-1", "display_name": "After", "script": "echo after",
                       "run_on_start": true}),
            ),
            resource(
                "data.coder_script_order.startup",
                json!({"rule": [{"run": ["coder_script.after_hello"],
                                 "after": ["coder_script.hello"], "requires": "completion"}]}),
            ),
            resource(
                "coder_devcontainer.repo",
                json!({"id": "dc-1", "agent_id": "agent-1", "workspace_folder": "/repo",
                       "config_path": "", "subagent_id": "sub-1"}),
            ),
            resource(
                "coder_env.in_container",
                json!({"agent_id": "sub-1", "name": "IN", "value": "container"}),
            ),
            resource(
                "coder_ai_task.task",
                json!({"id": "task-1", "app_id": "app-1", "prompt": "", "enabled": false}),
            ),
            resource(
                "data.coder_workspace_preset.fast",
                json!({"name": "fast", "default": true, "description": "Quick", "icon": "",
                       "parameters": {"size": "4"},
                       "prebuilds": [{"instances": 2,
                                      "expiration_policy": [{"ttl": 3600}],
                                      "scheduling": [{"timezone": "UTC",
                                                      "schedule": [{"cron": "* 8-18 * * 1-5",
                                                                    "instances": 3}]}]}]}),
            ),
        ],
    );
    insta::assert_json_snapshot!(run(&show, &dot)?);
    Ok(())
}
