//! A user's secret reaching the build of a template that declares it, through the real
//! `coder` binary and the real terraform: the template derives facts from the value (its
//! SHA-256 and length) that the API then shows, while the value itself is in no job log, no
//! API answer and no row of the database. A start build without the secret fails with the
//! provider's error. And a template with an AI task, an external agent and a dev container
//! shows them as Coder does, and `coder external-workspaces agent-instructions` prints what
//! starts its external agent.

use anyhow::{Context as _, ensure};
use codersdk::workspaces::{WorkspaceBuild, WorkspaceStatus};
use reqwest::Method;
use sha2::{Digest, Sha256};

use crate::harness::Deployment;
use crate::terraform::{push_with_provider as push, terraform};

const VALUE: &str = "e2e-s3cret-7c1f9b2a";

const SECRET_TEMPLATE: &str = r#"
data "coder_workspace" "me" {}

data "coder_secret" "token" {
  env          = "E2E_TOKEN"
  help_message = "Create a secret with env_name E2E_TOKEN."
}

resource "terraform_data" "probe" {
  count = data.coder_workspace.me.start_count
  input = "probe"
}

resource "coder_metadata" "probe" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.probe[0].id
  item {
    key   = "sha256"
    value = nonsensitive(sha256(data.coder_secret.token.value))
  }
  item {
    key   = "length"
    value = nonsensitive(length(data.coder_secret.token.value))
  }
}
"#;

/// Every row of every table as text, bytea as hex.
pub(crate) async fn database_text(d: &Deployment) -> anyhow::Result<String> {
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'")
            .fetch_all(&d._db.pool)
            .await?;
    let mut all = String::new();
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT t::text FROM \"{table}\" t"
        )))
        .fetch_all(&d._db.pool)
        .await?;
        all.push_str(&rows.join("\n"));
    }
    Ok(all)
}

async fn logs(d: &Deployment, build: &WorkspaceBuild) -> anyhow::Result<String> {
    Ok(d.owner
        .workspace_build_logs(build.id)
        .await?
        .iter()
        .map(|l| format!("[{}] {}: {}\n", l.log_level, l.stage, l.output))
        .collect())
}

async fn get_text(d: &Deployment, path: &str) -> anyhow::Result<String> {
    Ok(d.owner
        .request(Method::GET, path)?
        .send()
        .await?
        .text()
        .await?)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declared_secret_reaches_terraform_and_nothing_else() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "secrets", SECRET_TEMPLATE)?;
    // Through the CLI, the value on standard input.
    let out = d.with_stdin(
        &["secrets", "create", "e2e", "--env_name", "E2E_TOKEN"],
        &format!("{VALUE}\n"),
    )?;
    ensure!(out.status.success(), "{out:?}");
    let listed = d.ok(&["secrets", "list"])?;
    ensure!(
        listed.contains("E2E_TOKEN") && !listed.contains(VALUE),
        "{listed}"
    );

    d.ok(&["create", "holder", "-t", "secrets", "--yes"])?;
    let ws = d.workspace("holder").await?;
    let build = ws.latest_build.clone();
    ensure!(
        build.status == WorkspaceStatus::Running,
        "{:?}",
        build.status
    );
    let probe = build
        .resources
        .iter()
        .find(|r| r.name == "probe")
        .with_context(|| format!("no probe in {:#?}", build.resources))?;
    let item = |key: &str| {
        probe
            .metadata
            .iter()
            .find(|m| m.key == key)
            .map(|m| m.value.clone())
    };
    // What terraform computed from the value proves the value reached it.
    assert_eq!(
        item("sha256"),
        Some(hex::encode(Sha256::digest(VALUE.as_bytes())))
    );
    assert_eq!(item("length"), Some(VALUE.len().to_string()));

    // Not in the job's logs, not in any answer about the workspace, its build, its state,
    // the version, or the secrets.
    let logs = logs(&d, &build).await?;
    ensure!(logs.contains("coder_secret"), "the read is logged: {logs}");
    assert!(!logs.contains(VALUE), "{logs}");
    let version = build.template_version_id;
    let mut answers = String::new();
    for path in [
        format!("/api/v2/workspaces/{}", ws.id),
        format!("/api/v2/workspacebuilds/{}", build.id),
        format!("/api/v2/workspacebuilds/{}/state", build.id),
        format!("/api/v2/workspacebuilds/{}/resources", build.id),
        format!("/api/v2/workspacebuilds/{}/logs", build.id),
        format!("/api/v2/templateversions/{version}"),
        format!("/api/v2/templateversions/{version}/resources"),
        "/api/v2/users/me/secrets".into(),
        "/api/v2/users/me/secrets/e2e".into(),
    ] {
        answers.push_str(&get_text(&d, &path).await?);
    }
    ensure!(answers.contains("E2E_TOKEN"), "the answers were read");
    assert!(!answers.contains(VALUE), "{answers}");
    // Nor anywhere in the database, in text or in bytes.
    let stored = database_text(&d).await?;
    ensure!(stored.contains("E2E_TOKEN"), "the database was read");
    assert!(!stored.contains(VALUE));
    assert!(!stored.contains(&hex::encode(VALUE)));

    // Without the secret, a start build fails with the provider's error and help message.
    d.ok(&["secrets", "delete", "e2e"])?;
    let out = d.run(&["create", "lacking", "-t", "secrets", "--yes"])?;
    ensure!(!out.status.success(), "{out:?}");
    let failed = d.workspace("lacking").await?.latest_build;
    assert_eq!(failed.status, WorkspaceStatus::Failed);
    let logs = self::logs(&d, &failed).await?;
    assert!(
        logs.contains(r#"Missing required secret: environment variable "E2E_TOKEN""#),
        "{logs}"
    );
    assert!(
        logs.contains("Create a secret with env_name E2E_TOKEN."),
        "{logs}"
    );
    // A stop build does not need it.
    d.ok(&["stop", "holder", "--yes"])?;
    Ok(())
}

