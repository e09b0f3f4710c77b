//! A build created while a daemon idles is claimed for that daemon by the statement that
//! creates it (no claim statement of the daemon's own), through real daemons: it runs; a daemon
//! that leaves or stops before the job reaches it hands it back to the queue; and an older job
//! the daemon could run is not overtaken.

use std::time::Duration;

use codersdk::Client;
use codersdk::provisionerd::{DaemonMessage, PROTOCOL_VERSION, ServeParams, ServerMessage};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, Workspace, WorkspaceBuild};
use provisionerd::engines::echo::EchoTemplate;
use provisionerd::{Connector, DaemonAuth, WebSocketConnector};
use testutil::{DaemonSpec, TestApp, eventually, running_workspace, wait_build};
use tokio::sync::mpsc;
use uuid::Uuid;

fn session(client: &Client) -> DaemonAuth {
    DaemonAuth::SessionToken(client.token().unwrap_or_default().to_string())
}

/// `created_at`, `started_at` and `worker_id` of a job, as stored.
async fn job_times(
    app: &TestApp,
    job: Uuid,
) -> anyhow::Result<(
    chrono::DateTime<chrono::Utc>,
    Option<chrono::DateTime<chrono::Utc>>,
    Option<Uuid>,
)> {
    Ok(sqlx::query_as(
        "SELECT created_at, started_at, worker_id FROM provisioner_jobs WHERE id = $1",
    )
    .bind(job)
    .fetch_one(app.pool())
    .await?)
}

async fn wait_idle(app: &TestApp, n: usize) -> anyhow::Result<()> {
    eventually(Duration::from_secs(10), "idle daemons", || async {
        Ok(app.state.dispatcher.idle_count() == n)
    })
    .await
}

fn stop_request() -> CreateWorkspaceBuildRequest {
    CreateWorkspaceBuildRequest {
        transition: "stop".into(),
        ..Default::default()
    }
}

