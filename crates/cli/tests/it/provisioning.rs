//! The provisioner system through the real binaries: `coder server`, external
//! `coder provisionerd start` processes, and the CLI's template and workspace commands.

use std::time::{Duration, Instant};

use codersdk::Client;
use codersdk::provisioners::{ProvisionerDaemon, ProvisionerJob, ProvisionerJobStatus};
use codersdk::users::LoginWithPasswordRequest;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, CreateWorkspaceRequest, WorkspaceStatus};
use provisionerd::engines::echo::{BuildStage, EchoError, EchoLog, EchoTemplate};
use testutil::{PASSWORD, eventually, wait_build};

use crate::harness::{Deployment, start_with, stop_gracefully};

fn slow_start(ms: u64) -> EchoTemplate {
    EchoTemplate {
        start: Some(BuildStage {
            logs: vec![EchoLog::info("building")],
            delay_ms: ms,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_commands_work_as_written() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let daemon = d.provisionerd(
        &d.token,
        "chicago-1",
        &[
            "--tag",
            "environment=on_prem",
            "--tag",
            "data_center=chicago",
        ],
    )?;
    d.wait_daemon("chicago-1").await?;
    let dir = d.template_dir("on-prem-chicago", &slow_start(0))?;
    let out = d.ok(&[
        "templates",
        "create",
        "on-prem-chicago",
        "--directory",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--provisioner-tag",
        "environment=on_prem",
        "--provisioner-tag",
        "data_center=chicago",
        "--yes",
    ])?;
    assert!(
        out.contains("on-prem-chicago template has been created"),
        "{out}"
    );
    let out = d.ok(&[
        "create",
        "chicago-ws",
        "--template",
        "on-prem-chicago",
        "--yes",
    ])?;
    assert!(out.contains("building"), "build logs are streamed: {out}");
    assert_eq!(
        d.workspace("chicago-ws").await?.latest_build.status,
        WorkspaceStatus::Running
    );

    let daemons: Vec<ProvisionerDaemon> =
        serde_json::from_str(&d.ok(&["provisioner", "list", "-o", "json"])?)?;
    assert_eq!(
        daemons.len(),
        1,
        "no built-in daemons with --provisioner-daemons=0"
    );
    assert_eq!(
        daemons[0].tags.get("data_center").map(String::as_str),
        Some("chicago")
    );
    let jobs: Vec<ProvisionerJob> =
        serde_json::from_str(&d.ok(&["provisioner", "jobs", "list", "-o", "json"])?)?;
    assert_eq!(jobs.len(), 2);
    assert!(
        jobs.iter()
            .all(|j| j.status == ProvisionerJobStatus::Succeeded && j.worker_name == "chicago-1")
    );
    assert!(
        stop_gracefully(daemon)?.success(),
        "graceful stop exits cleanly"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_runs_a_user_scoped_daemon_for_their_own_workspaces() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    d.ok(&[
        "users",
        "create",
        "--username",
        "dev",
        "--email",
        "dev@example.com",
        "--password",
        PASSWORD,
    ])?;
    let dev = Client::new(d.owner.url().clone());
    let dev_token = dev
        .login_with_password(&LoginWithPasswordRequest {
            email: "dev@example.com".into(),
            password: PASSWORD.into(),
        })
        .await?
        .session_token;
    let admin_daemon = d.provisionerd(&d.token, "admin-laptop", &["--tag", "scope=user"])?;
    let dev_daemon = d.provisionerd(&dev_token, "dev-laptop", &["--tag", "scope=user"])?;
    d.wait_daemon("admin-laptop").await?;
    d.wait_daemon("dev-laptop").await?;
    let dir = d.template_dir("personal", &slow_start(0))?;
    d.ok(&[
        "templates",
        "push",
        "personal",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--provisioner-tag",
        "scope=user",
        "--yes",
    ])?;
    let out = d
        .coder(&dev_token)
        .args(["create", "mine", "-t", "personal", "--yes"])
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ws = Client::new(d.owner.url().clone())
        .with_token(&dev_token)
        .workspace_by_owner_and_name("me", "mine")
        .await?;
    assert_eq!(
        ws.latest_build.job.worker_name, "dev-laptop",
        "built by the member's own daemon"
    );
    let dev_daemon_row = d
        .daemon_named("dev-laptop")
        .await?
        .ok_or_else(|| anyhow::anyhow!("listed"))?;
    assert_eq!(
        dev_daemon_row.tags.get("scope").map(String::as_str),
        Some("user")
    );
    assert_eq!(
        dev_daemon_row.tags.get("owner"),
        Some(&ws.owner_id.to_string())
    );
    for p in [admin_daemon, dev_daemon] {
        stop_gracefully(p)?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_daemons_job_fails_within_30s_and_the_workspace_builds_again() -> anyhow::Result<()>
{
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let mut first = d.provisionerd(&d.token, "doomed", &[])?;
    d.wait_daemon("doomed").await?;
    let hang = EchoTemplate {
        stop: Some(BuildStage {
            hang: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = d.template_dir("hangs", &hang)?;
    d.ok(&[
        "templates",
        "push",
        "hangs",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    d.ok(&["create", "ws", "-t", "hangs", "--yes"])?;
    let ws = d.workspace("ws").await?;
    let stop = d
        .owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    eventually(Duration::from_secs(20), "stop build running", || async {
        Ok(d.owner.workspace_build(stop.id).await?.job.status == ProvisionerJobStatus::Running)
    })
    .await?;
    first.kill()?; // SIGKILL: no goodbye, no result.
    first.wait()?;
    let killed_at = Instant::now();
    let failed = wait_build(&d.owner, stop.id).await?;
    assert_eq!(failed.status, WorkspaceStatus::Failed);
    assert!(
        killed_at.elapsed() < Duration::from_secs(30),
        "failed after {:?}",
        killed_at.elapsed()
    );
    assert!(
        failed.job.error.contains("heartbeats"),
        "{}",
        failed.job.error
    );
    let second = d.provisionerd(&d.token, "survivor", &[])?;
    d.wait_daemon("survivor").await?;
    d.ok(&["start", "ws", "--yes"])?;
    assert_eq!(
        d.workspace("ws").await?.latest_build.status,
        WorkspaceStatus::Running
    );
    stop_gracefully(second)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_daemon_finishes_its_build_across_a_coderd_restart() -> anyhow::Result<()> {
    let mut d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let daemon = d.provisionerd(&d.token, "steady", &[])?;
    d.wait_daemon("steady").await?;
    let dir = d.template_dir("slow", &slow_start(0))?;
    d.ok(&[
        "templates",
        "push",
        "slow",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    // Builds take 5 s; coderd is killed and restarted in the middle of one.
    let template = d.owner.template_by_name("coder", "slow").await?;
    let slower = d.template_dir("slower", &slow_start(5000))?;
    d.ok(&[
        "templates",
        "push",
        "slow",
        "-d",
        slower.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    let ws = d
        .owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "ws".into(),
                ..Default::default()
            },
        )
        .await?;
    eventually(Duration::from_secs(20), "build running", || async {
        Ok(d.owner
            .workspace_build(ws.latest_build.id)
            .await?
            .job
            .status
            == ProvisionerJobStatus::Running)
    })
    .await?;
    let port = d.owner.url().port().unwrap_or_default();
    let mut server = d.server.take().ok_or_else(|| anyhow::anyhow!("server"))?;
    server.child.kill()?;
    server.child.wait()?;
    drop(server);
    let db_url = d._db.url();
    let restarted = start_with(
        d.dir.path(),
        &[
            "--postgres-url",
            &db_url,
            "--http-address",
            &format!("127.0.0.1:{port}"),
        ],
    )
    .await?;
    d.server = Some(restarted);
    let done = wait_build(&d.owner, ws.latest_build.id).await?;
    let log =
        std::fs::read_to_string(d.dir.path().join("provisionerd-steady.log")).unwrap_or_default();
    assert_eq!(
        done.status,
        WorkspaceStatus::Running,
        "{}\n{log}",
        done.job.error
    );
    assert_eq!(done.job.worker_name, "steady");
    stop_gracefully(daemon)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_built_in_daemons_job_is_not_stuck_after_a_coderd_crash() -> anyhow::Result<()> {
    let mut d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let hang = EchoTemplate {
        stop: Some(BuildStage {
            hang: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = d.template_dir("hangs", &hang)?;
    d.ok(&[
        "templates",
        "push",
        "hangs",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    d.ok(&["create", "ws", "-t", "hangs", "--yes"])?;
    let ws = d.workspace("ws").await?;
    let stop = d
        .owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    eventually(Duration::from_secs(20), "stop build running", || async {
        Ok(d.owner.workspace_build(stop.id).await?.job.status == ProvisionerJobStatus::Running)
    })
    .await?;
    let port = d.owner.url().port().unwrap_or_default();
    let mut server = d.server.take().ok_or_else(|| anyhow::anyhow!("server"))?;
    server.child.kill()?;
    server.child.wait()?;
    drop(server);
    let crashed_at = Instant::now();
    let db_url = d._db.url();
    d.server = Some(
        start_with(
            d.dir.path(),
            &[
                "--postgres-url",
                &db_url,
                "--http-address",
                &format!("127.0.0.1:{port}"),
                "--provisioner-daemons=1",
            ],
        )
        .await?,
    );
    let failed = wait_build(&d.owner, stop.id).await?;
    assert_eq!(failed.status, WorkspaceStatus::Failed);
    assert!(
        crashed_at.elapsed() < Duration::from_secs(40),
        "took {:?}",
        crashed_at.elapsed()
    );
    d.ok(&["start", "ws", "--yes"])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn template_and_workspace_commands() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let dir = d.template_dir("basic", &slow_start(0))?;
    let dir = dir.to_str().unwrap_or_default().to_string();
    d.ok(&[
        "templates",
        "push",
        "basic",
        "-d",
        &dir,
        "--provisioner",
        "echo",
        "--version-name",
        "v1",
        "--yes",
    ])?;
    d.ok(&[
        "templates",
        "push",
        "basic",
        "-d",
        &dir,
        "--provisioner",
        "echo",
        "--version-name",
        "v2",
        "--yes",
    ])?;
    let versions = d.ok(&["templates", "versions", "list", "basic"])?;
    let lines: Vec<&str> = versions.lines().collect();
    assert!(
        lines[1].contains("v2") && lines[1].contains("Active"),
        "{versions}"
    );
    assert!(
        lines[2].contains("v1") && !lines[2].contains("Active"),
        "{versions}"
    );
    let listed = d.ok(&["templates", "list", "-o", "json"])?;
    assert!(listed.contains("\"basic\""));
    let pulled = d.dir.path().join("pulled");
    d.ok(&[
        "templates",
        "pull",
        "basic",
        pulled.to_str().unwrap_or_default(),
    ])?;
    assert!(pulled.join("echo.json").exists());

    d.ok(&["create", "dev", "-t", "basic", "--yes"])?;
    let list = d.ok(&["list"])?;
    assert!(
        list.contains("admin/dev") && list.contains("running"),
        "{list}"
    );
    let show = d.ok(&["show", "dev"])?;
    assert!(show.contains("status running"), "{show}");
    d.ok(&["stop", "dev", "--yes"])?;
    assert!(d.ok(&["list", "-o", "json"])?.contains("\"stopped\""));
    d.ok(&["restart", "dev", "--yes"])?;
    assert!(d.ok(&["start", "dev"])?.contains("already running"));
    let refused = d.run(&["templates", "delete", "basic", "--yes"])?;
    assert!(
        !refused.status.success(),
        "templates with workspaces cannot be deleted"
    );
    d.ok(&["delete", "dev", "--yes"])?;
    d.ok(&["templates", "delete", "basic", "--yes"])?;
    assert!(
        !d.ok(&["templates", "list", "-o", "json"])?
            .contains("\"basic\"")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_builds_exit_non_zero_with_the_jobs_error() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let broken = EchoTemplate {
        start: Some(BuildStage {
            logs: vec![EchoLog::info("about to fail")],
            error: Some(EchoError::new("the cloud said no")),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = d.template_dir("broken", &broken)?;
    d.ok(&[
        "templates",
        "push",
        "broken",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    let out = d.run(&["create", "ws", "-t", "broken", "--yes"])?;
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("about to fail"), "{stdout}");
    assert!(stderr.contains("the cloud said no"), "{stderr}");

    let bad_import = EchoTemplate {
        import: Some(provisionerd::engines::echo::ImportStage {
            error: Some(EchoError::new("bad template")),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = d.template_dir("bad-import", &bad_import)?;
    let out = d.run(&[
        "templates",
        "push",
        "bad-import",
        "-d",
        dir.to_str().unwrap_or_default(),
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad template"));
    assert!(
        d.owner
            .template_by_name("coder", "bad-import")
            .await
            .is_err(),
        "no template from a failed import"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn provisioner_keys_from_the_cli() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let secret = d
        .ok(&["provisioner", "keys", "create", "gpu", "--tag", "gpu=true"])?
        .trim()
        .to_string();
    assert!(d.ok(&["provisioner", "keys", "list"])?.contains("gpu=true"));
    let mut cmd = d.coder("");
    cmd.env_remove("CODER_SESSION_TOKEN");
    let log = std::fs::File::create(d.dir.path().join("key-daemon.log"))?;
    let daemon = cmd
        .args([
            "provisionerd",
            "start",
            "--name",
            "gpu-1",
            "--provisioner-types",
            "echo",
            "--key",
            &secret,
        ])
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    d.wait_daemon("gpu-1").await?;
    let row = d
        .daemon_named("gpu-1")
        .await?
        .ok_or_else(|| anyhow::anyhow!("listed"))?;
    assert_eq!(row.key_name.as_deref(), Some("gpu"));
    assert_eq!(row.tags.get("gpu").map(String::as_str), Some("true"));
    stop_gracefully(daemon)?;
    d.ok(&["provisioner", "keys", "delete", "gpu", "--yes"])?;
    let out = d
        .coder("")
        .env_remove("CODER_SESSION_TOKEN")
        .args([
            "provisionerd",
            "start",
            "--name",
            "gpu-2",
            "--provisioner-types",
            "echo",
            "--key",
            &secret,
        ])
        .output()?;
    assert!(!out.status.success(), "a deleted key stops the daemon");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid provisioner key"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
