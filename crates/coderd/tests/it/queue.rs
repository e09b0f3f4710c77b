//! The job queue through real daemons: the tag rule row by row, organization and user scoping,
//! daemon authentication, and no job ever taken twice.

use std::collections::HashSet;
use std::time::Duration;

use codersdk::Client;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::provisioners::{CreateProvisionerKeyRequest, ProvisionerJobStatus};
use codersdk::templates::TemplateVersion;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, CreateWorkspaceRequest};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use provisionerd::{DaemonAuth, DaemonError};
use testutil::{DaemonSpec, TestApp, TestDaemon, eventually, wait_build, wait_job};

/// How long a job a daemon should NOT take is watched. Dispatch is push-based (milliseconds),
/// so a matching daemon would have taken it long before.
const NOT_TAKEN_FOR: Duration = Duration::from_millis(1500);

fn session(client: &Client) -> DaemonAuth {
    DaemonAuth::SessionToken(client.token().unwrap_or_default().to_string())
}

/// Who runs the daemon and who creates the job, per row.
#[derive(Clone, Copy)]
enum Party {
    /// The owner, organization scope.
    Org,
    /// User `aaa` with `scope=user`.
    UserA,
    /// User `bbb` with `scope=user`.
    UserB,
}

struct Row {
    daemon: (Party, &'static [(&'static str, &'static str)]),
    job: (Party, &'static [(&'static str, &'static str)]),
    runs: bool,
}

fn rows() -> Vec<Row> {
    use Party::*;
    let row = |daemon, job, runs| Row { daemon, job, runs };
    vec![
        row((Org, &[]), (Org, &[]), true),
        row(
            (Org, &[("env", "on-prem")]),
            (Org, &[("env", "on-prem")]),
            true,
        ),
        row(
            (Org, &[("env", "on-prem"), ("dc", "chicago")]),
            (Org, &[("env", "on-prem")]),
            true,
        ),
        row((UserA, &[]), (UserA, &[]), true),
        row((UserA, &[("env", "on-prem")]), (UserA, &[]), true),
        row((Org, &[]), (Org, &[("env", "on-prem")]), false),
        row((Org, &[("env", "on-prem")]), (Org, &[]), false),
        row(
            (Org, &[("env", "on-prem"), ("dc", "new_york")]),
            (Org, &[("env", "on-prem"), ("dc", "chicago")]),
            false,
        ),
        row((UserA, &[]), (Org, &[]), false),
        row((UserA, &[]), (UserB, &[]), false),
        row((Org, &[]), (UserA, &[]), false),
    ]
}

fn with_scope(
    party: Party,
    tags: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut tags = tags.to_vec();
    if !matches!(party, Party::Org) {
        tags.push(("scope", "user"));
    }
    tags
}

#[tokio::test(flavor = "multi_thread")]
async fn every_row_of_the_tag_truth_table() -> anyhow::Result<()> {
    for (i, row) in rows().into_iter().enumerate() {
        let app = TestApp::new().await?;
        let (owner, _) = app.owner().await?;
        // Template admins may import templates, so each party can create jobs of its own.
        let (aaa, _) = app.user(&owner, "aaa", &["template-admin"]).await?;
        let (bbb, _) = app.user(&owner, "bbb", &["template-admin"]).await?;
        let client_of = |p: Party| match p {
            Party::Org => owner.clone(),
            Party::UserA => aaa.clone(),
            Party::UserB => bbb.clone(),
        };
        let (daemon_party, daemon_tags) = row.daemon;
        let daemon = app.daemon(
            DaemonSpec::new("truth", session(&client_of(daemon_party)))
                .tags(&with_scope(daemon_party, daemon_tags)),
        )?;
        let (job_party, job_tags) = row.job;
        let job_client = client_of(job_party);
        let version = app
            .echo_version(
                &job_client,
                "default",
                &EchoTemplate::default(),
                &with_scope(job_party, job_tags),
            )
            .await?;
        if row.runs {
            let job = wait_job(|| async { Ok(job_client.template_version(version.id).await?.job) })
                .await?;
            assert_eq!(
                job.status,
                ProvisionerJobStatus::Succeeded,
                "row {i}: {}",
                job.error
            );
        } else {
            tokio::time::sleep(NOT_TAKEN_FOR).await;
            let job = job_client.template_version(version.id).await?.job;
            assert_eq!(
                job.status,
                ProvisionerJobStatus::Pending,
                "row {i} must not run"
            );
            assert!(job.available_workers.is_empty(), "row {i}");
            assert!(
                !job.waiting_reason.is_empty(),
                "row {i}: a pending job says why"
            );
        }
        daemon.stop().await??;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_of_other_organizations_are_never_taken() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let _daemon = app.daemon(DaemonSpec::new("default-org", session(&owner)))?;
    let elsewhere = app
        .echo_version(&owner, "other", &EchoTemplate::default(), &[])
        .await?;
    let here = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[])
        .await?;
    wait_job(|| async { Ok(owner.template_version(here.id).await?.job) }).await?;
    tokio::time::sleep(NOT_TAKEN_FOR).await;
    let job = owner.template_version(elsewhere.id).await?.job;
    assert_eq!(job.status, ProvisionerJobStatus::Pending);
    assert!(
        job.waiting_reason.contains("No echo provisioner daemon"),
        "{}",
        job.waiting_reason
    );
    // A daemon of that organization takes it at once.
    let _other = app.daemon(DaemonSpec::new("other-org", session(&owner)).org("other"))?;
    let job = wait_job(|| async { Ok(owner.template_version(elsewhere.id).await?.job) }).await?;
    assert_eq!(job.status, ProvisionerJobStatus::Succeeded);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn user_scoped_daemons_build_only_their_owners_workspaces() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (alice, alice_user) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    // Imported by the built-in daemon (untagged); builds need a user-scoped daemon.
    let template = app
        .echo_template(&owner, "personal", &EchoTemplate::default(), &[])
        .await?;
    let scoped_version = app
        .echo_version_of(
            &owner,
            "default",
            Some(template.id),
            &EchoTemplate::default(),
            &[("scope", "user")],
        )
        .await?;
    let owner_daemon =
        app.daemon(DaemonSpec::new("owner-laptop", session(&owner)).tags(&[("scope", "user")]))?;
    wait_job(|| async { Ok(owner.template_version(scoped_version.id).await?.job) }).await?;
    owner_daemon.stop().await??;
    owner
        .update_active_template_version(template.id, scoped_version.id)
        .await?;

    let alice_daemon =
        app.daemon(DaemonSpec::new("alice-laptop", session(&alice)).tags(&[("scope", "user")]))?;
    let create = |client: Client, name: &'static str| {
        let template = template.id;
        async move {
            client
                .create_workspace(
                    "me",
                    &CreateWorkspaceRequest {
                        template_id: Some(template),
                        name: name.into(),
                        ..Default::default()
                    },
                )
                .await
        }
    };
    let alices = create(alice.clone(), "mine").await?;
    let bobs = create(bob.clone(), "his").await?;
    let built = wait_build(&alice, alices.latest_build.id).await?;
    assert_eq!(built.status.as_str(), "running");
    assert_eq!(
        built.job.tags.get("owner"),
        Some(&alice_user.id.to_string())
    );
    tokio::time::sleep(NOT_TAKEN_FOR).await;
    let bobs_build = bob.workspace_build(bobs.latest_build.id).await?;
    assert_eq!(
        bobs_build.job.status,
        ProvisionerJobStatus::Pending,
        "alice's daemon never takes bob's build"
    );
    assert_eq!(
        bobs_build.matched_provisioners.map(|m| m.available),
        Some(0)
    );
    let daemons = owner.provisioner_daemons("coder").await?;
    let alice_row = daemons
        .iter()
        .find(|d| d.name == "alice-laptop")
        .expect("listed");
    assert_eq!(
        alice_row.tags.get("owner"),
        Some(&alice_user.id.to_string()),
        "owner forced to the user"
    );
    alice_daemon.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn members_need_scope_user_to_run_daemons() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let daemon = app.daemon(DaemonSpec::new("nope", session(&member)))?;
    match daemon.finished(Duration::from_secs(10)).await? {
        Err(DaemonError::Forbidden(message)) => {
            assert!(message.contains("scope=user"), "{message}")
        }
        other => panic!("expected a forbidden daemon, got {other:?}"),
    }
    let (template_admin, _) = app.user(&owner, "ta", &["template-admin"]).await?;
    let ok = app.daemon(DaemonSpec::new("ta-daemon", session(&template_admin)))?;
    eventually(
        Duration::from_secs(10),
        "template admin daemon registered",
        || async {
            Ok(owner
                .provisioner_daemons("coder")
                .await?
                .iter()
                .any(|d| d.name == "ta-daemon"))
        },
    )
    .await?;
    ok.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn psk_and_key_daemons_work_and_wrong_secrets_are_refused() -> anyhow::Result<()> {
    let psk = "a-shared-secret-for-daemons";
    let app = TestApp::with_options(|o| o.deployment.provisioner_psk = Some(psk.into())).await?;
    let (owner, _) = app.owner().await?;

    let wrong_psk = app.daemon(DaemonSpec::new("bad-psk", DaemonAuth::Psk("nope".into())))?;
    assert!(matches!(
        wrong_psk.finished(Duration::from_secs(10)).await?,
        Err(DaemonError::Unauthorized(_))
    ));
    let wrong_key = app.daemon(DaemonSpec::new("bad-key", DaemonAuth::Key("nope".into())))?;
    assert!(matches!(
        wrong_key.finished(Duration::from_secs(10)).await?,
        Err(DaemonError::Unauthorized(_))
    ));

    let psk_daemon = app.daemon(DaemonSpec::new("psk", DaemonAuth::Psk(psk.into())))?;
    let version = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[])
        .await?;
    let job = wait_job(|| async { Ok(owner.template_version(version.id).await?.job) }).await?;
    assert_eq!(job.status, ProvisionerJobStatus::Succeeded);
    assert_eq!(job.worker_name, "psk");
    psk_daemon.stop().await??;

    let key = owner
        .create_provisioner_key(
            "coder",
            &CreateProvisionerKeyRequest {
                name: "gpu".into(),
                tags: [("gpu".to_string(), "true".to_string())].into(),
            },
        )
        .await?;
    let listed = owner.provisioner_keys("coder").await?;
    assert_eq!(listed[0].tags.get("gpu").map(String::as_str), Some("true"));
    let key_daemon = app.daemon(DaemonSpec::new("gpu-box", DaemonAuth::Key(key.key.clone())))?;
    let gpu_job = app
        .echo_version(
            &owner,
            "default",
            &EchoTemplate::default(),
            &[("gpu", "true")],
        )
        .await?;
    let job = wait_job(|| async { Ok(owner.template_version(gpu_job.id).await?.job) }).await?;
    assert_eq!(
        job.status,
        ProvisionerJobStatus::Succeeded,
        "the key's tags reach the daemon"
    );
    let daemons = owner.provisioner_daemons("coder").await?;
    assert_eq!(
        daemons
            .iter()
            .find(|d| d.name == "gpu-box")
            .and_then(|d| d.key_name.clone())
            .as_deref(),
        Some("gpu")
    );
    key_daemon.stop().await??;

    let adds_tags = app.daemon(
        DaemonSpec::new("greedy", DaemonAuth::Key(key.key.clone())).tags(&[("extra", "1")]),
    )?;
    assert!(
        adds_tags.finished(Duration::from_secs(10)).await?.is_err(),
        "a key daemon may not add tags"
    );

    owner.delete_provisioner_key("coder", "gpu").await?;
    let revoked = app.daemon(DaemonSpec::new("revoked", DaemonAuth::Key(key.key)))?;
    assert!(matches!(
        revoked.finished(Duration::from_secs(10)).await?,
        Err(DaemonError::Unauthorized(_))
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn psk_authentication_is_off_without_a_configured_key() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    app.owner().await?;
    let daemon = app.daemon(DaemonSpec::new("psk", DaemonAuth::Psk("anything".into())))?;
    match daemon.finished(Duration::from_secs(10)).await? {
        Err(DaemonError::Unauthorized(message)) => {
            assert!(message.contains("not enabled"), "{message}")
        }
        other => panic!("expected unauthorized, got {other:?}"),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn many_jobs_many_daemons_no_job_taken_twice_and_one_job_per_daemon() -> anyhow::Result<()> {
    const DAEMONS: usize = 4;
    const JOBS: usize = 40;
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let mut daemons = Vec::new();
    for i in 0..DAEMONS {
        daemons.push(app.daemon(DaemonSpec::new(&format!("d{i}"), session(&owner)))?);
    }
    eventually(Duration::from_secs(10), "daemons registered", || async {
        Ok(owner.provisioner_daemons("coder").await?.len() == DAEMONS)
    })
    .await?;
    // Each import takes a while, so the daemons work concurrently.
    let slow = EchoTemplate {
        import: Some(provisionerd::engines::echo::ImportStage {
            delay_ms: 150,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut versions = Vec::new();
    for _ in 0..JOBS {
        versions.push(app.echo_version(&owner, "default", &slow, &[]).await?);
    }
    // Watch from the outside: never more than one running job per daemon.
    let mut max_running = 0;
    let mut done = false;
    while !done {
        let jobs = owner.provisioner_jobs("coder", None, 1000).await?;
        let running: Vec<_> = jobs
            .iter()
            .filter(|j| j.status == ProvisionerJobStatus::Running)
            .collect();
        let mut workers = HashSet::new();
        for job in &running {
            assert!(
                workers.insert(job.worker_id),
                "a daemon holds two running jobs"
            );
        }
        max_running = max_running.max(running.len());
        done = jobs.iter().all(|j| !j.status.is_active());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        max_running > 1,
        "daemons worked in parallel (saw at most {max_running})"
    );
    assert!(max_running <= DAEMONS);
    let mut seen = HashSet::new();
    for v in &versions {
        let version = owner.template_version(v.id).await?;
        assert_eq!(version.job.status, ProvisionerJobStatus::Succeeded);
        assert!(seen.insert(version.job.id));
        // Each job ran once: exactly one "Setting up" line per job.
        let logs = owner.template_version_logs(v.id).await?;
        assert_eq!(
            logs.iter()
                .filter(|l| l.stage == "Setting up" && l.log_source == "provisioner_daemon")
                .count()
                .min(1),
            1
        );
    }
    for d in daemons {
        d.stop().await??;
    }
    Ok(())
}

/// The answer to a build's POST while every daemon is busy: pending, first in its queue, with
/// the daemons that could run it (read together with the queue in one statement).
#[tokio::test(flavor = "multi_thread")]
async fn a_build_posted_while_the_daemons_are_busy_is_answered_with_its_place() -> anyhow::Result<()>
{
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(
            &owner,
            "slow-start",
            &EchoTemplate {
                start: Some(BuildStage {
                    delay_ms: 3000,
                    ..Default::default()
                }),
                ..Default::default()
            },
            &[],
        )
        .await?;
    let create = |name: &str| CreateWorkspaceRequest {
        template_id: Some(template.id),
        name: name.into(),
        ..Default::default()
    };
    let first = owner.create_workspace("me", &create("first")).await?;
    wait_build(&owner, first.latest_build.id).await?;
    let busy = owner.create_workspace("me", &create("busy")).await?;
    eventually(
        Duration::from_secs(10),
        "the daemon takes the busy build",
        || async {
            let job = owner.workspace_build(busy.latest_build.id).await?.job;
            Ok(job.status == ProvisionerJobStatus::Running)
        },
    )
    .await?;
    let stop = owner
        .create_workspace_build(
            first.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(stop.job.status, ProvisionerJobStatus::Pending);
    assert_eq!((stop.job.queue_position, stop.job.queue_size), (1, 1));
    let matched = stop
        .matched_provisioners
        .expect("a new build names the daemons that could run it");
    assert_eq!((matched.count, matched.available), (1, 1));
    assert_eq!(
        wait_build(&owner, stop.id).await?.status.as_str(),
        "stopped"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn n_daemons_run_n_builds_at_once() -> anyhow::Result<()> {
    const N: usize = 3;
    let app = TestApp::with_options(|o| o.provisioner_daemons = N as u32).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(
            &owner,
            "slow",
            &EchoTemplate {
                start: Some(BuildStage {
                    delay_ms: 1500,
                    ..Default::default()
                }),
                ..Default::default()
            },
            &[],
        )
        .await?;
    let mut builds = Vec::new();
    for i in 0..N + 1 {
        let ws = owner
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(template.id),
                    name: format!("ws{i}"),
                    ..Default::default()
                },
            )
            .await?;
        builds.push(ws.latest_build.id);
    }
    eventually(
        Duration::from_secs(10),
        "N builds running at once",
        || async {
            let jobs = owner
                .provisioner_jobs("coder", Some(ProvisionerJobStatus::Running), 100)
                .await?;
            Ok(jobs.len() == N)
        },
    )
    .await?;
    let pending = owner
        .provisioner_jobs("coder", Some(ProvisionerJobStatus::Pending), 100)
        .await?;
    assert_eq!(
        pending.len(),
        1,
        "the extra build waits: one job per daemon"
    );
    assert_eq!(pending[0].queue_position, 1);
    assert!(
        pending[0].waiting_reason.is_empty(),
        "daemons are online, just busy"
    );
    for id in builds {
        assert_eq!(wait_build(&owner, id).await?.status.as_str(), "running");
    }
    Ok(())
}

/// A daemon with a short shutdown grace, running a 3 s import when this returns. `running` in
/// the database means claimed, not yet received: the daemon's first log lines say it runs the
/// job. (A job still on its way when the daemon stops is handed back too, without these lines:
/// see `a_stopping_idle_daemon_hands_back_the_job_on_its_way`.)
async fn slow_import_on_a_leaving_daemon(
    app: &TestApp,
    owner: &Client,
) -> anyhow::Result<(TestDaemon, TemplateVersion)> {
    let mut spec = DaemonSpec::new("leaving", session(owner));
    spec.shutdown_grace = Duration::from_millis(300);
    let leaving = app.daemon(spec)?;
    let slow = EchoTemplate {
        import: Some(provisionerd::engines::echo::ImportStage {
            delay_ms: 3_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    let version = app.echo_version(owner, "default", &slow, &[]).await?;
    eventually(
        Duration::from_secs(10),
        "the daemon running the import",
        || async { Ok(!owner.template_version_logs(version.id).await?.is_empty()) },
    )
    .await?;
    Ok((leaving, version))
}

/// A daemon told to stop (`docker stop` of a provisioner container) whose grace runs out before
/// its job changed anything hands the job back: it is pending again, and the next daemon runs
/// it from the start instead of the build failing.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopping_daemon_hands_back_a_job_that_changed_nothing() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (leaving, version) = slow_import_on_a_leaving_daemon(&app, &owner).await?;

    // Another daemon waits idle already: the hand-back wakes it (not its safety poll, 10 s).
    let _next = app.daemon(DaemonSpec::new("next", session(&owner)))?;
    eventually(Duration::from_secs(10), "the other daemon idle", || async {
        Ok(app.state.dispatcher.idle_count() == 1)
    })
    .await?;

    assert!(leaving.stop().await?.is_ok(), "the daemon exits cleanly");
    eventually(
        Duration::from_secs(5),
        "the other daemon taking the job",
        || async { Ok(owner.template_version(version.id).await?.job.worker_name == "next") },
    )
    .await?;
    let job = wait_job(|| async { Ok(owner.template_version(version.id).await?.job) }).await?;
    assert_eq!(job.status, ProvisionerJobStatus::Succeeded, "{}", job.error);
    assert_eq!(job.worker_name, "next");
    let logs = owner.template_version_logs(version.id).await?;
    assert!(
        logs.iter()
            .any(|l| l.output.contains("handing the job back to the queue")),
        "the attempt's lines stay in the job's log"
    );
    Ok(())
}

/// A hand-back reaches the daemons of every replica: the job was posted long before, so each
/// replica has seen it, yet the idle daemon on the other replica takes it at once instead of
/// on its safety poll (10 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_job_handed_back_on_one_replica_wakes_a_daemon_on_another() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let other = app.replica(|_| {}).await?;
    let (owner, _) = app.owner().await?;
    let (leaving, version) = slow_import_on_a_leaving_daemon(&app, &owner).await?;

    let _next = other.daemon(DaemonSpec::new("next", session(&owner)))?;
    eventually(
        Duration::from_secs(10),
        "the other replica's daemon idle",
        || async { Ok(other.state.dispatcher.idle_count() == 1) },
    )
    .await?;
    assert_eq!(app.state.dispatcher.idle_count(), 0);

    assert!(leaving.stop().await?.is_ok(), "the daemon exits cleanly");
    eventually(
        Duration::from_secs(5),
        "the other replica's daemon taking the job",
        || async { Ok(owner.template_version(version.id).await?.job.worker_name == "next") },
    )
    .await?;
    let job = wait_job(|| async { Ok(owner.template_version(version.id).await?.job) }).await?;
    assert_eq!(job.status, ProvisionerJobStatus::Succeeded, "{}", job.error);
    Ok(())
}

/// An idle daemon that stops just as coderd claims a job for it: the job reads `running` (its
/// claim is committed) while the `Job` message is still on its way. The daemon's `Stopping`
/// (protocol 1.3) is answered only after that job, so the daemon gets it and hands it back, and
/// no job follows `Stopped`.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopping_idle_daemon_hands_back_the_job_on_its_way() -> anyhow::Result<()> {
    use codersdk::provisionerd::{DaemonMessage, PROTOCOL_VERSION, ServeParams, ServerMessage};
    use provisionerd::{Connector, WebSocketConnector};

    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let connector = WebSocketConnector::new(app.url.clone(), "default", session(&owner))?;
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
    async fn recv(
        incoming: &mut tokio::sync::mpsc::Receiver<ServerMessage>,
    ) -> anyhow::Result<ServerMessage> {
        tokio::time::timeout(Duration::from_secs(10), incoming.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("coderd hung up"))
    }
    let welcome = recv(&mut incoming).await?;
    assert!(
        matches!(welcome, ServerMessage::Welcome { .. }),
        "{welcome:?}"
    );
    outgoing.send(DaemonMessage::Ready).await?;

    let version = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[])
        .await?;
    eventually(Duration::from_secs(10), "the import claimed", || async {
        Ok(owner.template_version(version.id).await?.job.status == ProvisionerJobStatus::Running)
    })
    .await?;
    // The daemon stops without having read the job.
    outgoing.send(DaemonMessage::Stopping).await?;
    let job_id = match recv(&mut incoming).await? {
        ServerMessage::Job(job) => job.job_id,
        other => anyhow::bail!("expected the claimed job before Stopped, got {other:?}"),
    };
    assert_eq!(job_id, version.job.id);
    assert_eq!(recv(&mut incoming).await?, ServerMessage::Stopped);
    outgoing
        .send(DaemonMessage::Release {
            job_id,
            logs: vec![],
        })
        .await?;
    assert_eq!(
        recv(&mut incoming).await?,
        ServerMessage::Finished { job_id }
    );
    let job = owner.template_version(version.id).await?.job;
    assert_eq!(job.status, ProvisionerJobStatus::Pending, "{}", job.error);
    assert_eq!(job.worker_id, None);

    // Still connected, the daemon is offered nothing after `Stopped`, not even its own hand-back.
    let other = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &[])
        .await?;
    tokio::time::sleep(NOT_TAKEN_FOR).await;
    assert!(incoming.try_recv().is_err(), "no job after Stopped");
    for v in [version.id, other.id] {
        let job = owner.template_version(v).await?.job;
        assert_eq!(job.status, ProvisionerJobStatus::Pending);
    }
    Ok(())
}

/// A daemon whose result says it is idle (protocol 1.2) gets its next job claimed in the
/// result's own transaction; a resent result claims nothing, and an empty queue leaves the
/// daemon waiting.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_and_the_next_claim_commit_together() -> anyhow::Result<()> {
    use coderd_store::{Claimant, Completion, FinishOutcome, ImportResult};
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    // A tag no running daemon has: only this test claims these jobs.
    let tags = [("claim-test", "yes")];
    let first = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &tags)
        .await?;
    let second = app
        .echo_version(&owner, "default", &EchoTemplate::default(), &tags)
        .await?;
    let (org, key): (uuid::Uuid, String) =
        sqlx::query_as("SELECT organization_id, tags_key FROM provisioner_jobs WHERE id = $1")
            .bind(first.job.id)
            .fetch_one(app.pool())
            .await?;
    let store = &app.state.store;
    let worker = uuid::Uuid::new_v4();
    let provisioners = ["echo".to_string()];
    let keys = [key];
    let claimant = Claimant {
        org,
        provisioners: &provisioners,
        tag_keys: &keys,
        worker,
    };
    let held = store
        .acquire_job(org, &provisioners, &keys, worker)
        .await?
        .expect("the first job");
    assert_eq!(held.id, first.job.id, "oldest first");
    let completion = Completion::Import {
        result: ImportResult {
            rich_parameters: serde_json::json!([]),
            variables: serde_json::json!([]),
            external_auth_providers: serde_json::json!([]),
            readme: String::new(),
        },
        start_resources: vec![],
        stop_resources: vec![],
        features: Default::default(),
    };
    let (outcome, next) = store
        .complete_job_and_claim(held.id, worker, &completion, &[], &[], Some(&claimant))
        .await?;
    assert_eq!(outcome, FinishOutcome::Recorded);
    let next = next.expect("the next job, claimed with the result");
    assert_eq!(next.id, second.job.id);
    assert_eq!(next.worker_id, Some(worker));
    assert!(next.started_at.is_some());
    let version = owner.template_version(first.id).await?;
    assert_eq!(version.job.status, ProvisionerJobStatus::Succeeded);

    let (outcome, again) = store
        .complete_job_and_claim(held.id, worker, &completion, &[], &[], Some(&claimant))
        .await?;
    assert_eq!(
        (outcome, again),
        (FinishOutcome::AlreadyRecorded, None),
        "a resent result claims nothing"
    );

    let failure = codersdk::provisionerd::JobFailure::new("boom");
    let (outcome, none) = store
        .fail_job_and_claim(next.id, worker, &failure, &[], Some(&claimant))
        .await?;
    assert_eq!((outcome, none), (FinishOutcome::Recorded, None));
    let version = owner.template_version(second.id).await?;
    assert_eq!(version.job.status, ProvisionerJobStatus::Failed);
    Ok(())
}

/// Replicas on one host each run their own built-in daemons. Registered under the same names,
/// they would share rows: one replica's session would take the job the other replica's daemon of
/// that name runs, and fail it when its own daemon said it was idle.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_on_one_host_register_their_built_in_daemons_apart() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 2).await?;
    let _other = app.replica(|o| o.provisioner_daemons = 2).await?;
    let (owner, _) = app.owner().await?;
    eventually(
        Duration::from_secs(10),
        "both replicas' built-in daemons connected",
        || async {
            let daemons = owner.provisioner_daemons("coder").await?;
            Ok(daemons
                .iter()
                .filter(|d| d.status.as_str() != "offline")
                .count()
                == 4)
        },
    )
    .await?;
    let names: HashSet<String> = owner
        .provisioner_daemons("coder")
        .await?
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    Ok(())
}
