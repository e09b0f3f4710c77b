//! The dashboard over real HTTP against an in-process coderd (no browser): status codes,
//! redirects, CSRF, authorization and escaping.

use std::time::Duration;

use crate::common::{Web, app, push_template};
use codersdk::templates::UpdateTemplateMeta;
use testutil::{PASSWORD, eventually};

#[tokio::test]
async fn setup_creates_the_owner_once_then_logs_in() -> anyhow::Result<()> {
    let app = app().await?;
    let mut web = Web::new(&app)?;

    let root = web.get("/").await?;
    assert_eq!(root.status, 303);
    assert_eq!(root.location(), "/workspaces");
    let list = web.get("/workspaces?filter=owner%3Ame").await?;
    assert_eq!(list.status, 303);
    assert_eq!(
        list.location(),
        "/login?redirect=%2Fworkspaces%3Ffilter%3Downer%253Ame"
    );
    // No user yet: the login page sends people to setup.
    let login = web.get("/login").await?;
    assert_eq!(login.location(), "/setup");

    let setup = web.get("/setup").await?;
    assert_eq!(setup.status, 200);
    assert!(web.cookie("coder_dashboard_csrf").is_some());
    let csrf = setup.csrf();
    let fields = [
        ("email", "owner@example.com"),
        ("username", "owner"),
        ("password", PASSWORD),
    ];

    // Without the form token, or with another one, nothing is created.
    let refused = web.post("/setup", &fields).await?;
    assert_eq!(refused.status, 403);
    let mut forged = fields.to_vec();
    forged.push(("csrf", "0000"));
    assert_eq!(web.post("/setup", &forged).await?.status, 403);

    // Field errors come back beside the field, values kept.
    let mut bad = vec![("csrf", csrf.as_str()), ("email", "not-an-email")];
    bad.extend_from_slice(&fields[1..]);
    let invalid = web.post("/setup", &bad).await?;
    assert_eq!(invalid.status, 400);
    assert!(
        invalid.body.contains("id=\"email-error\""),
        "{}",
        invalid.body
    );
    assert!(invalid.body.contains("value=\"owner\""));

    let mut good = vec![("csrf", csrf.as_str())];
    good.extend_from_slice(&fields);
    let created = web.post("/setup", &good).await?;
    assert_eq!(created.status, 303, "{}", created.body);
    assert_eq!(created.location(), "/workspaces");
    assert!(web.cookie("coder_session_token").is_some());
    let cookie = created
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("coder_session_token="))
        .unwrap_or_default()
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }

    let list = web.get("/workspaces").await?;
    assert_eq!(list.status, 200);
    let csp = list.headers["content-security-policy"].to_str()?;
    assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(list.headers["cache-control"], "no-store");
    assert!(!list.body.contains("<script>"), "no inline script");
    assert_eq!(list.body.matches("<h1").count(), 1);

    // Setup is over.
    assert_eq!(web.get("/setup").await?.location(), "/login");
    assert_eq!(Web::new(&app)?.get("/setup").await?.location(), "/login");
    Ok(())
}

