//! A coderd-side protocol peer and a daemon started against it.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::Utc;
use codersdk::provisionerd::JobFailure;
use codersdk::provisionerd::{
    AcquiredJob, DaemonMessage, JobKind, JobLog, Metadata, PROTOCOL_VERSION, ServeParams,
    ServerMessage, Transition,
};
use provisionerd::engines::echo::{self, BuildStage, EchoEngine, EchoTemplate};
use provisionerd::{ConnectError, Connection, Connector, DaemonConfig, DaemonError, ServerSide};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Long enough for a loaded CI machine, short enough to fail a stuck test quickly.
pub const WAIT: Duration = Duration::from_secs(20);

/// Hands each connection the daemon opens to the test, or refuses it with a queued error.
pub struct MemoryConnector {
    accepted: mpsc::UnboundedSender<(ServeParams, ServerSide)>,
    refusals: Arc<Mutex<VecDeque<ConnectError>>>,
}

impl Connector for MemoryConnector {
    async fn connect(&self, params: &ServeParams) -> Result<Connection, ConnectError> {
        let refusal = self
            .refusals
            .lock()
            .map_err(|_| ConnectError::Transient("poisoned".into()))?
            .pop_front();
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        let (conn, server) = Connection::pair(64);
        self.accepted
            .send((params.clone(), server))
            .map_err(|_| ConnectError::Transient("the test is over".into()))?;
        Ok(conn)
    }
}

pub struct Harness {
    accepted: mpsc::UnboundedReceiver<(ServeParams, ServerSide)>,
    pub refusals: Arc<Mutex<VecDeque<ConnectError>>>,
    pub shutdown: CancellationToken,
    /// Stops the running job at once (a second signal).
    pub now: CancellationToken,
    pub daemon: JoinHandle<Result<(), DaemonError>>,
    pub work_root: tempfile::TempDir,
}

pub fn config(work_root: &Path) -> DaemonConfig {
    let mut config = DaemonConfig::new("test-daemon").with_engine("echo", Arc::new(EchoEngine));
    config.work_root = work_root.to_path_buf();
    config
}

impl Harness {
    /// Starts a daemon with the echo engine; `configure` adjusts its configuration and may
    /// queue connection refusals.
    pub fn start(configure: impl FnOnce(&mut DaemonConfig)) -> anyhow::Result<Self> {
        Self::start_with(configure, VecDeque::new())
    }

    pub fn start_with(
        configure: impl FnOnce(&mut DaemonConfig),
        refusals: VecDeque<ConnectError>,
    ) -> anyhow::Result<Self> {
        let work_root = tempfile::tempdir()?;
        let mut config = config(work_root.path());
        configure(&mut config);
        let (tx, accepted) = mpsc::unbounded_channel();
        let refusals = Arc::new(Mutex::new(refusals));
        let connector = MemoryConnector {
            accepted: tx,
            refusals: refusals.clone(),
        };
        let shutdown = CancellationToken::new();
        let now = CancellationToken::new();
        let daemon = tokio::spawn(provisionerd::run_until(
            connector,
            config,
            shutdown.clone(),
            now.clone(),
        ));
        Ok(Self {
            accepted,
            refusals,
            shutdown,
            now,
            daemon,
            work_root,
        })
    }

    /// The daemon's next connection.
    pub async fn accept(&mut self) -> anyhow::Result<Peer> {
        let (params, side) = tokio::time::timeout(WAIT, self.accepted.recv())
            .await
            .context("the daemon did not connect")?
            .context("the daemon stopped")?;
        Ok(Peer { params, side })
    }

    /// Accepts a connection, welcomes the daemon and takes its `Ready`.
    pub async fn ready_peer(&mut self) -> anyhow::Result<Peer> {
        let mut peer = self.accept().await?;
        peer.welcome().await?;
        peer.expect_ready().await?;
        Ok(peer)
    }

    /// How the daemon ended.
    pub async fn stopped(&mut self) -> anyhow::Result<Result<(), DaemonError>> {
        Ok(tokio::time::timeout(WAIT, &mut self.daemon)
            .await
            .context("the daemon did not stop")??)
    }

