//! The domain layer called directly, as front doors other than the API do (the lifecycle
//! executor as the system actor, the dashboard as a user), with the results checked through
//! the API; and the build options only the domain layer's builder had to learn (reasons,
//! orphaning).

use coderd_authz::{Action, Subject};
use coderd_core::domain::Error;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use coderd_core::domain::logs::{JobLogTail, LogTail};
use coderd_core::domain::{resolve, search, session, views};
use codersdk::ClientError;
use codersdk::proto::{Agent, AgentAuth, Resource};
use codersdk::provisionerd::Transition;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, CreateWorkspaceRequest, WorkspaceStatus};
use provisionerd::engines::echo::{BuildStage, EchoState, EchoTemplate, Flood};
use testutil::{TestApp, wait_build};
use uuid::Uuid;

fn template() -> EchoTemplate {
    EchoTemplate {
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(Uuid::new_v4().to_string()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

/// A running workspace of `client` (the owner creates the template).
async fn running(
    app: &TestApp,
    owner: &codersdk::Client,
    client: &codersdk::Client,
) -> anyhow::Result<codersdk::workspaces::Workspace> {
    let template = app.echo_template(owner, "tpl", &template(), &[]).await?;
    testutil::running_workspace(client, template.id, "dev").await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_system_actor_stops_a_workspace_for_autostop_on_behalf_of_its_owner()
-> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, me) = app.user(&owner, "member", &[]).await?;
    let ws = running(&app, &owner, &member).await?;

    let row = app.state.store.workspace_by_id(ws.id, false).await?;
    let build = builds::create_build(
        &app.state,
        &Subject::system(),
        &row,
        BuildRequest::new(Transition::Stop, BuildReason::Autostop),
    )
    .await?;
    let seen = wait_build(&member, build.id).await?;
    assert_eq!(seen.status, WorkspaceStatus::Stopped);
    assert_eq!(seen.reason, "autostop");
    assert_eq!(seen.build_number, 2);
    assert_eq!(
        (seen.initiator_id, seen.initiator_name.as_str()),
        (me.id, "member"),
        "coderd's builds are initiated on the owner's behalf"
    );
    assert_eq!(
        member.workspace(ws.id).await?.latest_build.reason,
        "autostop"
    );

    // Autostart back on the template's active version.
    let build = builds::create_build(
        &app.state,
        &Subject::system(),
        &row,
        BuildRequest {
            version: VersionChoice::Active,
            ..BuildRequest::new(Transition::Start, BuildReason::Autostart)
        },
    )
    .await?;
    let seen = wait_build(&member, build.id).await?;
    assert_eq!(
        (seen.status, seen.reason.as_str()),
        (WorkspaceStatus::Running, "autostart")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_name_their_reason_but_never_a_lifecycle_one() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let ws = running(&app, &owner, &owner).await?;
    let refused = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                reason: "autostop".into(),
                ..Default::default()
            },
        )
        .await
        .expect_err("a lifecycle reason");
    let ClientError::Api { status, response } = refused else {
        panic!("not an API error");
    };
    assert_eq!(status, 400);
    assert_eq!(response.validations[0].field, "reason");
    assert_eq!(
        owner.workspace_builds(ws.id).await?.len(),
        1,
        "nothing written"
    );

    let stop = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                reason: "cli".into(),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(stop.reason, "cli");
    wait_build(&owner, stop.id).await?;
    let start = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                reason: "ssh_connection".into(),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(wait_build(&owner, start.id).await?.reason, "ssh_connection");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn template_managers_orphan_a_workspace_and_its_delete_starts_from_no_state()
-> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let ws = running(&app, &owner, &member).await?;
    let orphan = |transition: &str| CreateWorkspaceBuildRequest {
        transition: transition.into(),
        orphan: true,
        ..Default::default()
    };

    let by_member = member
        .create_workspace_build(ws.id, &orphan("delete"))
        .await
        .expect_err("members may not orphan");
    assert_eq!(status(&by_member), 403);
    let stop = owner
        .create_workspace_build(ws.id, &orphan("stop"))
        .await
        .expect_err("only deletes orphan");
    assert_eq!(status(&stop), 400);
    assert_eq!(
        member.workspace_builds(ws.id).await?.len(),
        1,
        "nothing written"
    );

    let delete = owner
        .create_workspace_build(ws.id, &orphan("delete"))
        .await?;
    let done = wait_build(&owner, delete.id).await?;
    assert_eq!(done.status, WorkspaceStatus::Deleted);
    let state =
        EchoState::parse(&owner.workspace_build_state(done.id).await?).expect("an echo state");
    assert_eq!(
        (state.generation, state.previous),
        (1, None),
        "the engine was handed no state, so it destroyed nothing"
    );
    assert_eq!(
        status(&member.workspace(ws.id).await.expect_err("gone")),
        410
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_system_actor_cannot_create_workspaces_and_refusals_are_typed() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, first) = app.owner().await?;
    let mut slow = template();
    if let Some(start) = slow.start.as_mut() {
        start.delay_ms = 3000;
    }
    let template = app.echo_template(&owner, "slow", &slow, &[]).await?;
    let create = CreateWorkspaceRequest {
        template_id: Some(template.id),
        name: "dev".into(),
        ..Default::default()
    };
    let refused =
        builds::create_workspace(&app.state, &Subject::system(), first.user_id, None, &create)
            .await
            .expect_err("coderd never creates workspaces");
    assert!(matches!(refused, Error::Forbidden { .. }), "{refused:?}");

    let ws = owner.create_workspace("me", &create).await?;
    let row = app.state.store.workspace_by_id(ws.id, false).await?;
    let busy = builds::create_build(
        &app.state,
        &Subject::system(),
        &row,
        BuildRequest::new(Transition::Stop, BuildReason::Autostop),
    )
    .await
    .expect_err("the first build is still running");
    assert!(matches!(busy, Error::Conflict { .. }), "{busy:?}");
    let bad = builds::create_build(
        &app.state,
        &Subject::system(),
        &row,
        BuildRequest {
            version: VersionChoice::Exact(Uuid::new_v4()),
            ..BuildRequest::new(Transition::Start, BuildReason::Autostart)
        },
    )
    .await
    .expect_err("no such version");
    assert!(matches!(bad, Error::BadRequest { .. }), "{bad:?}");
    assert_eq!(
        owner.workspace_builds(ws.id).await?.len(),
        1,
        "nothing written"
    );
    Ok(())
}

/// The subject of a logged-in client, as a front door other than the API would build it.
async fn subject_of(app: &TestApp, client: &codersdk::Client) -> anyhow::Result<Subject> {
    let token = client.token().expect("a logged-in client");
    Ok(session::authenticate(&app.state, token).await?.subject)
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_resolve_for_connect_only_for_who_may_connect_and_only_while_current()
-> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (other, _) = app.user(&owner, "other", &[]).await?;
    let (admin, _) = app.user(&owner, "admin", &["template-admin"]).await?;
    let ws = running(&app, &owner, &member).await?;
    let agent = ws.latest_build.resources[0].agents[0].id;

    let mine = subject_of(&app, &member).await?;
    let target = resolve::agent(&app.state, &mine, agent, Action::Connect).await?;
    assert_eq!((target.agent_id, target.workspace.id), (agent, ws.id));
    assert!(target.current);

    let stranger = subject_of(&app, &other).await?;
    let hidden = resolve::agent(&app.state, &stranger, agent, Action::Connect)
        .await
        .expect_err("not theirs");
    assert!(matches!(hidden, Error::NotFound), "{hidden:?}");
    let missing = resolve::agent(&app.state, &mine, Uuid::new_v4(), Action::Connect)
        .await
        .expect_err("no such agent");
    assert!(matches!(missing, Error::NotFound), "{missing:?}");

    // Template admins see every workspace but connect into none of others'.
    let reader = subject_of(&app, &admin).await?;
    resolve::agent(&app.state, &reader, agent, Action::Read).await?;
    let refused = resolve::agent(&app.state, &reader, agent, Action::Connect)
        .await
        .expect_err("reading is not connecting");
    assert!(matches!(refused, Error::Forbidden { .. }), "{refused:?}");
    assert!(
        resolve::agent(&app.state, &Subject::system(), agent, Action::Connect)
            .await
            .is_err(),
        "coderd's own actor never connects into a workspace"
    );

    // A new build replaces the agent: the old one stays readable, never reachable.
    let restart = member
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "start".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&member, restart.id).await?;
    assert!(
        !resolve::agent(&app.state, &mine, agent, Action::Read)
            .await?
            .current
    );
    let stale = resolve::agent(&app.state, &mine, agent, Action::Connect)
        .await
        .expect_err("an old build's agent");
    assert!(matches!(stale, Error::BadRequest { .. }), "{stale:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_domain_renders_exactly_what_the_api_returns() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (other, _) = app.user(&owner, "other", &[]).await?;
    let ws = running(&app, &owner, &member).await?;
    let mine = subject_of(&app, &member).await?;

    let row = resolve::workspace_by_name(&app.state, &mine, "me", "dev", Action::Read).await?;
    let view = views::workspace(&app.state, row).await?;
    let api = member.workspace(ws.id).await?;
    assert_eq!(serde_json::to_value(&view)?, serde_json::to_value(&api)?);

    let (build, _) = resolve::build_by_number(&app.state, &mine, "member", "dev", 1).await?;
    assert_eq!(
        serde_json::to_value(views::build(&app.state, build).await?)?,
        serde_json::to_value(member.workspace_build(ws.latest_build.id).await?)?
    );

    let stranger = subject_of(&app, &other).await?;
    for found in [
        resolve::workspace_by_name(&app.state, &stranger, "member", "dev", Action::Read)
            .await
            .map(|_| ()),
        resolve::workspace(&app.state, &stranger, ws.id, Action::Read, false)
            .await
            .map(|_| ()),
        resolve::build(&app.state, &stranger, ws.latest_build.id)
            .await
            .map(|_| ()),
    ] {
        assert!(matches!(found, Err(Error::NotFound)), "{found:?}");
    }
    let (ids, count) = search::workspaces(&app.state, &stranger, "", 10, 0).await?;
    assert_eq!(
        (ids.len(), count),
        (0, 0),
        "lists show only what one may see"
    );
    let (ids, count) = search::workspaces(&app.state, &mine, "owner:me dev", 10, 0).await?;
    assert_eq!((ids, count), (vec![ws.id], 1));
    let bad = search::workspaces(&app.state, &mine, "colour:blue", 10, 0)
        .await
        .expect_err("unknown filter");
    assert!(matches!(bad, Error::BadRequest { .. }), "{bad:?}");

    let template = resolve::template(&app.state, &mine, ws.template_id).await?;
    let version = resolve::version(&app.state, &mine, template.active_version_id).await?;
    assert_eq!(
        serde_json::to_value(views::version(&app.state, version).await?)?,
        serde_json::to_value(member.template_version(template.active_version_id).await?)?
    );

    let refused = session::authenticate(&app.state, "not-a-token")
        .await
        .expect_err("garbage");
    assert!(matches!(refused, Error::Unauthorized { .. }), "{refused:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_log_tail_returns_the_whole_log_live_and_ends_with_the_job() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let chatty = EchoTemplate {
        start: Some(BuildStage {
            flood: Some(Flood {
                lines: 200,
                line_bytes: 40,
                ..Default::default()
            }),
            delay_ms: 300,
            ..Default::default()
        }),
        ..Default::default()
    };
    let template = app.echo_template(&owner, "chatty", &chatty, &[]).await?;
    let ws = owner
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template.id),
                name: "dev".into(),
                ..Default::default()
            },
        )
        .await?;
    let mine = subject_of(&app, &owner).await?;
    let (build, _) = resolve::build(&app.state, &mine, ws.latest_build.id).await?;
    // Joins while the build runs; a second tail starts part-way through.
    let mut tail = JobLogTail::new(&app.state, build.job_id, 0);
    let mut live = Vec::new();
    let mut middle = None;
    while let Some(lines) =
        tokio::time::timeout(std::time::Duration::from_secs(60), tail.next()).await??
    {
        assert!(!lines.is_empty(), "batches are never empty");
        live.extend(lines.into_iter().map(|l| (l.id, l.output)));
        // Part-way through a batch: the flood may arrive in one, and no line follows it.
        if middle.is_none() && live.len() > 50 {
            let after = live[50].0;
            middle = Some((after, JobLogTail::new(&app.state, build.job_id, after)));
        }
    }
    let stored = owner.workspace_build_logs(ws.latest_build.id).await?;
    assert_eq!(
        live,
        stored
            .iter()
            .map(|l| (l.id, l.output.clone()))
            .collect::<Vec<_>>(),
        "every stored line, in order, once, and the tail ended with the job"
    );
    assert!(
        stored
            .iter()
            .filter(|l| l.output.starts_with("flood line"))
            .count()
            == 200
    );
    let (after, mut middle) = middle.expect("joined part-way");
    let mut rest = Vec::new();
    while let Some(lines) = middle.next().await? {
        rest.extend(lines.into_iter().map(|l| l.id));
    }
    assert_eq!(
        rest,
        live.iter()
            .map(|(id, _)| *id)
            .filter(|id| *id > after)
            .collect::<Vec<_>>(),
        "a tail started part-way returns exactly what followed"
    );
    Ok(())
}

