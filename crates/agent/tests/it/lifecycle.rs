//! Start scripts decide ready / start_timeout / start_error; shutdown runs the stop scripts and
//! reports its verdict before `run` returns.

use codersdk::agentsdk::LifecycleState::{self, *};

use crate::harness::{TOKEN, TestAgent, manifest, read, script, stop_script};
use crate::peer::Peer;

async fn wait_lifecycle(peer: &Peer, expected: &[LifecycleState]) -> anyhow::Result<()> {
    peer.wait_for(&format!("lifecycle {expected:?}"), |p| {
        p.lifecycle().len() >= expected.len()
    })
    .await?;
    assert_eq!(peer.lifecycle(), expected);
    Ok(())
}

#[tokio::test]
async fn a_start_script_runs_in_the_workspace_and_the_agent_becomes_ready() -> anyhow::Result<()> {
    let start = script(
        "echo \"hello $CODER_WORKSPACE_NAME.$CODER_WORKSPACE_AGENT_NAME $CODER $FROM_TEMPLATE\"\n\
         echo oops >&2\n\
         pwd\n\
         echo \"token:${CODER_AGENT_TOKEN:+set} url:$CODER_AGENT_URL\"",
    );
    let source = start.log_source_id;
    let peer = Peer::start(TOKEN, manifest(vec![start])).await?;
    let mut agent = TestAgent::connect(&peer.url)?;
    wait_lifecycle(&peer, &[Starting, Ready]).await?;
    peer.wait_for("the script's output", |p| p.outputs(source).len() >= 4)
        .await?;

    let logs = peer.logs(source);
    let line = |text: &str| {
        logs.iter()
            .find(|l| l.output == text)
            .map(|l| l.level.as_str())
    };
    assert_eq!(
        line("hello dev.main true template-from-the-agent"),
        Some("info")
    );
    assert_eq!(line("oops"), Some("error"));
    let project = agent.home().join("project");
    assert_eq!(line(&project.to_string_lossy()), Some("info"), "{logs:?}");
    assert_eq!(
        line(&format!("token:set url:{}", peer.url)),
        Some("info"),
        "{logs:?}"
    );

    let startup = &peer.startups()[0];
    assert_eq!(startup.expanded_directory, project.to_string_lossy());
    assert!(startup.version.starts_with('v'));
    assert_eq!(startup.operating_system, "linux");

    let file = agent.log_dir().join(format!("coder-script-{source}.log"));
    let written = read(&file)?;
    assert!(
        written.contains("hello dev.main") && written.contains("oops"),
        "{written}"
    );

    agent.stop().await?;
    assert_eq!(peer.lifecycle(), [Starting, Ready, ShuttingDown, Off]);
    Ok(())
}

#[tokio::test]
async fn a_start_script_past_its_timeout_makes_start_timeout() -> anyhow::Result<()> {
    let mut slow = script("echo begun; sleep 30");
    slow.timeout_seconds = 1;
    let source = slow.log_source_id;
    let peer = Peer::start(TOKEN, manifest(vec![slow, script("true")])).await?;
    let _agent = TestAgent::connect(&peer.url)?;
    wait_lifecycle(&peer, &[Starting, StartTimeout]).await?;
    peer.wait_for("the timeout note", |p| {
        p.outputs(source)
            .iter()
            .any(|l| l.contains("timed out after 1s"))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_failing_start_script_makes_start_error() -> anyhow::Result<()> {
    let failing = script("echo trying; exit 7");
    let source = failing.log_source_id;
    let peer = Peer::start(TOKEN, manifest(vec![script("true"), failing])).await?;
    let _agent = TestAgent::connect(&peer.url)?;
    wait_lifecycle(&peer, &[Starting, StartError]).await?;
    peer.wait_for("the exit status", |p| {
        p.outputs(source)
            .iter()
            .any(|l| l.contains("exit status 7"))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn shutdown_runs_the_stop_scripts_and_reports_off_before_returning() -> anyhow::Result<()> {
    let peer = Peer::start(TOKEN, manifest(vec![])).await?;
    let mut agent = TestAgent::connect(&peer.url)?;
    let marker = agent.home().join("stopped");
    let stop = stop_script(&format!("echo saving work; touch {}", marker.display()));
    let source = stop.log_source_id;
    peer.set_manifest(manifest(vec![script("echo started"), stop]));
    wait_lifecycle(&peer, &[Starting, Ready]).await?;

    agent.stop().await?;
    assert!(marker.exists(), "the stop script ran");
    assert_eq!(peer.lifecycle(), [Starting, Ready, ShuttingDown, Off]);
    assert!(
        peer.outputs(source).contains(&"saving work".to_string()),
        "the stop script's logs were delivered before the agent returned: {:?}",
        peer.outputs(source)
    );
    Ok(())
}

#[tokio::test]
async fn failing_and_slow_stop_scripts_set_the_final_state() -> anyhow::Result<()> {
    for (body, timeout, expected) in [
        ("exit 1", 0, ShutdownError),
        ("sleep 30", 1, ShutdownTimeout),
    ] {
        let mut stop = stop_script(body);
        stop.timeout_seconds = timeout;
        let peer = Peer::start(TOKEN, manifest(vec![stop])).await?;
        let mut agent = TestAgent::connect(&peer.url)?;
        wait_lifecycle(&peer, &[Starting, Ready]).await?;
        agent.stop().await?;
        assert_eq!(peer.lifecycle(), [Starting, Ready, ShuttingDown, expected]);
    }
    Ok(())
}

#[tokio::test]
async fn shutdown_interrupts_start_scripts_still_running() -> anyhow::Result<()> {
    let peer = Peer::start(TOKEN, manifest(vec![script("sleep 60")])).await?;
    let mut agent = TestAgent::connect(&peer.url)?;
    wait_lifecycle(&peer, &[Starting]).await?;
    let started = std::time::Instant::now();
    agent.stop().await?;
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(peer.lifecycle(), [Starting, ShuttingDown, Off]);
    Ok(())
}

#[tokio::test]
async fn cron_scripts_run_on_schedule_after_the_start_scripts() -> anyhow::Result<()> {
    let peer = Peer::start(TOKEN, manifest(vec![])).await?;
    let agent = TestAgent::connect(&peer.url)?;
    let (marker, cron_log) = (agent.home().join("started"), agent.home().join("cron.log"));
    let mut cron = script(&format!(
        "cat {} >> {}",
        marker.display(),
        cron_log.display()
    ));
    cron.run_on_start = false;
    cron.cron = "* * * * * *".into();
    peer.set_manifest(manifest(vec![
        script(&format!("sleep 1; echo start-done > {}", marker.display())),
        cron,
    ]));
    wait_lifecycle(&peer, &[Starting, Ready]).await?;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let runs = read(&cron_log)?;
    let lines: Vec<_> = runs.lines().collect();
    assert!(lines.len() >= 2, "{runs}");
    assert!(
        lines.iter().all(|l| *l == "start-done"),
        "every run came after the start script: {runs}"
    );
    Ok(())
}