/// A template and a started workspace, built by a daemon that is gone when this returns.
async fn workspace_without_daemons(app: &TestApp, owner: &Client) -> anyhow::Result<Workspace> {
    let first = app.daemon(DaemonSpec::new("first", session(owner)))?;
    let template = app
        .echo_template(owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    let ws = running_workspace(owner, template.id, "ws").await?;
    assert!(first.stop().await?.is_ok());
    Ok(ws)
}

/// A daemon speaking the protocol by hand, idle: it said `Ready` and got nothing.
struct RawDaemon {
    id: Uuid,
    outgoing: mpsc::Sender<DaemonMessage>,
    incoming: mpsc::Receiver<ServerMessage>,
}

impl RawDaemon {
    async fn connect(app: &TestApp, owner: &Client) -> anyhow::Result<Self> {
        let connector = WebSocketConnector::new(app.url.clone(), "default", session(owner))?;
        let params = ServeParams {
            name: "raw".into(),
            provisioners: "echo".into(),
            tags: "{}".into(),
            version: "test".into(),
            protocol_version: PROTOCOL_VERSION.into(),
        };
        let provisionerd::Connection {
            outgoing,
            mut incoming,
        } = connector.connect(&params).await?;
        let id = match tokio::time::timeout(Duration::from_secs(10), incoming.recv()).await? {
            Some(ServerMessage::Welcome { daemon_id, .. }) => daemon_id,
            other => anyhow::bail!("expected Welcome, got {other:?}"),
        };
        outgoing.send(DaemonMessage::Ready).await?;
        Ok(Self {
            id,
            outgoing,
            incoming,
        })
    }
}

/// Starts a stop build of `ws` whose insert waits on a lock of the workspace row (its claim
/// decided, its commit not yet), returning once the build has reserved the only idle daemon.
/// Rolling `lock` back lets the insert commit.
async fn stalled_stop(
    app: &TestApp,
    owner: &Client,
    ws: &Workspace,
) -> anyhow::Result<(
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<anyhow::Result<WorkspaceBuild>>,
)> {
    let mut lock = app.pool().begin().await?;
    sqlx::query("SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE")
        .bind(ws.id)
        .execute(&mut *lock)
        .await?;
    let client = owner.clone();
    let id = ws.id;
    let build =
        tokio::spawn(async move { Ok(client.create_workspace_build(id, &stop_request()).await?) });
    wait_idle(app, 0).await?;
    Ok((lock, build))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_created_while_a_daemon_idles_is_claimed_by_its_insert() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let _daemon = app.daemon(DaemonSpec::new("d", session(&owner)))?;
    let template = app
        .echo_template(&owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    // Both front doors: a new workspace's first build, and a build of a workspace.
    wait_idle(&app, 1).await?;
    let ws = running_workspace(&owner, template.id, "ws").await?;
    let (created, started, worker) = job_times(&app, ws.latest_build.job.id).await?;
    assert_eq!(
        started,
        Some(created),
        "claimed by the statement that created it"
    );
    assert_eq!(ws.latest_build.status.as_str(), "running");

    wait_idle(&app, 1).await?;
    let stop = owner.create_workspace_build(ws.id, &stop_request()).await?;
    assert_eq!(
        stop.job.worker_id, worker,
        "the response shows the job as its insert wrote it: the daemon's"
    );
    assert_eq!(stop.job.status, ProvisionerJobStatus::Running);
    let (created, started, _) = job_times(&app, stop.job.id).await?;
    assert_eq!(started, Some(created));
    assert_eq!(
        wait_build(&owner, stop.id).await?.status.as_str(),
        "stopped"
    );
    Ok(())
}

/// The reserved daemon disconnects while the insert that claims the job for it runs: the
/// hand-over finds no one, and the job goes back to the queue for the next daemon.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_claimed_for_a_daemon_that_left_goes_to_the_next() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let ws = workspace_without_daemons(&app, &owner).await?;
    let raw = RawDaemon::connect(&app, &owner).await?;
    wait_idle(&app, 1).await?;
    let (lock, build) = stalled_stop(&app, &owner, &ws).await?;

    let raw_id = raw.id;
    drop(raw);
    eventually(Duration::from_secs(10), "the daemon gone", || async {
        Ok(!app.state.daemons.is_connected(raw_id))
    })
    .await?;
    lock.rollback().await?;
    let stop = build.await??;
    assert_eq!(stop.job.worker_id, Some(raw_id), "claimed by the insert");
    eventually(Duration::from_secs(10), "the job queued again", || async {
        Ok(job_times(&app, stop.job.id).await?.2.is_none())
    })
    .await?;

    let _next = app.daemon(DaemonSpec::new("next", session(&owner)))?;
    let done = wait_build(&owner, stop.id).await?;
    assert_eq!(done.status.as_str(), "stopped", "{}", done.job.error);
    assert_eq!(done.job.worker_name, "next");
    Ok(())
}

/// The reserved daemon says `Stopping` while the insert runs: it gets `Stopped` and never the
/// job, which goes back to the queue.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopping_daemon_reserved_for_a_job_never_gets_it() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let ws = workspace_without_daemons(&app, &owner).await?;
    let mut raw = RawDaemon::connect(&app, &owner).await?;
    wait_idle(&app, 1).await?;
    let (lock, build) = stalled_stop(&app, &owner, &ws).await?;

    raw.outgoing.send(DaemonMessage::Stopping).await?;
    let answer = tokio::time::timeout(Duration::from_secs(10), raw.incoming.recv()).await?;
    assert_eq!(answer, Some(ServerMessage::Stopped));
    lock.rollback().await?;
    let stop = build.await??;
    assert_eq!(stop.job.worker_id, Some(raw.id), "claimed by the insert");
    eventually(Duration::from_secs(10), "the job queued again", || async {
        Ok(job_times(&app, stop.job.id).await?.2.is_none())
    })
    .await?;
    assert!(raw.incoming.try_recv().is_err(), "no job after Stopped");

    let _next = app.daemon(DaemonSpec::new("next", session(&owner)))?;
    let done = wait_build(&owner, stop.id).await?;
    assert_eq!(done.status.as_str(), "stopped", "{}", done.job.error);
    assert_eq!(done.job.worker_name, "next");
    Ok(())
}

/// A pending job the idle daemon could run, whose posting this coderd never heard (as when it
/// was created on another replica and its notification is still on its way), is older than a
/// build created now: the build is not claimed at its insert, and the daemon runs the older job
/// first.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_pending_job_is_not_overtaken() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let ws = workspace_without_daemons(&app, &owner).await?;
    let _daemon = app.daemon(DaemonSpec::new("d", session(&owner)))?;
    wait_idle(&app, 1).await?;
    // An import no daemon takes (a tag nobody has), then silently given the tags of the
    // workspace's jobs, which the idle daemon takes.
    let older = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[("x", "y")])
        .await?;
    sqlx::query(
        "UPDATE provisioner_jobs o SET tags = b.tags, tags_key = b.tags_key
         FROM provisioner_jobs b WHERE o.id = $1 AND b.id = $2",
    )
    .bind(older.job.id)
    .bind(ws.latest_build.job.id)
    .execute(app.pool())
    .await?;
    assert_eq!(
        app.state.dispatcher.idle_count(),
        1,
        "the daemon still idles"
    );

    let stop = owner.create_workspace_build(ws.id, &stop_request()).await?;
    assert_eq!(stop.job.worker_id, None, "not claimed at its insert");
    let done = wait_build(&owner, stop.id).await?;
    assert_eq!(done.status.as_str(), "stopped", "{}", done.job.error);
    let import = owner.template_version(older.id).await?.job;
    assert_eq!(
        import.status,
        ProvisionerJobStatus::Succeeded,
        "{}",
        import.error
    );
    let (_, import_started, _) = job_times(&app, older.job.id).await?;
    let (_, stop_started, _) = job_times(&app, stop.job.id).await?;
    assert!(
        import_started < stop_started,
        "the older job first: {import_started:?} vs {stop_started:?}"
    );
    Ok(())
}
