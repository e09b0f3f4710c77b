//! `coder_workspace`, `coder_workspace_owner` and `coder_provisioner` under start and stop builds.

use anyhow::Result;

use crate::harness::{Tf, resources, str_of, values};

const CONFIG: &str = r#"
data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}
data "coder_provisioner" "me" {}
data "coder_workspace_tags" "custom" {
  tags = {
    "region" = "eu"
  }
}

resource "terraform_data" "dev" {
  count = data.coder_workspace.me.start_count
  input = "${data.coder_workspace_owner.me.name}/${data.coder_workspace.me.name}"
}
"#;

#[test]
fn start_creates_and_stop_destroys_counted_resources() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    tf.env("CODER_WORKSPACE_TRANSITION", "start")
        .env("CODER_WORKSPACE_NAME", "dev-box")
        .env("CODER_WORKSPACE_ID", "5a4b5bc6-0c39-4b43-9f33-000000000001")
        .env(
            "CODER_WORKSPACE_BUILD_ID",
            "5a4b5bc6-0c39-4b43-9f33-000000000002",
        )
        .env(
            "CODER_WORKSPACE_TEMPLATE_ID",
            "5a4b5bc6-0c39-4b43-9f33-000000000003",
        )
        .env("CODER_WORKSPACE_TEMPLATE_NAME", "docker")
        .env("CODER_WORKSPACE_TEMPLATE_VERSION", "v1")
        .env("CODER_WORKSPACE_OWNER", "alice")
        .env(
            "CODER_WORKSPACE_OWNER_ID",
            "5a4b5bc6-0c39-4b43-9f33-000000000004",
        )
        .env("CODER_WORKSPACE_OWNER_EMAIL", "alice@example.com")
        .env("CODER_WORKSPACE_OWNER_NAME", "Alice Liddell")
        .env("CODER_WORKSPACE_OWNER_SESSION_TOKEN", "session-secret")
        .env("CODER_WORKSPACE_OWNER_GROUPS", r#"["devs","ops"]"#)
        .env("CODER_AGENT_URL", "http://coder.test:7080");
    let state = tf.init_plan_apply()?;

    let workspace = values(&state, "data.coder_workspace.me")?;
    assert_eq!(workspace["transition"], "start");
    assert_eq!(workspace["start_count"], 1);
    assert_eq!(workspace["name"], "dev-box");
    assert_eq!(workspace["id"], "5a4b5bc6-0c39-4b43-9f33-000000000001");
    assert_eq!(workspace["template_name"], "docker");
    assert_eq!(workspace["template_version"], "v1");
    assert_eq!(workspace["access_url"], "http://coder.test:7080");
    assert_eq!(workspace["access_port"], 7080);
    assert_eq!(workspace["is_prebuild"], false);

    let owner = values(&state, "data.coder_workspace_owner.me")?;
    assert_eq!(owner["name"], "alice");
    assert_eq!(owner["email"], "alice@example.com");
    assert_eq!(owner["full_name"], "Alice Liddell");
    assert_eq!(owner["session_token"], "session-secret");
    assert_eq!(owner["groups"], serde_json::json!(["devs", "ops"]));
    assert_eq!(owner["id"], "5a4b5bc6-0c39-4b43-9f33-000000000004");
    let owner_resource = &resources(&state, "values")["data.coder_workspace_owner.me"];
    assert_eq!(owner_resource["sensitive_values"]["session_token"], true);

    let provisioner = values(&state, "data.coder_provisioner.me")?;
    assert_eq!(provisioner["os"], "linux");
    assert!(!str_of(&provisioner, "arch")?.is_empty());
    assert_eq!(
        values(&state, "terraform_data.dev[0]")?["input"],
        "alice/dev-box"
    );

    tf.env("CODER_WORKSPACE_TRANSITION", "stop");
    tf.plan(&[])?;
    tf.apply()?;
    let state = tf.show_state()?;
    let workspace = values(&state, "data.coder_workspace.me")?;
    assert_eq!(workspace["transition"], "stop");
    assert_eq!(workspace["start_count"], 0);
    assert!(!resources(&state, "values").contains_key("terraform_data.dev[0]"));
    Ok(())
}

#[test]
fn a_build_without_template_facts_fails_clearly() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    tf.env("CODER_WORKSPACE_BUILD_ID", "b");
    tf.init()?;
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false"])?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("CODER_WORKSPACE_TEMPLATE_ID is required"),
        "{stderr}"
    );
    Ok(())
}
