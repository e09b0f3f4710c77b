//! `coder_agent` and the resources that attach to it, planned and applied for real.

use anyhow::Result;

use crate::harness::{Tf, planned_change, resources, str_of, values};

const CONFIG: &str = r#"
data "coder_workspace" "me" {}

resource "coder_agent" "main" {
  count          = data.coder_workspace.me.start_count
  os             = "linux"
  arch           = "amd64"
  dir            = "/home/coder"
  startup_script = "echo hello"
  env = {
    GIT_AUTHOR_NAME = "alice"
  }
  metadata {
    key          = "load"
    display_name = "Load"
    script       = "cat /proc/loadavg"
    interval     = 10
    timeout      = 1
  }
  display_apps {
    vscode_insiders = true
    web_terminal    = false
  }
}

resource "coder_app" "code" {
  count        = data.coder_workspace.me.start_count
  agent_id     = coder_agent.main[0].id
  slug         = "code-server"
  display_name = "VS Code"
  url          = "http://localhost:13337/?folder=/home/coder"
  subdomain    = false
  healthcheck {
    url       = "http://localhost:13337/healthz"
    interval  = 5
    threshold = 6
  }
}

resource "coder_script" "dotfiles" {
  count        = data.coder_workspace.me.start_count
  agent_id     = coder_agent.main[0].id
  display_name = "Dotfiles"
  script       = "coder dotfiles -y"
  run_on_start = true
}

resource "coder_env" "editor" {
  count    = data.coder_workspace.me.start_count
  agent_id = coder_agent.main[0].id
  name     = "EDITOR"
  value    = "vim"
}

resource "coder_agent_instance" "vm" {
  count       = data.coder_workspace.me.start_count
  agent_id    = coder_agent.main[0].id
  instance_id = "i-123"
}

resource "terraform_data" "vm" {
  count = data.coder_workspace.me.start_count
  provisioner "local-exec" {
    command = "printf '%s' \"$TOKEN\" > token.txt && printf '%s' \"$INIT\" > init.txt"
    environment = {
      TOKEN = coder_agent.main[0].token
      INIT  = coder_agent.main[0].init_script
    }
  }
}

resource "coder_metadata" "vm" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.vm[0].id
  daily_cost  = 10
  item {
    key   = "region"
    value = "eu"
  }
  item {
    key = "unset"
  }
}
"#;

#[test]
fn agent_and_attached_resources_plan_and_apply() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    tf.env("CODER_AGENT_URL", "https://coder.test:8443/some/path")
        .env(
            "CODER_AGENT_SCRIPT_linux_amd64",
            "curl -fsSL ${ACCESS_URL}bin/coder-linux-amd64 | CODER_AGENT_AUTH=${AUTH_TYPE} sh",
        );
    tf.init()?;
    tf.plan(&[])?;

    let plan = tf.show_plan()?;
    let agent_change = planned_change(&plan, "coder_agent.main[0]");
    for computed in ["id", "token", "init_script"] {
        assert_eq!(
            agent_change["after_unknown"][computed], true,
            "{computed} should be unknown in the plan"
        );
    }
    assert_eq!(agent_change["after_sensitive"]["token"], true);
    assert_eq!(
        agent_change["after"]["auth"], "token",
        "defaults are planned"
    );
    assert_eq!(agent_change["after"]["connection_timeout"], 120);
    let apps = &agent_change["after"]["display_apps"][0];
    assert_eq!(apps["vscode"], true);
    assert_eq!(apps["vscode_insiders"], true);
    assert_eq!(apps["web_terminal"], false);

    tf.apply()?;
    let state = tf.show_state()?;
    let agent = values(&state, "coder_agent.main[0]")?;
    let id = str_of(&agent, "id")?;
    let token = str_of(&agent, "token")?;
    assert!(uuid::Uuid::parse_str(id).is_ok());
    assert!(uuid::Uuid::parse_str(token).is_ok());
    assert_eq!(
        str_of(&agent, "init_script")?,
        "curl -fsSL https://coder.test:8443/bin/coder-linux-amd64 | CODER_AGENT_AUTH=token sh"
    );
    assert_eq!(agent["env"]["GIT_AUTHOR_NAME"], "alice");
    assert_eq!(
        agent["metadata"][0]["order"], 0,
        "unset nested attributes are zero values"
    );

    // local-exec saw the same token and script the state has.
    assert_eq!(std::fs::read_to_string(tf.dir().join("token.txt"))?, token);
    assert_eq!(
        std::fs::read_to_string(tf.dir().join("init.txt"))?,
        str_of(&agent, "init_script")?
    );

    for attached in [
        "coder_app.code[0]",
        "coder_script.dotfiles[0]",
        "coder_env.editor[0]",
        "coder_agent_instance.vm[0]",
    ] {
        let v = values(&state, attached)?;
        assert_eq!(v["agent_id"], id, "{attached}");
        assert!(
            uuid::Uuid::parse_str(str_of(&v, "id")?).is_ok(),
            "{attached}"
        );
    }
    let app = values(&state, "coder_app.code[0]")?;
    assert_eq!(app["share"], "owner");
    assert_eq!(app["open_in"], "slim-window");
    assert_eq!(app["healthcheck"][0]["threshold"], 6);
    assert_eq!(
        values(&state, "coder_env.editor[0]")?["merge_strategy"],
        "replace"
    );
    let metadata = values(&state, "coder_metadata.vm[0]")?;
    assert_eq!(
        metadata["resource_id"],
        values(&state, "terraform_data.vm[0]")?["id"]
    );
    assert_eq!(metadata["item"][0]["is_null"], false);
    assert_eq!(metadata["item"][1]["is_null"], true);
    assert_eq!(metadata["item"][1]["value"], "");
    assert_eq!(
        resources(&state, "values")["coder_agent.main[0]"]["sensitive_values"]["token"],
        true
    );
    Ok(())
}

fn plan_error(config: &str) -> Result<String> {
    let tf = Tf::new(config)?;
    tf.init()?;
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false"])?;
    assert!(!output.status.success(), "plan should fail");
    Ok(String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn invalid_values_are_rejected_at_plan_time() -> Result<()> {
    let stderr = plan_error(
        r#"
resource "coder_agent" "main" {
  os   = "plan9"
  arch = "amd64"
}
"#,
    )?;
    assert!(
        stderr.contains(r#"expected os to be one of ["linux" "darwin" "windows"], got plan9"#),
        "{stderr}"
    );

    // A slug only known once variables are: checked when planning, not only when validating.
    let stderr = plan_error(
        r#"
variable "slug" {
  default = "Code_Server"
}
resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}
resource "coder_app" "code" {
  agent_id = coder_agent.main.id
  slug     = var.slug
}
"#,
    )?;
    assert!(stderr.contains(r#"invalid slug "Code_Server""#), "{stderr}");
    Ok(())
}
