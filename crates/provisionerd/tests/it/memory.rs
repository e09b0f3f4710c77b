//! The runner's protocol behaviour over in-memory channels.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::bail;
use codersdk::proto::{Agent, App, Resource};
use codersdk::provisionerd::{
    DaemonMessage, HEARTBEAT_INTERVAL, JobResult, LogLevel, LogSource, ServerMessage, Transition,
};
use provisionerd::engines::echo::{BuildStage, EchoLog, EchoState, EchoTemplate};
use provisionerd::{ConnectError, DaemonError};
use tokio::time::Instant;

use crate::harness::{Harness, build_job, failure, hanging, job_message, outputs, start_stage};

#[tokio::test]
async fn runs_a_job_and_holds_the_result_until_confirmed() -> anyhow::Result<()> {
    let mut harness = Harness::start(|c| {
        c.tags.insert("env".into(), "test".into());
    })?;
    let mut peer = harness.accept().await?;
    assert_eq!(peer.params.name, "test-daemon");
    assert_eq!(peer.params.provisioners, "echo");
    assert_eq!(peer.params.tags, r#"{"env":"test"}"#);
    peer.welcome().await?;
    peer.expect_ready().await?;

    let resource = Resource {
        name: "dev".into(),
        kind: "docker_container".into(),
        agents: vec![Agent {
            name: "main".into(),
            apps: vec![App {
                slug: "code".into(),
                ..App::default()
            }],
            ..Agent::default()
        }],
        ..Resource::default()
    };
    let template = start_stage(BuildStage {
        logs: vec![EchoLog::info("hello from echo")],
        resources: vec![resource.clone()],
        ..BuildStage::default()
    });
    let job = build_job(&template, Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    let (logs, result) = peer.result(job.job_id).await?;

    let DaemonMessage::Complete { result, ready, .. } = result else {
        bail!("expected completion, got {result:?}");
    };
    assert!(ready, "the result doubles as Ready (1.2)");
    let JobResult::WorkspaceBuild {
        state, resources, ..
    } = *result
    else {
        bail!("expected a build result");
    };
    assert_eq!(resources, vec![resource]);
    let state = EchoState::parse(&state).expect("an echo state");
    assert_eq!(state.transition, Transition::Start);

    let lines = outputs(&logs);
    let position = |text: &str| lines.iter().position(|l| l.contains(text));
    // Echo reads its template from the archive: no work directory to set up or remove.
    let setup = position("Reading the template archive").expect("setup line");
    let echo = position("hello from echo").expect("engine line");
    assert!(setup == 0 && setup < echo, "{lines:?}");
    assert!(position("work directory").is_none(), "{lines:?}");
    assert_eq!(logs[setup].source, LogSource::ProvisionerDaemon);
    assert_eq!(logs[setup].stage, "Setting up");
    assert_eq!(logs[echo].source, LogSource::Provisioner);
    assert!(logs.windows(2).all(|w| w[0].created_at <= w[1].created_at));
    assert!(!lines.iter().any(|l| l.contains("owner-secret-token")));

    assert!(
        peer.silent_for(Duration::from_millis(300)).await?,
        "no Ready before Finished"
    );
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_idle().await?;
    assert!(
        harness.work_root_is_empty().await?,
        "an echo job leaves nothing in the work root"
    );
    // Idle without having said Ready: the next job goes straight in.
    let next = build_job(&EchoTemplate::default(), Transition::Stop, b"");
    peer.send(job_message(&next)).await?;
    let (_, result) = peer.result(next.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "{result:?}"
    );

    harness.shutdown.cancel();
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn an_engine_reading_files_runs_in_a_work_directory_removed_after_the_job()
-> anyhow::Result<()> {
    use std::sync::Arc;

    use codersdk::provisionerd::JobFailure;
    use futures::future::BoxFuture;
    use provisionerd::{Engine, JobContext, Template};

    /// Reports what its work directory held: the template's `echo.json`.
    struct Lister;
    impl Engine for Lister {
        fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>> {
            Box::pin(async move {
                let Template::Extracted(dir) = ctx.template else {
                    return Err(JobFailure::new("no work directory"));
                };
                let json = std::fs::read(dir.join("echo.json"))
                    .map_err(|e| JobFailure::new(format!("echo.json: {e}")))?;
                Ok(JobResult::WorkspaceBuild {
                    state: json,
                    resources: vec![],
                    timings: vec![],
                    features: Default::default(),
                })
            })
        }
    }

    let mut harness = Harness::start(|c| {
        c.engines.insert("echo".into(), Arc::new(Lister));
    })?;
    let mut peer = harness.ready_peer().await?;
    let template = start_stage(BuildStage::default());
    let job = build_job(&template, Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    let (logs, result) = peer.result(job.job_id).await?;
    let DaemonMessage::Complete { result, .. } = result else {
        bail!("expected completion, got {result:?}");
    };
    let JobResult::WorkspaceBuild { state, .. } = *result else {
        bail!("expected a build result");
    };
    assert_eq!(serde_json::from_slice::<EchoTemplate>(&state)?, template);
    let lines = outputs(&logs);
    let position = |text: &str| lines.iter().position(|l| l.contains(text));
    let setup = position("Setting up the work directory").expect("setup line");
    let extract = position("Extracting the template").expect("extract line");
    let cleanup = position("Removing the work directory").expect("cleanup line");
    assert!(
        setup == 0 && setup < extract && extract < cleanup,
        "{lines:?}"
    );
    assert_eq!(logs[cleanup].stage, "Cleaning up");
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_idle().await?;
    assert!(
        harness.work_root_is_empty().await?,
        "the work directory is removed"
    );
    harness.shutdown.cancel();
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn heartbeats_a_quiet_job() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let template = start_stage(BuildStage {
        delay_ms: 12_000,
        ..BuildStage::default()
    });
    let job = build_job(&template, Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    let mut last = Instant::now();
    let mut heartbeats = 0;
    loop {
        let message = peer.recv().await?;
        let gap = last.elapsed();
        last = Instant::now();
        assert!(gap <= HEARTBEAT_INTERVAL, "{gap:?} between messages");
        match message {
            DaemonMessage::Update { logs, .. } if logs.is_empty() => heartbeats += 1,
            DaemonMessage::Update { .. } => {}
            DaemonMessage::Complete { .. } => break,
            other => bail!("unexpected {other:?}"),
        }
    }
    assert!(heartbeats >= 2, "{heartbeats} heartbeats in 12 s");
    Ok(())
}

#[tokio::test]
async fn cancel_fails_the_job_as_canceled_with_its_state() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = build_job(&hanging(), Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    let logs = peer.update(job.job_id).await?;
    assert!(!logs.is_empty(), "the first update carries the setup logs");
    peer.send(ServerMessage::Cancel { job_id: job.job_id })
        .await?;
    let (logs, result) = peer.result(job.job_id).await?;
    let failure = failure(result)?;
    assert!(failure.canceled);
    assert_eq!(failure.error, "echo: canceled during start");
    let state = EchoState::parse(failure.state.as_deref().unwrap_or_default());
    assert_eq!(state.map(|s| s.transition), Some(Transition::Start));
    let canceling = logs
        .iter()
        .find(|l| l.stage == "Canceling")
        .expect("a cancel line");
    assert_eq!(
        (canceling.source, canceling.level),
        (LogSource::ProvisionerDaemon, LogLevel::Warn)
    );

    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_idle().await?;
    assert!(harness.work_root_is_empty().await?);
    Ok(())
}

#[tokio::test]
async fn keeps_running_through_a_lost_connection_and_resends_the_result() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let peer = harness.ready_peer().await?;
    let template = start_stage(BuildStage {
        logs: vec![EchoLog::info("written while disconnected")],
        delay_ms: 400,
        ..BuildStage::default()
    });
    let job = build_job(&template, Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    // Hang up before the first flush: the job's logs must wait for the next connection.
    drop(peer);

    let mut peer = harness.accept().await?;
    peer.welcome().await?;
    let first = peer.update(job.job_id).await?;
    let (rest, result) = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "{result:?}"
    );
    let lines: Vec<_> = first
        .iter()
        .chain(&rest)
        .map(|l| l.output.as_str())
        .collect();
    assert!(lines.contains(&"written while disconnected"), "{lines:?}");
    drop(peer);

    let mut peer = harness.accept().await?;
    peer.expect_resent(job.job_id).await?;
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_idle().await?;
    Ok(())
}

#[tokio::test]
async fn job_gone_abandons_the_job() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = peer.run_start(&hanging()).await?;
    peer.send(ServerMessage::JobGone {
        job_id: job.job_id,
        reason: "missed heartbeats".into(),
    })
    .await?;
    loop {
        match peer.recv().await? {
            DaemonMessage::Ready => break,
            DaemonMessage::Update { .. } => {}
            other => bail!("expected Ready, got {other:?}"),
        }
    }
    assert!(
        harness.work_root_is_empty().await?,
        "the abandoned engine stopped and cleaned up"
    );

    let job = build_job(&EchoTemplate::default(), Transition::Stop, b"");
    peer.send(job_message(&job)).await?;
    let (_, result) = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "the daemon takes new jobs"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_provisioners_and_bad_archives_fail_the_job() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;

    let mut job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    job.provisioner = "terraform".into();
    peer.send(job_message(&job)).await?;
    let (_, result) = peer.result(job.job_id).await?;
    let failed = failure(result)?;
    assert_eq!(
        failed.error,
        r#"this provisioner daemon cannot run "terraform" jobs; it runs echo"#
    );
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_idle().await?;

    let mut job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    job.template_source_archive = vec![1; 700].into();
    peer.send(job_message(&job)).await?;
    let (logs, result) = peer.result(job.job_id).await?;
    let failed = failure(result)?;
    assert!(
        failed.error.starts_with("invalid template archive: "),
        "{}",
        failed.error
    );
    assert!(
        logs.iter()
            .any(|l| l.level == LogLevel::Error && l.output == failed.error)
    );
    assert!(harness.work_root_is_empty().await?);
    Ok(())
}

#[tokio::test]
async fn transient_connect_errors_are_retried() -> anyhow::Result<()> {
    let refusals = VecDeque::from([
        ConnectError::Transient("connection refused".into()),
        ConnectError::Transient("502 Bad Gateway".into()),
    ]);
    let mut harness = Harness::start_with(|_| {}, refusals)?;
    harness.ready_peer().await?;
    assert!(
        harness
            .refusals
            .lock()
            .map(|r| r.is_empty())
            .unwrap_or(false)
    );
    Ok(())
}

#[tokio::test]
async fn fatal_connect_errors_stop_the_daemon() -> anyhow::Result<()> {
    for (refusal, expected) in [
        (
            ConnectError::Unauthorized("401: bad PSK".into()),
            "coderd rejected the daemon's credentials: 401: bad PSK",
        ),
        (
            ConnectError::Forbidden("403: not an owner".into()),
            "the daemon is not allowed to serve this organization: 403: not an owner",
        ),
        (
            ConnectError::Incompatible("400: bad tags".into()),
            "coderd refused the daemon: 400: bad tags",
        ),
    ] {
        let mut harness = Harness::start_with(|_| {}, VecDeque::from([refusal]))?;
        let error = harness.stopped().await?.expect_err("the daemon stops");
        assert_eq!(error.to_string(), expected);
    }
    Ok(())
}

#[tokio::test]
async fn a_new_major_protocol_stops_the_daemon() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let peer = harness.accept().await?;
    peer.welcome_with("2.0").await?;
    let error = harness.stopped().await?.expect_err("incompatible");
    assert!(
        matches!(&error, DaemonError::Incompatible(m) if m.contains("\"2.0\"")),
        "{error}"
    );
    Ok(())
}

#[tokio::test]
async fn a_connection_without_welcome_is_replaced() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.accept().await?;
    peer.send(ServerMessage::Cancel {
        job_id: uuid::Uuid::nil(),
    })
    .await?;
    assert!(
        peer.hung_up().await?,
        "the daemon hangs up on a peer that did not welcome it"
    );
    harness.ready_peer().await?;
    Ok(())
}

/// The `ready` flag of a result (`None` for anything else).
fn result_ready(message: &DaemonMessage) -> Option<bool> {
    match message {
        DaemonMessage::Complete { ready, .. } | DaemonMessage::Fail { ready, .. } => Some(*ready),
        _ => None,
    }
}

#[tokio::test]
async fn a_1_1_coderd_hears_ready_after_the_confirmation() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.accept().await?;
    peer.welcome_with("1.1").await?;
    peer.expect_ready().await?;
    let job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    let (_, result) = peer.result(job.job_id).await?;
    assert_eq!(
        result_ready(&result),
        Some(false),
        "a 1.1 coderd would ignore the flag and never send the next job"
    );
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    peer.expect_ready().await?;
    Ok(())
}

#[tokio::test]
async fn a_stopping_daemon_does_not_offer_itself_with_its_result() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    // Long enough to be running still when the shutdown arrives, well within the grace.
    let template = start_stage(BuildStage {
        logs: vec![EchoLog::info("applying")],
        delay_ms: 3_000,
        ..BuildStage::default()
    });
    let job = build_job(&template, Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    // Stopped before the daemon has the job, it would hand it back instead of running it.
    let mut early = Vec::new();
    while !outputs(&early).contains(&"applying") {
        early.extend(peer.update(job.job_id).await?);
    }
    harness.shutdown.cancel();
    let (_, result) = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "{result:?}"
    );
    assert_eq!(result_ready(&result), Some(false), "{result:?}");
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}
