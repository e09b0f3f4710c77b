//! Script ordering end to end: a template's `coder_script_order` rules go through the real
//! terraform, the converter, coderd's storage and the manifest to the real agent, which runs
//! the scripts in the order the rules ask for. The agent's own log timestamps prove it. The
//! same workspace declares a dev container, which the agent reports it cannot start.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use codersdk::workspaces::WorkspaceAgentLog;
use testutil::eventually;

use crate::harness::Deployment;
use crate::terraform::{Reaper, push_local_process_with, terraform};

/// Appended to the `local-process` example: three chained scripts, a failing one with a
/// `success` and a `completion` dependant, and a dev container.
const ORDERED: &str = r#"
locals {
  step = "echo \"start-$NAME\"; sleep 1; echo \"end-$NAME\""
}

resource "coder_script" "third" {
  agent_id     = coder_agent.main.id
  display_name = "third"
  script       = "NAME=third; ${local.step}"
  run_on_start = true
}

resource "coder_script" "first" {
  agent_id     = coder_agent.main.id
  display_name = "first"
  script       = "NAME=first; ${local.step}"
  run_on_start = true
}

resource "coder_script" "second" {
  agent_id     = coder_agent.main.id
  display_name = "second"
  script       = "NAME=second; ${local.step}"
  run_on_start = true
}

resource "coder_script" "broken" {
  agent_id     = coder_agent.main.id
  display_name = "broken"
  script       = "echo breaking; exit 3"
  run_on_start = true
}

resource "coder_script" "needs_broken" {
  agent_id     = coder_agent.main.id
  display_name = "needs-broken"
  script       = "echo ran-needs-broken"
  run_on_start = true
}

resource "coder_script" "after_broken" {
  agent_id     = coder_agent.main.id
  display_name = "after-broken"
  script       = "echo ran-after-broken"
  run_on_start = true
}

data "coder_script_order" "startup" {
  rule {
    run   = ["coder_script.second"]
    after = ["coder_script.first"]
  }
  rule {
    run   = ["coder_script.third"]
    after = ["coder_script.second"]
  }
  rule {
    run   = ["coder_script.needs_broken"]
    after = ["coder_script.broken"]
  }
  rule {
    run      = ["coder_script.after_broken"]
    after    = ["coder_script.broken"]
    requires = "completion"
  }
}

resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/workspace/repo"
}
"#;

/// Downloading `coder` into the workspace and connecting is slow on a loaded machine.
const AGENT_START: Duration = Duration::from_secs(150);

/// Every log line of the agent, by the display name of its source.
async fn logs_by_source(
    d: &Deployment,
    agent: uuid::Uuid,
) -> anyhow::Result<HashMap<String, Vec<WorkspaceAgentLog>>> {
    let details = d.owner.workspace_agent(agent).await?;
    let names: HashMap<uuid::Uuid, String> = details
        .log_sources
        .iter()
        .map(|s| (s.id, s.display_name.clone()))
        .collect();
    let mut out: HashMap<String, Vec<WorkspaceAgentLog>> = HashMap::new();
    for line in d.owner.workspace_agent_logs(agent).await? {
        let name = names.get(&line.source_id).cloned().unwrap_or_default();
        out.entry(name).or_default().push(line);
    }
    Ok(out)
}

/// When the script `name` logged `output`.
fn logged_at(
    logs: &HashMap<String, Vec<WorkspaceAgentLog>>,
    name: &str,
    output: &str,
) -> anyhow::Result<DateTime<Utc>> {
    logs.get(name)
        .and_then(|lines| lines.iter().find(|l| l.output == output))
        .map(|l| l.created_at)
        .with_context(|| format!("{name} never logged {output:?}: {logs:#?}"))
}

fn has_line(logs: &HashMap<String, Vec<WorkspaceAgentLog>>, name: &str, needle: &str) -> bool {
    logs.get(name)
        .is_some_and(|lines| lines.iter().any(|l| l.output.contains(needle)))
}

#[tokio::test(flavor = "multi_thread")]
async fn ordered_scripts_run_in_order_and_failures_skip_success_dependants() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces = d.dir.path().join("workspaces");
    push_local_process_with(&d, "ordered", &workspaces, ORDERED)?;

    d.ok(&["create", "dev", "-t", "ordered", "--yes"])?;
    let ws = d.workspace("dev").await?;
    let _reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );
    let agent = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .next()
        .map(|a| a.id)
        .context("the workspace has an agent")?;

    // A failed script and a skipped one: the start is an error, not ready.
    eventually(AGENT_START, "the agent's start to end", || async {
        Ok(d.owner
            .workspace_agent(agent)
            .await
            .is_ok_and(|a| a.lifecycle_state == "start_error"))
    })
    .await?;
    // The last lines reach coderd within a flush or two of the state change.
    eventually(Duration::from_secs(10), "every script's logs", || async {
        let logs = logs_by_source(&d, agent).await?;
        Ok(has_line(&logs, "third", "end-third")
            && has_line(&logs, "after-broken", "ran-after-broken"))
    })
    .await?;
    let logs = logs_by_source(&d, agent).await?;

    // first → second → third, by the agent's own timestamps.
    let first_end = logged_at(&logs, "first", "end-first")?;
    let second_start = logged_at(&logs, "second", "start-second")?;
    let second_end = logged_at(&logs, "second", "end-second")?;
    let third_start = logged_at(&logs, "third", "start-third")?;
    assert!(
        second_start >= first_end,
        "{second_start} before {first_end}"
    );
    assert!(
        third_start >= second_end,
        "{third_start} before {second_end}"
    );
    assert!(
        has_line(
            &logs,
            "second",
            "waiting for \"first\" (coder_script.first) to finish"
        ),
        "{logs:#?}"
    );
    assert!(
        has_line(
            &logs,
            "third",
            "waiting for \"second\" (coder_script.second) to finish"
        ),
        "{logs:#?}"
    );

    // The failure skipped its `success` dependant and not its `completion` one.
    assert!(has_line(&logs, "broken", "exit status 3"), "{logs:#?}");
    assert!(
        !has_line(&logs, "needs-broken", "ran-needs-broken"),
        "{logs:#?}"
    );
    assert!(
        has_line(
            &logs,
            "needs-broken",
            "skipped: it requires its prerequisites to succeed, and \"broken\" \
             (coder_script.broken) failed"
        ),
        "{logs:#?}"
    );
    assert!(logged_at(&logs, "after-broken", "ran-after-broken").is_ok());

    // No container engine here: the dev container says it cannot start, where users look.
    assert!(
        has_line(
            &logs,
            "Dev container repo",
            "dev container \"repo\" (/workspace/repo) cannot start"
        ),
        "{logs:#?}"
    );

    d.ok(&["delete", "dev", "--yes"])?;
    Ok(())
}