const FEATURES_TEMPLATE: &str = r#"
data "coder_workspace" "me" {}

resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}

resource "terraform_data" "vm" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id
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

resource "coder_external_agent" "elsewhere" {
  count    = data.coder_workspace.me.start_count
  agent_id = coder_agent.main.id
}

resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/repo"
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn ai_tasks_external_agents_and_dev_containers_show_as_coder_shows_them() -> anyhow::Result<()>
{
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "features", FEATURES_TEMPLATE)?;
    d.ok(&["create", "tasked", "-t", "features", "--yes"])?;
    let ws = d.workspace("tasked").await?;
    let build = ws.latest_build;
    let version = d.owner.template_version(build.template_version_id).await?;
    assert!(version.has_external_agent);
    assert_eq!(build.has_ai_task, Some(true));
    assert_eq!(build.has_external_agent, Some(true));
    let agent = build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .find(|a| a.name == "main")
        .context("the agent")?;
    assert_eq!(agent.parent_id, None);
    let chat = agent
        .apps
        .iter()
        .find(|a| a.slug == "chat")
        .context("the chat app")?;
    assert_eq!(build.ai_task_sidebar_app_id, Some(chat.id));

    let containers: serde_json::Value = d
        .owner
        .get(&format!("/api/v2/workspaceagents/{}/containers", agent.id))
        .await?;
    let devcontainer = &containers["devcontainers"][0];
    assert_eq!(devcontainer["name"], "repo");
    assert_eq!(devcontainer["workspace_folder"], "/repo");
    assert_eq!(devcontainer["status"], "error");
    assert!(
        devcontainer["error"]
            .as_str()
            .is_some_and(|e| e.contains("container engine")),
        "{containers}"
    );
    assert_eq!(containers["containers"], serde_json::json!([]));

    // The external agent's instructions: its token, and the command that starts it.
    let json: serde_json::Value = serde_json::from_str(&d.ok(&[
        "external-workspaces",
        "agent-instructions",
        "tasked.main",
        "--output",
        "json",
    ])?)?;
    assert_eq!(json["auth_type"], "token");
    let token = json["auth_token"].as_str().context("a token")?;
    let command = json["init_script"].as_str().context("a command")?;
    assert!(!token.is_empty());
    assert!(
        command.contains("/api/v2/init-script/linux/amd64")
            && command.ends_with(&format!("| CODER_AGENT_TOKEN=\"{token}\" sh")),
        "{command}"
    );
    let text = d.ok(&["external-workspaces", "agent-instructions", "tasked"])?;
    assert!(text.contains(command), "{text}");

    // A stop build has no task.
    d.ok(&["stop", "tasked", "--yes"])?;
    let stopped = d.workspace("tasked").await?.latest_build;
    assert_eq!(stopped.has_ai_task, Some(false));
    Ok(())
}