#[tokio::test]
async fn login_follows_only_relative_redirects_and_logout_revokes() -> anyhow::Result<()> {
    let app = app().await?;
    app.owner().await?;
    let mut web = Web::new(&app)?;

    let page = web.get("/login?redirect=%2F%2Fevil.example%2Fx").await?;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("name=\"redirect\" value=\"/workspaces\"")
    );
    let csrf = page.csrf();

    let wrong = web
        .post(
            "/login",
            &[
                ("csrf", &csrf),
                ("email", "owner@example.com"),
                ("password", "nope"),
            ],
        )
        .await?;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("Incorrect email or password."));
    assert!(web.cookie("coder_session_token").is_none());

    for (asked, landed) in [
        ("https://evil.example/", "/workspaces"),
        ("//evil.example/", "/workspaces"),
        ("/templates?x=1", "/templates?x=1"),
    ] {
        let mut web = Web::new(&app)?;
        let csrf = web.get("/login").await?.csrf();
        let done = web
            .post(
                "/login",
                &[
                    ("csrf", &csrf),
                    ("email", "owner@example.com"),
                    ("password", PASSWORD),
                    ("redirect", asked),
                ],
            )
            .await?;
        assert_eq!(done.status, 303);
        assert_eq!(done.location(), landed, "redirect {asked}");
    }

    // Logout needs the session's form token; then the key no longer works.
    let signed_in = web.login("owner@example.com", PASSWORD).await?;
    assert_eq!(signed_in.status, 303);
    let token = web
        .cookie("coder_session_token")
        .unwrap_or_default()
        .to_owned();
    let list = web.get("/workspaces").await?;
    let form_token = list.csrf();
    assert_eq!(web.post("/logout", &[("csrf", "x")]).await?.status, 403);
    let cross = web
        .post_with(
            "/logout",
            &[("csrf", &form_token)],
            &[("sec-fetch-site", "cross-site")],
        )
        .await?;
    assert_eq!(cross.status, 403);
    let out = web.post("/logout", &[("csrf", &form_token)]).await?;
    assert_eq!(out.status, 303);
    assert!(web.cookie("coder_session_token").is_none());
    let revoked = app.client().with_token(token).user("me").await;
    assert_eq!(revoked.err().and_then(|e| e.status()), Some(401));
    Ok(())
}

#[tokio::test]
async fn members_get_404_for_others_workspaces_and_names_are_escaped() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let template = push_template(&app, &owner, "docker").await?;
    owner
        .update_template_meta(
            template,
            &UpdateTemplateMeta {
                display_name: Some("<script>alert(1)</script>".into()),
                description: Some("\"><img src=x onerror=alert(2)>".into()),
                ..Default::default()
            },
        )
        .await?;
    let ws = testutil::running_workspace(&owner, template, "mine").await?;
    app.user(&owner, "member", &[]).await?;

    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    for path in [
        "/@owner/mine",
        "/@owner/nope",
        "/owner/mine",
        "/@owner/mine/fragment",
    ] {
        assert_eq!(member.get(path).await?.status, 404, "{path}");
    }
    let csrf = member.get("/workspaces").await?.csrf();
    let build = member
        .post(
            "/@owner/mine/builds",
            &[("csrf", &csrf), ("transition", "stop")],
        )
        .await?;
    assert_eq!(build.status, 404);
    // Members may read their organization's daemons, as through the API.
    let daemons = member.get("/organizations/default/provisioners").await?;
    assert_eq!(daemons.status, 200);
    // Nor can the member follow it live.
    let upgrade = [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let live = format!("/-/live?workspace={}", ws.id);
    assert_eq!(member.get_with(&live, &upgrade).await?.status, 404);
    // The member's list does not show it even with every filter removed.
    let all = member.get("/workspaces?filter=").await?;
    assert!(!all.body.contains("/@owner/mine"));

    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;
    assert_eq!(web.get_with(&live, &upgrade).await?.status, 101);
    let mut foreign = upgrade.to_vec();
    foreign.push(("origin", "http://evil.example"));
    assert_eq!(web.get_with(&live, &foreign).await?.status, 403);
    let page = web.get("/@owner/mine").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Running"));
    assert!(page.body.contains(&ws.id.to_string()));
    assert!(page.body.contains("creating the container"));
    assert!(page.body.contains("VS Code"));
    let versions = web.get("/templates/docker/versions").await?;
    assert_eq!(versions.status, 200);
    assert!(versions.body.contains("Active") && versions.body.contains("Succeeded"));
    assert_eq!(web.get("/templates/nope/versions").await?.status, 404);
    let users = web.get("/deployment/users").await?;
    assert_eq!(users.status, 200);
    assert!(users.body.contains("member@example.com") && users.body.contains("owner"));
    let old = web.get("/users").await?;
    assert_eq!((old.status, old.location()), (308, "/deployment/users"));
    assert_eq!(web.get("/no/such/page/here").await?.status, 404);
    let daemons = web.get("/organizations/default/provisioners").await?;
    assert_eq!(daemons.status, 200, "{}", daemons.body);
    assert!(daemons.body.contains("echo"), "{}", daemons.body);
    assert_eq!(
        web.get("/organizations/nope/provisioners").await?.status,
        404
    );
    let templates = web.get("/templates").await?;
    assert!(
        templates
            .body
            .contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{}",
        templates.body
    );
    assert!(!templates.body.contains("<script>alert"));
    assert!(!templates.body.contains("<img src=x"));
    Ok(())
}

