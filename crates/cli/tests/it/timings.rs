//! A build's timeline end to end: real terraform records its stages, the real agent reports
//! its connection and its startup script's run, and the CLI prints them.

use std::collections::HashSet;

use anyhow::Context as _;

use crate::agent::local_process;
use crate::terraform::Reaper;

#[tokio::test(flavor = "multi_thread")]
async fn a_builds_timeline_covers_terraform_the_agent_and_its_scripts() -> anyhow::Result<()> {
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let created = d.ok(&["create", "dev", "-t", "local-process", "--wait", "--yes"])?;
    let ws = d.workspace("dev").await?;
    let _reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );
    assert!(created.contains("==> Timeline"), "{created}");
    assert!(created.contains("agent main connects"), "{created}");

    let timings = d.owner.workspace_build_timings(ws.latest_build.id).await?;
    let stages: HashSet<&str> = timings
        .provisioner_timings
        .iter()
        .map(|t| t.stage.as_str())
        .collect();
    for stage in ["init", "plan", "graph", "apply"] {
        assert!(stages.contains(stage), "no {stage} in {stages:?}");
    }
    assert!(
        timings
            .provisioner_timings
            .iter()
            .all(|t| t.job_id == ws.latest_build.job.id && t.ended_at >= t.started_at)
    );
    let [connection] = timings.agent_connection_timings.as_slice() else {
        anyhow::bail!("one agent connection: {timings:?}");
    };
    assert_eq!(connection.workspace_agent_name, "main");
    assert_eq!(connection.stage, "connect");
    assert!(connection.ended_at >= connection.started_at);
    let startup = timings
        .agent_script_timings
        .iter()
        .find(|s| s.stage == "start")
        .with_context(|| format!("the startup script's run in {timings:?}"))?;
    assert_eq!((startup.status.as_str(), startup.exit_code), ("ok", 0));
    assert_eq!(startup.workspace_agent_name, "main");

    let shown = d.ok(&["show", "dev"])?;
    assert!(shown.contains("timeline of build #1"), "{shown}");
    assert!(shown.contains("terraform apply"), "{shown}");

    // Another member cannot see the build, nor its timeline.
    d.ok(&[
        "users",
        "create",
        "--username",
        "stranger",
        "--email",
        "stranger@example.com",
        "--password",
        testutil::PASSWORD,
    ])?;
    let token = d
        .owner
        .clone()
        .with_token("")
        .login_with_password(&codersdk::users::LoginWithPasswordRequest {
            email: "stranger@example.com".into(),
            password: testutil::PASSWORD.into(),
        })
        .await?
        .session_token;
    let refused = d
        .owner
        .clone()
        .with_token(&token)
        .workspace_build_timings(ws.latest_build.id)
        .await
        .err()
        .context("a stranger is refused")?;
    assert_eq!(refused.status(), Some(404), "{refused}");
    Ok(())
}
