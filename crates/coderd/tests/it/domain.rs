//! The domain layer called directly, as front doors other than the API do (the lifecycle
//! executor as the system actor, the dashboard as a user), with the results checked through
//! the API; and the build options only the domain layer's builder had to learn (reasons,
//! orphaning).

use coderd::authz::Subject;
use coderd::domain::Error;
use coderd::domain::builds::{self, BuildReason, BuildRequest, VersionChoice};
use codersdk::ClientError;
use codersdk::proto::Resource;
use codersdk::provisionerd::Transition;
use codersdk::workspaces::{CreateWorkspaceBuildRequest, CreateWorkspaceRequest, WorkspaceStatus};
use provisionerd::engines::echo::{BuildStage, EchoState, EchoTemplate};
use testutil::{TestApp, wait_build};
use uuid::Uuid;

fn template() -> EchoTemplate {
    EchoTemplate {
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
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
        404
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