    /// Whether every job's work directory is gone (polls a little: cleanup is asynchronous).
    pub async fn work_root_is_empty(&self) -> anyhow::Result<bool> {
        for _ in 0..100 {
            if std::fs::read_dir(self.work_root.path())?.next().is_none() {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(false)
    }
}

/// coderd's end of one connection.
pub struct Peer {
    pub params: ServeParams,
    side: ServerSide,
}

impl Peer {
    pub async fn send(&self, message: ServerMessage) -> anyhow::Result<()> {
        self.side
            .outgoing
            .send(message)
            .await
            .context("the daemon hung up")
    }

    pub async fn welcome(&self) -> anyhow::Result<()> {
        self.welcome_with(PROTOCOL_VERSION).await
    }

    pub async fn welcome_with(&self, protocol_version: &str) -> anyhow::Result<()> {
        self.send(ServerMessage::Welcome {
            daemon_id: Uuid::new_v4(),
            daemon_name: self.params.name.clone(),
            protocol_version: protocol_version.into(),
        })
        .await
    }

    pub async fn recv(&mut self) -> anyhow::Result<DaemonMessage> {
        tokio::time::timeout(WAIT, self.side.incoming.recv())
            .await
            .context("the daemon said nothing")?
            .context("the daemon hung up")
    }

    /// Whether the daemon sends nothing for `quiet`.
    pub async fn silent_for(&mut self, quiet: Duration) -> anyhow::Result<bool> {
        match tokio::time::timeout(quiet, self.side.incoming.recv()).await {
            Err(_) => Ok(true),
            Ok(Some(message)) => bail!("expected silence, got {message:?}"),
            Ok(None) => bail!("the daemon hung up"),
        }
    }

    /// Whether the daemon hung up (within `WAIT`), ignoring anything it sent before.
    pub async fn hung_up(&mut self) -> anyhow::Result<bool> {
        loop {
            match tokio::time::timeout(WAIT, self.side.incoming.recv()).await {
                Err(_) => return Ok(false),
                Ok(None) => return Ok(true),
                Ok(Some(_)) => {}
            }
        }
    }

    /// Whether the daemon hangs up (within `WAIT`) without saying anything first.
    pub async fn hangs_up_silently(&mut self) -> anyhow::Result<bool> {
        match tokio::time::timeout(WAIT, self.side.incoming.recv()).await {
            Err(_) => Ok(false),
            Ok(None) => Ok(true),
            Ok(Some(message)) => bail!("expected a hang-up, got {message:?}"),
        }
    }

    /// After `Finished` for a result that said `ready` (protocol 1.2): the daemon waits for its
    /// next job without sending `Ready` (or anything else).
    pub async fn expect_idle(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.silent_for(Duration::from_millis(300)).await?,
            "the daemon said something while idle"
        );
        Ok(())
    }

    pub async fn expect_ready(&mut self) -> anyhow::Result<()> {
        match self.recv().await? {
            DaemonMessage::Ready => Ok(()),
            other => bail!("expected Ready, got {other:?}"),
        }
    }

    /// Collects updates until the job's result, checking that they are all about `job_id`:
    /// the job's logs (from its updates and its result) and its result.
    pub async fn result(&mut self, job_id: Uuid) -> anyhow::Result<(Vec<JobLog>, DaemonMessage)> {
        let mut logs = Vec::new();
        loop {
            match self.recv().await? {
                DaemonMessage::Update {
                    job_id: id,
                    logs: more,
                } if id == job_id => logs.extend(more),
                DaemonMessage::Complete {
                    job_id: id,
                    result,
                    logs: last,
                    ready,
                } if id == job_id => {
                    logs.extend(last.iter().cloned());
                    return Ok((
                        logs,
                        DaemonMessage::Complete {
                            job_id,
                            result,
                            logs: last,
                            ready,
                        },
                    ));
                }
                DaemonMessage::Fail {
                    job_id: id,
                    failure,
                    logs: last,
                    ready,
                } if id == job_id => {
                    logs.extend(last.iter().cloned());
                    return Ok((
                        logs,
                        DaemonMessage::Fail {
                            job_id,
                            failure,
                            logs: last,
                            ready,
                        },
                    ));
                }
                DaemonMessage::Release {
                    job_id: id,
                    logs: last,
                } if id == job_id => {
                    logs.extend(last.iter().cloned());
                    return Ok((logs, DaemonMessage::Release { job_id, logs: last }));
                }
                other => bail!("unexpected message while job {job_id} runs: {other:?}"),
            }
        }
    }

    /// Sends a start build of `template` and waits for its first update (the job is running).
    pub async fn run_start(&mut self, template: &EchoTemplate) -> anyhow::Result<AcquiredJob> {
        let job = build_job(template, Transition::Start, b"");
        self.send(job_message(&job)).await?;
        self.update(job.job_id).await?;
        Ok(job)
    }

    /// After a reconnect: the welcome, then `job_id`'s result again.
    pub async fn expect_resent(&mut self, job_id: Uuid) -> anyhow::Result<()> {
        self.welcome().await?;
        match self.recv().await? {
            DaemonMessage::Complete { job_id: id, .. } if id == job_id => Ok(()),
            other => bail!("expected the result of {job_id} again, got {other:?}"),
        }
    }

    /// The next update, which must be about `job_id`.
    pub async fn update(&mut self, job_id: Uuid) -> anyhow::Result<Vec<JobLog>> {
        match self.recv().await? {
            DaemonMessage::Update { job_id: id, logs } if id == job_id => Ok(logs),
            other => bail!("expected an update of {job_id}, got {other:?}"),
        }
    }
}

/// A workspace build of `transition` for an echo template.
pub fn build_job(
    template: &EchoTemplate,
    transition: Transition,
    previous_state: &[u8],
) -> AcquiredJob {
    AcquiredJob {
        job_id: Uuid::new_v4(),
        created_at: Utc::now(),
        provisioner: "echo".into(),
        template_source_archive: echo::archive(template).into(),
        kind: JobKind::WorkspaceBuild {
            workspace_build_id: Uuid::new_v4(),
            workspace_name: "dev".into(),
            state: previous_state.to_vec(),
            rich_parameter_values: vec![],
            variable_values: vec![],
            metadata: Metadata {
                workspace_transition: transition,
                workspace_owner_session_token: "owner-secret-token".into(),
                ..Metadata::default()
            },
            secrets: vec![],
            external_auth_providers: vec![],
            owner_ssh_key: None,
        },
    }
}

/// A template whose start stage is `stage`.
pub fn start_stage(stage: BuildStage) -> EchoTemplate {
    EchoTemplate {
        start: Some(stage),
        ..EchoTemplate::default()
    }
}

/// A template whose start build runs until canceled.
pub fn hanging() -> EchoTemplate {
    start_stage(BuildStage {
        hang: true,
        ..BuildStage::default()
    })
}

/// The failure a result must be.
pub fn failure(result: DaemonMessage) -> anyhow::Result<JobFailure> {
    match result {
        DaemonMessage::Fail { failure, .. } => Ok(failure),
        other => bail!("expected a failure, got {other:?}"),
    }
}

pub fn job_message(job: &AcquiredJob) -> ServerMessage {
    ServerMessage::Job(Box::new(job.clone()))
}

pub fn outputs(logs: &[JobLog]) -> Vec<&str> {
    logs.iter().map(|l| l.output.as_str()).collect()
}
