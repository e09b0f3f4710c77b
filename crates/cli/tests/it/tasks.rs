//! `coder task` against a real server, daemon and terraform: the prompt given to `coder task
//! create` reaches the template through the `coder_task` data source (the template writes it
//! into a resource's metadata, which the API shows back), and the task is listed, shown,
//! refused on a template without a `coder_ai_task`, and deleted with its workspace.

use anyhow::ensure;

use crate::harness::Deployment;
use crate::terraform::{push_with_provider as push, terraform};

const PROMPT: &str = "Write the README, with \"quotes\" and a second line\nplease";

const TASK_TEMPLATE: &str = r#"
data "coder_workspace" "me" {}
data "coder_task" "me" {}

resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}

resource "coder_app" "chat" {
  agent_id = coder_agent.main.id
  slug     = "chat"
  url      = "http://localhost:3284"
}

resource "coder_ai_task" "task" {
  count  = data.coder_workspace.me.start_count
  app_id = coder_app.chat.id
}

resource "terraform_data" "vm" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id
}

resource "coder_metadata" "task" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.vm[0].id
  item {
    key   = "prompt"
    value = data.coder_task.me.prompt
  }
  item {
    key   = "enabled"
    value = tostring(data.coder_task.me.enabled)
  }
  item {
    key   = "task_id"
    value = data.coder_task.me.id
  }
  item {
    key   = "ai_task_prompt"
    value = coder_ai_task.task[0].prompt
  }
}
"#;

const PLAIN_TEMPLATE: &str = r#"
resource "terraform_data" "vm" {
  input = "plain"
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn coder_task_hands_the_prompt_to_the_template_and_manages_the_task() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "agentic", TASK_TEMPLATE)?;
    push(&d, "plain", PLAIN_TEMPLATE)?;

    let id = d
        .ok(&[
            "task",
            "create",
            PROMPT,
            "--template",
            "agentic",
            "--name",
            "readme",
            "-q",
        ])?
        .trim()
        .to_owned();
    ensure!(id.parse::<uuid::Uuid>().is_ok(), "{id}");

    // The build ran with the task: the template saw its id and prompt.
    let ws = d.workspace("readme").await?;
    let build = testutil::wait_build(&d.owner, ws.latest_build.id).await?;
    ensure!(build.job.error.is_empty(), "{}", build.job.error);
    let metadata: std::collections::HashMap<_, _> = build
        .resources
        .iter()
        .flat_map(|r| &r.metadata)
        .map(|m| (m.key.as_str(), m.value.as_str()))
        .collect();
    assert_eq!(metadata.get("prompt"), Some(&PROMPT), "{metadata:?}");
    assert_eq!(
        metadata.get("ai_task_prompt"),
        Some(&PROMPT),
        "{metadata:?}"
    );
    assert_eq!(metadata.get("enabled"), Some(&"true"), "{metadata:?}");
    assert_eq!(metadata.get("task_id"), Some(&id.as_str()), "{metadata:?}");
    assert_eq!(build.has_ai_task, Some(true));

    // Listed and shown, as a table and as JSON.
    let listed: serde_json::Value = serde_json::from_str(&d.ok(&["task", "list", "-o", "json"])?)?;
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed[0]["name"], "readme");
    assert_eq!(listed[0]["initial_prompt"], PROMPT);
    let table = d.ok(&["task", "list"])?;
    let header = table.lines().next().unwrap_or_default();
    for column in ["NAME", "STATUS", "STATE", "STATE CHANGED", "MESSAGE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(
        table.contains("readme") && table.contains("initializing"),
        "{table}"
    );
    assert_eq!(d.ok(&["task", "list", "-q"])?.trim(), id);
    assert!(
        d.ok(&["task", "list", "--status", "paused", "-q"])?
            .trim()
            .is_empty()
    );
    let shown: serde_json::Value =
        serde_json::from_str(&d.ok(&["task", "status", "readme", "-o", "json"])?)?;
    assert_eq!(shown["id"], id.as_str());
    assert_eq!(shown["status"], "initializing");
    assert_eq!(shown["current_state"]["message"], "Agent is connecting");
    let status = d.ok(&["task", "status", &format!("admin/{id}")])?;
    assert!(
        status
            .lines()
            .next()
            .unwrap_or_default()
            .contains("HEALTHY"),
        "{status}"
    );

    // A template without a coder_ai_task runs no tasks.
    let refused = d.run(&["task", "create", "do it", "--template", "plain"])?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("coder_ai_task"), "{stderr}");

    // Deleted, with its workspace.
    let deleted = d.ok(&["task", "delete", "readme", "--yes"])?;
    assert!(deleted.contains("Deleted task admin/readme"), "{deleted}");
    assert_eq!(d.ok(&["task", "list", "-o", "json"])?.trim(), "[]");
    testutil::eventually(
        std::time::Duration::from_secs(120),
        "the task's workspace deleted",
        || async { Ok(d.workspace("readme").await.is_err()) },
    )
    .await?;
    Ok(())
}
