//! `coder task send` and `coder task logs`, and the API under them, against a real task: real
//! terraform and our provider build a `local-process` workspace whose real `coder agent` runs
//! an AgentAPI-compatible server as the task's app (fixtures/agentapi-task; a stand-in for
//! coder/agentapi, which no registry these machines reach distributes). Input goes from the
//! CLI through coderd and the relay into the app and comes back in the logs with the right
//! type; a busy agent, an unreachable app, a stopped workspace, an empty input and a caller
//! who may not see the task are refused as Coder refuses them, no credential of the caller's
//! reaches the app, and `coder task send` resumes a paused task before sending.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use codersdk::tasks::{TaskLogType, TaskLogsResponse, TaskStatus};
use codersdk::users::{CreateUserRequest, LoginWithPasswordRequest};
use reqwest::StatusCode;
use serde_json::{Value, json};
use testutil::{PASSWORD, eventually};

use crate::harness::{Deployment, free_port};
use crate::terraform::{Reaper, terraform};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/fixtures/agentapi-task"
);
const PROMPT: &str = "Fix the flaky test";
const START: Duration = Duration::from_secs(120);

/// One API call as `token`: its status and JSON body (`null` when empty).
async fn api(
    d: &Deployment,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(StatusCode, Value)> {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", d.url()))
        .header("Coder-Session-Token", token)
        // A browser's cookie too: neither may reach the app.
        .header("Cookie", format!("coder_session_token={token}; theme=dark"));
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| text.clone())?
    };
    Ok((status, value))
}

async fn logs(d: &Deployment) -> anyhow::Result<TaskLogsResponse> {
    Ok(d.owner.task_logs("me", "fixer").await?)
}

/// Whether the conversation holds the agent's answer to `input`.
async fn answered(d: &Deployment, input: &str) -> anyhow::Result<bool> {
    let done = format!("Done: {input}");
    Ok(logs(d)
        .await?
        .logs
        .iter()
        .any(|l| l.kind == TaskLogType::Output && l.content == done))
}

