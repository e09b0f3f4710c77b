//! Graceful shutdown: finish or fail the running job, never abandon it.

use std::time::Duration;

use codersdk::provisionerd::{DaemonMessage, ServerMessage, Transition};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};

use crate::harness::{Harness, build_job, failure, hanging, job_message, outputs, start_stage};

#[tokio::test]
async fn an_idle_daemon_stops_once_coderd_confirms_no_job_is_coming() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    harness.shutdown.cancel();
    assert_eq!(peer.recv().await?, DaemonMessage::Stopping);
    peer.send(ServerMessage::Stopped).await?;
    assert!(peer.hangs_up_silently().await?);
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

/// coderd claimed a job for the idle daemon just before it stopped: the job comes before
/// `Stopped`, and the daemon hands it back rather than leaving it claimed by nobody.
#[tokio::test]
async fn a_job_on_its_way_to_a_stopping_daemon_is_handed_back() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    harness.shutdown.cancel();
    assert_eq!(peer.recv().await?, DaemonMessage::Stopping);
    let job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    peer.send(ServerMessage::Stopped).await?;
    let (_, result) = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Release { .. }),
        "{result:?}"
    );
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(peer.hangs_up_silently().await?);
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

/// A 1.2 coderd does not know `Stopping`: the idle daemon stops at once, as before.
#[tokio::test]
async fn an_idle_daemon_of_a_1_2_coderd_stops_at_once() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.accept().await?;
    peer.welcome_with("1.2").await?;
    peer.expect_ready().await?;
    harness.shutdown.cancel();
    assert!(peer.hangs_up_silently().await?);
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_wait_for_stopped_is_bounded() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    harness.shutdown.cancel();
    assert_eq!(peer.recv().await?, DaemonMessage::Stopping);
    // coderd never answers.
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn a_running_job_may_finish_within_the_grace() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = peer
        .run_start(&start_stage(BuildStage {
            delay_ms: 500,
            ..BuildStage::default()
        }))
        .await?;
    harness.shutdown.cancel();
    let (logs, result) = peer.result(job.job_id).await?;
    assert!(
        matches!(result, DaemonMessage::Complete { .. }),
        "{result:?}"
    );
    assert!(
        outputs(&logs)
            .contains(&"The provisioner daemon is shutting down; the job has 30s to finish"),
        "{:?}",
        outputs(&logs)
    );
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(peer.hung_up().await?, "no Ready during shutdown");
    assert!(harness.stopped().await?.is_ok());
    assert!(harness.work_root_is_empty().await?);
    Ok(())
}

#[tokio::test]
async fn a_job_outliving_the_grace_is_failed() -> anyhow::Result<()> {
    let mut harness = Harness::start(|c| c.shutdown_grace = Duration::from_millis(200))?;
    let mut peer = harness.ready_peer().await?;
    let job = peer.run_start(&hanging()).await?;
    harness.shutdown.cancel();
    let (_, result) = peer.result(job.job_id).await?;
    let failure = failure(result)?;
    assert_eq!(failure.error, "the provisioner daemon is shutting down");
    assert!(!failure.canceled);
    assert!(failure.state.is_some(), "the engine's state is kept");
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn a_second_signal_stops_the_running_job_at_once() -> anyhow::Result<()> {
    // The default grace (30 s) is longer than the harness waits for a result.
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = peer.run_start(&hanging()).await?;
    harness.shutdown.cancel();
    harness.now.cancel();
    let (logs, result) = peer.result(job.job_id).await?;
    assert!(
        outputs(&logs)
            .contains(&"The provisioner daemon was told to stop now; stopping the provisioner"),
        "{:?}",
        outputs(&logs)
    );
    let failure = failure(result)?;
    assert_eq!(failure.error, "the provisioner daemon is shutting down");
    assert!(failure.state.is_some(), "the engine's state is kept");
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn stop_now_alone_stops_an_idle_daemon() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    harness.now.cancel();
    assert_eq!(peer.recv().await?, DaemonMessage::Stopping);
    peer.send(ServerMessage::Stopped).await?;
    assert!(peer.hangs_up_silently().await?);
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn an_engine_ignoring_cancellation_is_aborted() -> anyhow::Result<()> {
    use std::sync::Arc;

    use codersdk::provisionerd::{JobFailure, JobResult};
    use futures::future::BoxFuture;
    use provisionerd::{Engine, JobContext};

    struct Stubborn;
    impl Engine for Stubborn {
        fn run<'a>(&'a self, ctx: JobContext<'a>) -> BoxFuture<'a, Result<JobResult, JobFailure>> {
            // Past the point where the job could be handed back: it must be failed.
            ctx.progress.applying();
            Box::pin(std::future::pending())
        }
    }

    let mut harness = Harness::start(|c| {
        c.engines.insert("echo".into(), Arc::new(Stubborn));
        c.shutdown_grace = Duration::ZERO;
        c.cancel_timeout = Duration::from_millis(200);
    })?;
    let mut peer = harness.ready_peer().await?;
    let job = peer.run_start(&EchoTemplate::default()).await?;
    harness.shutdown.cancel();
    let (_, result) = peer.result(job.job_id).await?;
    let failure = failure(result)?;
    assert_eq!(failure.error, "the provisioner daemon is shutting down");
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(harness.stopped().await?.is_ok());
    assert!(
        harness.work_root_is_empty().await?,
        "aborting removed the work directory"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_wait_for_the_last_confirmation_is_bounded() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = build_job(&EchoTemplate::default(), Transition::Stop, b"");
    peer.send(job_message(&job)).await?;
    let (_, result) = peer.result(job.job_id).await?;
    assert!(matches!(result, DaemonMessage::Complete { .. }));
    harness.shutdown.cancel();
    // coderd never confirms.
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn a_result_pending_at_shutdown_is_resent_after_reconnecting() -> anyhow::Result<()> {
    let mut harness = Harness::start(|_| {})?;
    let mut peer = harness.ready_peer().await?;
    let job = build_job(&EchoTemplate::default(), Transition::Start, b"");
    peer.send(job_message(&job)).await?;
    peer.result(job.job_id).await?;
    harness.shutdown.cancel();
    drop(peer);
    let mut peer = harness.accept().await?;
    peer.expect_resent(job.job_id).await?;
    peer.send(ServerMessage::Finished { job_id: job.job_id })
        .await?;
    assert!(harness.stopped().await?.is_ok());
    Ok(())
}