/// Builds are created without a lock (one statement each): the API's and the lifecycle
/// executor's asks for the same workspace, all at once, still make exactly one build per
/// round, numbered in order, and a refused ask leaves no job and no audit entry behind.
#[tokio::test(flavor = "multi_thread")]
async fn api_and_lifecycle_builds_asked_at_once_make_one_build_each_time() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    // Each build stays active while a round's asks arrive: a build asked for after the
    // previous one finished is a new build, rightly.
    let mut slow = template();
    for stage in [&mut slow.start, &mut slow.stop] {
        stage.get_or_insert_with(Default::default).delay_ms = 1000;
    }
    let template = app.echo_template(&owner, "slow", &slow, &[]).await?;
    let ws = testutil::running_workspace(&owner, template.id, "dev").await?;
    let person = subject_of(&app, &owner).await?;
    let system = Subject::system();
    let row = app.state.store.workspace_by_id(ws.id, false).await?;
    let rounds = 4;
    for round in 0..rounds {
        let latest = app.state.store.latest_builds(&[ws.id]).await?.remove(0);
        let transition = if round % 2 == 0 {
            Transition::Stop
        } else {
            Transition::Start
        };
        let asks = (0..8).map(|i| {
            let (subject, req) = if i % 2 == 0 {
                (&person, BuildRequest::new(transition, BuildReason::Cli))
            } else {
                // The executor's ask: only if `latest` is still the latest build.
                let req = BuildRequest {
                    expect_latest: Some(latest.id),
                    ..BuildRequest::new(transition, BuildReason::Autostop)
                };
                (&system, req)
            };
            builds::create_build(&app.state, subject, &row, req)
        });
        let answers = futures::future::join_all(asks).await;
        let mut created = Vec::new();
        for answer in answers {
            match answer {
                Ok(build) => created.push(build),
                Err(Error::Conflict { .. }) => {}
                Err(e) => anyhow::bail!("round {round}: {e:?}"),
            }
        }
        assert_eq!(created.len(), 1, "round {round}: one build");
        assert_eq!(created[0].build_number, latest.build_number + 1);
        wait_build(&owner, created[0].id).await?;
    }
    let numbers: Vec<i32> = sqlx::query_scalar(
        "SELECT build_number FROM workspace_builds WHERE workspace_id = $1 ORDER BY 1",
    )
    .bind(ws.id)
    .fetch_all(app.pool())
    .await?;
    assert_eq!(numbers, (1..=rounds + 1).collect::<Vec<i32>>());
    let entries: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_logs WHERE resource_type = 'workspace_build'
           AND additional_fields->>'workspace_id' = $1",
    )
    .bind(ws.id.to_string())
    .fetch_one(app.pool())
    .await?;
    assert_eq!(entries, i64::from(rounds) + 1, "one entry per build");
    let jobless: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM provisioner_jobs j WHERE j.type = 'workspace_build'
           AND NOT EXISTS (SELECT 1 FROM workspace_builds b WHERE b.job_id = j.id)",
    )
    .fetch_one(app.pool())
    .await?;
    assert_eq!(jobless, 0, "a refused ask writes no job");
    Ok(())
}

/// A workspace read before its delete build finished is not built again: the build's own
/// statement checks that the workspace still exists.
#[tokio::test(flavor = "multi_thread")]
async fn a_build_of_a_workspace_deleted_since_it_was_read_is_not_found() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let ws = running(&app, &owner, &owner).await?;
    let stale = app.state.store.workspace_by_id(ws.id, false).await?;
    let delete = owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "delete".into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(&owner, delete.id).await?;
    let refused = builds::create_build(
        &app.state,
        &subject_of(&app, &owner).await?,
        &stale,
        BuildRequest::new(Transition::Start, BuildReason::Cli),
    )
    .await
    .expect_err("the workspace is gone");
    assert!(matches!(refused, Error::NotFound), "{refused:?}");
    let builds: i64 =
        sqlx::query_scalar("SELECT count(*) FROM workspace_builds WHERE workspace_id = $1")
            .bind(ws.id)
            .fetch_one(app.pool())
            .await?;
    assert_eq!(builds, 2, "the first build and the delete");
    Ok(())
}