/// A second member of the default organization, and their session token.
async fn member(d: &Deployment, name: &str) -> anyhow::Result<String> {
    d.owner
        .create_user(&CreateUserRequest {
            email: format!("{name}@example.com"),
            username: name.into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    Ok(codersdk::Client::new(d.owner.url().clone())
        .login_with_password(&LoginWithPasswordRequest {
            email: format!("{name}@example.com"),
            password: PASSWORD.into(),
        })
        .await?
        .session_token)
}

#[tokio::test(flavor = "multi_thread")]
async fn send_and_logs_reach_the_task_app_through_the_relay() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces: PathBuf = d.dir.path().join("workspaces");
    let port = free_port()?;
    d.ok(&[
        "templates",
        "push",
        "agentic",
        "-d",
        FIXTURE,
        "--variable",
        &format!("workspaces_dir={}", workspaces.display()),
        "--variable",
        &format!("agentapi_port={port}"),
        "--yes",
    ])?;
    d.ok(&[
        "task",
        "create",
        PROMPT,
        "--template",
        "agentic",
        "--name",
        "fixer",
    ])?;
    let ws = d.workspace("fixer").await?;
    let home = workspaces.join(ws.id.to_string());
    let _reaper = Reaper(home.join(".coder-workspace.pid"));
    // The agent's scripts run apart from it: the app server is ended on its own.
    let _app_reaper = Reaper(home.join(".agentapi.pid"));

    // The agent starts the app; its health check makes the task active, and the app's agent
    // works on the prompt it was handed.
    eventually(START, "the task active", || async {
        Ok(d.owner.task("me", "fixer").await?.status == TaskStatus::Active)
    })
    .await?;
    eventually(START, "the prompt answered", || async {
        answered(&d, PROMPT).await
    })
    .await?;
    let live = logs(&d).await?;
    assert!(!live.snapshot && live.snapshot_at.is_none(), "{live:?}");
    let kinds: Vec<(TaskLogType, &str)> = live
        .logs
        .iter()
        .map(|l| (l.kind, l.content.as_str()))
        .collect();
    assert_eq!(
        kinds[1..],
        [
            (TaskLogType::Input, PROMPT),
            (TaskLogType::Output, "Done: Fix the flaky test")
        ],
        "{live:?}"
    );

    // The round trip through the CLI: sent (printing nothing), then in the logs as input.
    let sent = d.ok(&["task", "send", "fixer", "Also add a regression test"])?;
    assert_eq!(sent, "");
    // While the agent works on it, more input is refused with the app's status (Coder's 502),
    // through the API and the CLI alike.
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::POST,
        "/api/v2/tasks/me/fixer/send",
        Some(json!({"input": "and hurry"})),
    )
    .await?;
    assert_eq!(code, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["message"], "Task app is not ready to accept input.");
    assert_eq!(body["detail"], "Status: running");
    let busy = d.run(&["task", "send", "fixer", "and hurry"])?;
    let stderr = String::from_utf8_lossy(&busy.stderr);
    ensure!(!busy.status.success(), "{stderr}");
    assert!(stderr.contains("not ready to accept input"), "{stderr}");
    eventually(START, "the second input answered", || async {
        answered(&d, "Also add a regression test").await
    })
    .await?;

    // Input from stdin.
    let piped = d.with_stdin(&["task", "send", "fixer", "--stdin"], "From stdin")?;
    ensure!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    eventually(START, "the piped input answered", || async {
        answered(&d, "From stdin").await
    })
    .await?;

    // `coder task logs`: Coder's table (TYPE, CONTENT by default), chosen columns, and JSON
    // (the entries alone).
    let table = d.ok(&["task", "logs", "fixer"])?;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["TYPE", "CONTENT"], "{table}");
    let rows: Vec<&str> = lines.map(str::trim).collect();
    assert!(
        rows.iter()
            .any(|r| r.starts_with("input ") && r.ends_with("Also add a regression test")),
        "{table}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("output") && r.ends_with("Done: From stdin")),
        "{table}"
    );
    let ids = d.ok(&["task", "logs", "fixer", "-c", "id,type"])?;
    assert!(
        ids.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", "input"]),
        "{ids}"
    );
    let json: Value = serde_json::from_str(&d.ok(&["task", "logs", "fixer", "-o", "json"])?)?;
    let entries = json.as_array().context("a JSON array")?;
    assert_eq!(entries.len(), 7, "{json}");
    assert_eq!(entries[3]["type"], "input");
    assert_eq!(entries[3]["content"], "Also add a regression test");
    assert_eq!(entries[3]["id"], 3);
    assert!(entries[3]["time"].is_string(), "{json}");

    // Refusals: an empty input; a member who cannot see the task (as if it did not exist).
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::POST,
        "/api/v2/tasks/me/fixer/send",
        Some(json!({"input": ""})),
    )
    .await?;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["message"], "Task input is required.");
    let bob = member(&d, "bob").await?;
    let task_id = d.owner.task("me", "fixer").await?.id;
    for path in [
        format!("/api/v2/tasks/admin/{task_id}/send"),
        "/api/v2/tasks/admin/fixer/send".to_owned(),
    ] {
        let (code, body) = api(
            &d,
            &bob,
            reqwest::Method::POST,
            &path,
            Some(json!({"input": "hi"})),
        )
        .await?;
        assert_eq!(code, StatusCode::NOT_FOUND, "{path}: {body}");
        let logs_path = path.replace("/send", "/logs");
        let (code, body) = api(&d, &bob, reqwest::Method::GET, &logs_path, None).await?;
        assert_eq!(code, StatusCode::NOT_FOUND, "{logs_path}: {body}");
    }
    let hidden = d
        .coder(&bob)
        .args(["task", "logs", "admin/fixer"])
        .output()?;
    ensure!(!hidden.status.success());

    // Nothing of the callers' credentials reached the app: only what coderd's client sends.
    let requests = std::fs::read_to_string(home.join(".agentapi-requests.log"))?;
    ensure!(requests.lines().count() >= 8, "{requests}");
    for line in requests.lines() {
        let entry: Value = serde_json::from_str(line)?;
        let headers = entry["headers"].as_object().context("headers")?;
        for name in headers.keys() {
            let name = name.to_ascii_lowercase();
            assert!(
                !["cookie", "authorization", "coder-session-token"].contains(&name.as_str()),
                "{line}"
            );
        }
        assert!(!line.contains(&d.token) && !line.contains(&bob), "{line}");
    }

    // The app goes away (its health check has not noticed yet): a clear 502, both ways.
    let pid: i32 = std::fs::read_to_string(home.join(".agentapi.pid"))?
        .trim()
        .parse()?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::POST,
        "/api/v2/tasks/me/fixer/send",
        Some(json!({"input": "still there?"})),
    )
    .await?;
    assert_eq!(code, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["message"], "Failed to reach task app endpoint.");
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::GET,
        "/api/v2/tasks/me/fixer/logs",
        None,
    )
    .await?;
    assert_eq!(code, StatusCode::BAD_GATEWAY, "{body}");
    let gone = d.run(&["task", "logs", "fixer"])?;
    let stderr = String::from_utf8_lossy(&gone.stderr);
    ensure!(!gone.status.success(), "{stderr}");
    assert!(
        stderr.contains("Failed to reach task app endpoint"),
        "{stderr}"
    );

    // Stopped, the task is paused: no input (Coder's 409), and logs are an empty snapshot,
    // which the CLI says.
    d.ok(&["stop", "fixer", "--yes"])?;
    eventually(START, "the task paused", || async {
        Ok(d.owner.task("me", "fixer").await?.status == TaskStatus::Paused)
    })
    .await?;
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::POST,
        "/api/v2/tasks/me/fixer/send",
        Some(json!({"input": "wake up"})),
    )
    .await?;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["message"], "Task is paused.");
    assert_eq!(body["detail"], "Resume the task to send messages.");
    let (code, body) = api(
        &d,
        &d.token,
        reqwest::Method::GET,
        "/api/v2/tasks/me/fixer/logs",
        None,
    )
    .await?;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"logs": [], "snapshot": true}));
    let paused = d.run(&["task", "logs", "fixer"])?;
    let stderr = String::from_utf8_lossy(&paused.stderr);
    ensure!(paused.status.success(), "{stderr}");
    assert!(paused.stdout.is_empty());
    assert!(
        stderr.starts_with("WARN: Task is paused. No snapshot available")
            && stderr.trim_end().ends_with("No task logs found."),
        "{stderr}"
    );

    // `coder task send` resumes a paused task (a start build of its workspace, whose log it
    // shows), waits for it to become active, then sends.
    let resumed = d.run(&["task", "send", "fixer", "wake up"])?;
    ensure!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(
        d.owner.task("me", "fixer").await?.status,
        TaskStatus::Active
    );
    eventually(START, "the input after the resume answered", || async {
        answered(&d, "wake up").await
    })
    .await?;
    Ok(())
}
