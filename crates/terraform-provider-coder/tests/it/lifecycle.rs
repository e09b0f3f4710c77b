//! What happens to coder resources across builds: no-op replans, refresh, replacement and
//! destroy.

use anyhow::Result;

use crate::harness::{Tf, resources, str_of, values};

fn config(os: &str) -> String {
    format!(
        r#"
resource "coder_agent" "main" {{
  os   = "{os}"
  arch = "amd64"
}}

resource "coder_app" "web" {{
  agent_id = coder_agent.main.id
  slug     = "web"
  url      = "http://localhost:3000"
}}
"#
    )
}

#[test]
fn unchanged_config_plans_nothing_and_changes_force_replacement() -> Result<()> {
    let tf = Tf::new(&config("linux"))?;
    let state = tf.init_plan_apply()?;
    let first = values(&state, "coder_agent.main")?;
    let first_id = str_of(&first, "id")?.to_owned();

    // Nothing changed: terraform must find no differences (exit code 0, not 2).
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );

    // A refresh mints a new token but keeps the agent.
    tf.ok(&[
        "apply",
        "-no-color",
        "-input=false",
        "-auto-approve",
        "-refresh-only",
    ])?;
    let refreshed = values(&tf.show_state()?, "coder_agent.main")?;
    assert_eq!(refreshed["id"], first["id"]);
    assert_ne!(refreshed["token"], first["token"]);

    // Changing any argument replaces the agent and, through agent_id, its app.
    tf.write_config(&config("windows"))?;
    tf.plan(&[])?;
    let plan = tf.show_plan()?;
    for change in plan["resource_changes"].as_array().into_iter().flatten() {
        assert_eq!(
            change["change"]["actions"],
            serde_json::json!(["delete", "create"]),
            "{}",
            change["address"]
        );
    }
    let agent_change = plan["resource_changes"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["address"] == "coder_agent.main")
                .cloned()
        })
        .unwrap_or_default();
    assert_eq!(
        agent_change["action_reason"],
        "replace_because_cannot_update"
    );
    tf.apply()?;
    let replaced = values(&tf.show_state()?, "coder_agent.main")?;
    assert_eq!(replaced["os"], "windows");
    assert_ne!(str_of(&replaced, "id")?, first_id);

    tf.plan(&["-destroy"])?;
    tf.apply()?;
    assert!(resources(&tf.show_state()?, "values").is_empty());
    Ok(())
}

/// A state file as Terraform stored it for Coder's Go provider (values from Coder's
/// display-apps and multiple-agents-multiple-envs fixtures; `coder_env` predates
/// `merge_strategy`).
const GO_PROVIDER_STATE: &str = r#"{
  "version": 4,
  "terraform_version": "1.11.0",
  "serial": 1,
  "lineage": "2f0c0c3e-4a7e-4e8a-9b1e-6d1f3f0b7a10",
  "outputs": {},
  "resources": [
    {
      "mode": "managed",
      "type": "coder_agent",
      "name": "main",
      "provider": "provider[\"registry.terraform.io/coder/coder\"]",
      "instances": [
        {
          "schema_version": 1,
          "attributes": {"api_key_scope": "all", "arch": "amd64", "auth": "token", "connection_timeout": 120, "dir": null, "display_apps": [{"port_forwarding_helper": false, "ssh_helper": false, "vscode": false, "vscode_insiders": true, "web_terminal": true}], "env": null, "id": "c49a0e36-fd67-4946-a75f-ff52b77e9f95", "init_script": "", "metadata": [], "motd_file": null, "order": null, "os": "linux", "resources_monitoring": [], "shutdown_script": null, "startup_script": null, "startup_script_behavior": "non-blocking", "token": "d9775224-6ecb-4c53-b24d-931555a7c86a", "troubleshooting_url": null},
          "sensitive_attributes": []
        }
      ]
    },
    {
      "mode": "managed",
      "type": "coder_env",
      "name": "one",
      "provider": "provider[\"registry.terraform.io/coder/coder\"]",
      "instances": [
        {
          "schema_version": 1,
          "attributes": {"agent_id": "c49a0e36-fd67-4946-a75f-ff52b77e9f95", "id": "fd793e28-41fb-4d56-8b22-6a4ad905245a", "name": "ENV_1", "value": "Env 1"},
          "sensitive_attributes": [],
          "dependencies": ["coder_agent.main"]
        }
      ]
    }
  ]
}"#;

#[test]
fn states_written_by_the_go_provider_are_taken_over_unchanged() -> Result<()> {
    let tf = Tf::new(
        r#"
resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
  display_apps {
    vscode                 = false
    vscode_insiders        = true
    web_terminal           = true
    port_forwarding_helper = false
    ssh_helper             = false
  }
}

resource "coder_env" "one" {
  agent_id = coder_agent.main.id
  name     = "ENV_1"
  value    = "Env 1"
}
"#,
    )?;
    std::fs::write(tf.dir().join("terraform.tfstate"), GO_PROVIDER_STATE)?;
    tf.init()?;
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[test]
fn values_unknown_until_apply_are_resolved_consistently() -> Result<()> {
    // Unknown values inside a set block, a dynamic block with an unknown count and a refined
    // unknown (known prefix) must all come back from apply exactly as Terraform planned them.
    let tf = Tf::new(
        r#"
resource "terraform_data" "x" {
  input = true
}

resource "coder_agent" "main" {
  os             = "linux"
  arch           = "amd64"
  startup_script = "echo ${terraform_data.x.id}"
  display_apps {
    vscode = terraform_data.x.output
  }
  dynamic "metadata" {
    for_each = terraform_data.x.output ? ["a"] : []
    content {
      key      = metadata.value
      script   = "true"
      interval = 1
    }
  }
}

resource "coder_app" "a" {
  agent_id = coder_agent.main.id
  slug     = "a"
  url      = "http://localhost:${length(terraform_data.x.id)}/x"
}
"#,
    )?;
    let state = tf.init_plan_apply()?;
    let agent = values(&state, "coder_agent.main")?;
    assert_eq!(agent["display_apps"][0]["vscode"], true);
    assert_eq!(agent["display_apps"][0]["ssh_helper"], true);
    assert_eq!(agent["metadata"][0]["key"], "a");
    let id = str_of(&values(&state, "terraform_data.x")?, "id")?.to_owned();
    assert_eq!(agent["startup_script"], format!("echo {id}"));
    assert_eq!(
        values(&state, "coder_app.a")?["url"],
        format!("http://localhost:{}/x", id.len())
    );
    Ok(())
}