#[tokio::test]
async fn create_form_shows_validation_beside_the_field_then_builds() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    push_template(&app, &owner, "docker").await?;
    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;

    let form = web
        .get("/templates/docker/workspace?name=dev&param.cpus=3")
        .await?;
    assert_eq!(form.status, 200);
    assert!(form.body.contains("for=\"param-cpus\""));
    assert!(form.body.contains("value=\"3\""));
    assert!(form.body.contains("value=\"dev\""));
    assert_eq!(web.get("/templates/nope/workspace").await?.status, 404);
    let csrf = form.csrf();

    let missing = web
        .post(
            "/templates/docker/workspace",
            &[("name", "dev"), ("param.cpus", "2")],
        )
        .await?;
    assert_eq!(missing.status, 403);

    let wrong = web
        .post(
            "/templates/docker/workspace",
            &[("csrf", &csrf), ("name", "dev"), ("param.cpus", "99")],
        )
        .await?;
    assert_eq!(wrong.status, 400);
    assert!(
        wrong.body.contains("id=\"param-cpus-error\""),
        "{}",
        wrong.body
    );
    assert!(wrong.body.contains("value=\"99\""));

    let made = web
        .post(
            "/templates/docker/workspace",
            &[("csrf", &csrf), ("name", "dev"), ("param.cpus", "4")],
        )
        .await?;
    assert_eq!(made.status, 303, "{}", made.body);
    assert_eq!(made.location(), "/@owner/dev");
    eventually(Duration::from_secs(20), "the workspace runs", || async {
        let page = owner.workspace_by_owner_and_name("me", "dev").await?;
        Ok(page.latest_build.status == codersdk::workspaces::WorkspaceStatus::Running)
    })
    .await?;

    let taken = web
        .post(
            "/templates/docker/workspace",
            &[("csrf", &csrf), ("name", "dev"), ("param.cpus", "4")],
        )
        .await?;
    assert_eq!(taken.status, 409);
    assert!(taken.body.contains("id=\"ws-name-error\""));

    // Restart is a stop, then a start once the stop has finished.
    let restart = web
        .post(
            "/@owner/dev/builds",
            &[("csrf", &csrf), ("transition", "restart")],
        )
        .await?;
    assert_eq!(restart.status, 303);
    assert_eq!(restart.location(), "/@owner/dev");
    eventually(
        Duration::from_secs(30),
        "the restart's start runs",
        || async {
            let ws = owner.workspace_by_owner_and_name("me", "dev").await?;
            Ok(ws.latest_build.build_number == 3
                && ws.latest_build.status == codersdk::workspaces::WorkspaceStatus::Running)
        },
    )
    .await?;

    // Delete asks for the name; a wrong one changes nothing.
    let unconfirmed = web
        .post(
            "/@owner/dev/builds",
            &[
                ("csrf", &csrf),
                ("transition", "delete"),
                ("confirm", "dve"),
            ],
        )
        .await?;
    assert_eq!(unconfirmed.status, 400);
    assert!(unconfirmed.body.contains("Type the workspace"));
    let ws = owner.workspace_by_owner_and_name("me", "dev").await?;
    assert_eq!(ws.latest_build.build_number, 3);
    let deleted = web
        .post(
            "/@owner/dev/builds",
            &[
                ("csrf", &csrf),
                ("transition", "delete"),
                ("confirm", "dev"),
            ],
        )
        .await?;
    assert_eq!(deleted.status, 303);
    assert_eq!(deleted.location(), "/workspaces");
    eventually(
        Duration::from_secs(30),
        "the workspace is deleted",
        || async {
            Ok(owner
                .workspace_by_owner_and_name("me", "dev")
                .await
                .is_err())
        },
    )
    .await?;
    let list = web.get("/workspaces").await?;
    assert!(!list.body.contains("/@owner/dev"));
    Ok(())
}
