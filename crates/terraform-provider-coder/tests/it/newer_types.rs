//! The types Coder's provider gained after the first twelve — presets with prebuilds,
//! secrets, dev containers, AI tasks, external agents, tasks and script ordering — validated,
//! planned and applied by the real terraform, plus the 2.17 `dir` warning and icon checks.

use anyhow::Result;

use crate::harness::{Tf, planned_change, values};

const CONFIG: &str = r#"
data "coder_workspace" "me" {}
data "coder_task" "me" {}

data "coder_parameter" "region" {
  name    = "region"
  default = "eu"
  icon    = "/icon/globe.svg"
}

data "coder_workspace_preset" "fast" {
  name        = "fast"
  description = "Eight cores near you"
  icon        = "/emojis/1f680.png"
  default     = true
  parameters = {
    region = "eu"
  }
  prebuilds {
    instances = 2
    expiration_policy {
      ttl = 86400
    }
    scheduling {
      timezone = "UTC"
      schedule {
        cron      = "* 8-18 * * 1-5"
        instances = 3
      }
      schedule {
        cron      = "* 19-23 * * 1-5"
        instances = 1
      }
    }
  }
}

data "coder_workspace_preset" "plain" {
  name = "plain"
}

data "coder_secret" "token" {
  env          = "GITHUB_TOKEN"
  help_message = "Add a GitHub token as a secret named GITHUB_TOKEN"
}

data "coder_secret" "aws" {
  file         = "~/.aws/credentials"
  help_message = "Add your AWS credentials"
}

resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
  dir  = "/workspace"
}

resource "coder_app" "chat" {
  agent_id = coder_agent.main.id
  slug     = "chat"
  url      = "http://localhost:3284"
  icon     = "/icon/claude.svg"
}

resource "coder_ai_task" "task" {
  app_id = coder_app.chat.id
}

resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/workspace/repo"
  config_path      = "/workspace/repo/.devcontainer/devcontainer.json"
}

resource "coder_external_agent" "laptop" {
  agent_id = coder_agent.main.id
}

resource "coder_script" "clone" {
  agent_id     = coder_agent.main.id
  display_name = "clone"
  script       = "git clone x"
  run_on_start = true
}

resource "coder_script" "install" {
  agent_id     = coder_agent.main.id
  display_name = "install"
  script       = "make install"
  run_on_start = true
}

data "coder_script_order" "startup" {
  rule {
    run   = ["coder_script.install"]
    after = ["coder_script.clone"]
  }
  rule {
    run      = ["coder_script.install"]
    after    = ["coder_script.clone"]
    requires = "completion"
    phase    = "start"
  }
}

resource "terraform_data" "vm" {
  input = [coder_agent.main.id, coder_devcontainer.repo.subagent_id]
}
"#;

const TASK: &str = "0d2a4b8e-2f0e-4c1a-9b53-6d4a1c2e9f10";

fn build_env(tf: &mut Tf) {
    tf.env("CODER_WORKSPACE_TRANSITION", "start")
        .env(
            "CODER_WORKSPACE_BUILD_ID",
            "5a4b5bc6-0c39-4b43-9f33-000000000002",
        )
        .env(
            "CODER_WORKSPACE_TEMPLATE_ID",
            "5a4b5bc6-0c39-4b43-9f33-000000000003",
        )
        .env("CODER_WORKSPACE_TEMPLATE_NAME", "tasks")
        .env("CODER_WORKSPACE_TEMPLATE_VERSION", "v1")
        .env("CODER_TASK_ID", TASK)
        .env("CODER_TASK_PROMPT", "fix the flaky test")
        .env("CODER_SECRET_ENV_GITHUB_TOKEN", "ghp_secret")
        .env(
            &format!("CODER_SECRET_FILE_{}", hex::encode("~/.aws/credentials")),
            "[default]",
        );
}

#[test]
fn every_newer_type_validates_plans_and_applies() -> Result<()> {
    let mut tf = Tf::new(CONFIG)?;
    build_env(&mut tf);
    tf.init()?;
    let (validate, _) = tf.run(&["validate", "-no-color"])?;
    let out = String::from_utf8_lossy(&validate.stdout).into_owned();
    assert!(validate.status.success(), "{out}");
    // Validation sees the dir warnings of provider 2.17.
    assert!(out.contains(r#""dir" is deprecated"#), "{out}");

    tf.plan(&[])?;
    let task_plan = planned_change(&tf.show_plan()?, "coder_ai_task.task");
    for computed in ["id", "prompt", "enabled"] {
        assert_eq!(task_plan["after_unknown"][computed], true, "{computed}");
    }

    tf.apply()?;
    let state = tf.show_state()?;

    let preset = values(&state, "data.coder_workspace_preset.fast")?;
    assert_eq!(preset["id"], "fast");
    assert_eq!(preset["default"], true);
    assert_eq!(preset["parameters"]["region"], "eu");
    let prebuilds = &preset["prebuilds"][0];
    assert_eq!(prebuilds["instances"], 2);
    assert_eq!(prebuilds["expiration_policy"][0]["ttl"], 86400);
    assert_eq!(prebuilds["scheduling"][0]["timezone"], "UTC");
    assert_eq!(
        prebuilds["scheduling"][0]["schedule"][1]["cron"],
        "* 19-23 * * 1-5"
    );
    let plain = values(&state, "data.coder_workspace_preset.plain")?;
    assert_eq!(plain["default"], false);
    assert_eq!(plain["prebuilds"], serde_json::json!([]));

    let token = values(&state, "data.coder_secret.token")?;
    assert_eq!(token["id"], "env:GITHUB_TOKEN");
    assert_eq!(token["value"], "ghp_secret");
    let aws = values(&state, "data.coder_secret.aws")?;
    assert_eq!(aws["id"], "file:~/.aws/credentials");
    assert_eq!(aws["value"], "[default]");

    let app = values(&state, "coder_app.chat")?;
    let task = values(&state, "coder_ai_task.task")?;
    assert_eq!(task["id"], TASK);
    assert_eq!(task["enabled"], true);
    assert_eq!(task["prompt"], "fix the flaky test");
    assert_eq!(task["app_id"], app["id"]);
    let task_data = values(&state, "data.coder_task.me")?;
    assert_eq!(task_data["id"], TASK);
    assert_eq!(task_data["enabled"], true);

    let devcontainer = values(&state, "coder_devcontainer.repo")?;
    assert_eq!(devcontainer["workspace_folder"], "/workspace/repo");
    let subagent = devcontainer["subagent_id"].as_str().unwrap_or_default();
    assert!(uuid::Uuid::parse_str(subagent).is_ok(), "{devcontainer}");
    let external = values(&state, "coder_external_agent.laptop")?;
    assert_eq!(
        external["agent_id"],
        values(&state, "coder_agent.main")?["id"]
    );

    let order = values(&state, "data.coder_script_order.startup")?;
    assert_eq!(order["rule"][0]["requires"], "success");
    assert_eq!(order["rule"][0]["phase"], serde_json::Value::Null);
    assert_eq!(order["rule"][1]["requires"], "completion");
    assert_eq!(order["rule"][1]["run"][0], "coder_script.install");

    // Nothing changed: a second plan is empty.
    let (again, _) = tf.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"])?;
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    Ok(())
}

/// Runs `terraform plan` on `config` and returns its output, failing if the plan succeeds.
fn failed_plan(tf: &Tf) -> Result<String> {
    let (output, _) = tf.run(&["plan", "-no-color", "-input=false"])?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    anyhow::ensure!(!output.status.success(), "plan succeeded:\n{text}");
    Ok(text)
}

#[test]
fn a_missing_secret_fails_a_start_build_but_not_a_stop() -> Result<()> {
    let config = r#"
data "coder_secret" "token" {
  env          = "DOES_NOT_EXIST"
  help_message = "Please add the DOES_NOT_EXIST secret"
}
"#;
    let mut tf = Tf::new(config)?;
    tf.env("CODER_WORKSPACE_TRANSITION", "start")
        .env("CODER_WORKSPACE_BUILD_ID", "b1")
        .env("CODER_WORKSPACE_TEMPLATE_ID", "t")
        .env("CODER_WORKSPACE_TEMPLATE_NAME", "t")
        .env("CODER_WORKSPACE_TEMPLATE_VERSION", "v");
    tf.init()?;
    let out = failed_plan(&tf)?;
    for expected in [
        r#"Missing required secret: environment variable "DOES_NOT_EXIST""#,
        r#"Required: environment variable "DOES_NOT_EXIST""#,
        "Help message: Please add the DOES_NOT_EXIST secret",
        "To resolve: ensure a secret exposes the environment",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }
    tf.env("CODER_WORKSPACE_TRANSITION", "stop");
    tf.plan(&[])?;
    Ok(())
}

#[test]
fn invalid_configurations_get_the_go_providers_errors() -> Result<()> {
    let cases = [
        (
            r#"
data "coder_workspace_preset" "p" {
  name = "p"
  prebuilds {
    instances = 1
    scheduling {
      timezone = "UTC"
      schedule {
        cron      = "* 8-12 * * 1-5"
        instances = 1
      }
      schedule {
        cron      = "* 12-14 * * 1"
        instances = 1
      }
    }
  }
}
"#,
            "schedules overlap with each other: schedules overlap: * 8-12 * * 1-5 and * 12-14 * * 1",
        ),
        (
            r#"
data "coder_workspace_preset" "p" {
  name = "p"
  prebuilds {
    instances = 1
    scheduling {
      timezone = "Mars/Olympus"
      schedule {
        cron      = "* 8-12 * * 1-5"
        instances = 1
      }
    }
  }
}
"#,
            "unknown time zone Mars/Olympus",
        ),
        (
            r#"
data "coder_secret" "s" {
  env          = "MY-TOKEN"
  file         = "/x"
  help_message = "pick one"
}
"#,
            "POSIX-compliant",
        ),
        (
            r#"
data "coder_script_order" "o" {
  rule {
    run   = ["coder_script.a"]
    after = ["coder_script.b"]
    requires = "eventually"
  }
}
"#,
            r#"expected requires to be one of ["success" "completion"], got eventually"#,
        ),
        (
            r#"
resource "coder_agent" "a" {
  os   = "linux"
  arch = "amd64"
}
resource "coder_app" "x" {
  agent_id = coder_agent.a.id
  slug     = "x"
  icon     = ":nope"
}
"#,
            r#"parse ":nope": missing protocol scheme"#,
        ),
        (
            r#"
resource "coder_ai_task" "t" {
  app_id = "not-a-uuid"
}
"#,
            r#"expected "app_id" to be a valid UUID, got not-a-uuid"#,
        ),
    ];
    for (config, expected) in cases {
        let tf = Tf::new(config)?;
        tf.init()?;
        let out = failed_plan(&tf)?;
        // Terraform wraps long diagnostics; compare with whitespace collapsed.
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(expected), "{expected:?} not in:\n{out}");
    }
    Ok(())
}
