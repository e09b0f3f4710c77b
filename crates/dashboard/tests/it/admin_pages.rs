//! The pages for builds, tokens, users, provisioning and health over real HTTP (no browser):
//! status codes, the `/login` redirect, CSRF on every new form, members refused as the API
//! refuses them, state that really changes, escaping, and secrets shown once.

use std::time::Duration;

use crate::common::{Web, app, push_template};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::users::{CreateUserRequest, UserStatus};
use testutil::{PASSWORD, eventually};

/// The text of the first `<code id="{id}">…</code>` on a page.
fn code_by_id(body: &str, id: &str) -> String {
    let marker = format!("<code id=\"{id}\">");
    body.find(&marker)
        .map(|i| &body[i + marker.len()..])
        .and_then(|rest| rest.split('<').next())
        .unwrap_or("")
        .to_owned()
}

/// The first form action on a page that starts with `prefix`.
fn action_with(body: &str, prefix: &str) -> String {
    let marker = format!("action=\"{prefix}");
    body.find(&marker)
        .map(|i| &body[i + "action=\"".len()..])
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
        .to_owned()
}

/// Signed out, `path` sends the browser to the login page and back.
async fn redirects_to_login(app: &testutil::TestApp, path: &str) -> anyhow::Result<()> {
    let page = Web::new(app)?.get(path).await?;
    assert_eq!(page.status, 303, "{path}");
    let back = serde_urlencoded::to_string([("redirect", path)])?;
    assert_eq!(page.location(), format!("/login?{back}"), "{path}");
    Ok(())
}

#[tokio::test]
async fn build_pages_show_one_build_and_the_history() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let template = push_template(&app, &owner, "docker").await?;
    testutil::running_workspace(&owner, template, "mine").await?;
    app.user(&owner, "member", &[]).await?;
    redirects_to_login(&app, "/@owner/mine/builds/1").await?;
    redirects_to_login(&app, "/@owner/mine/builds").await?;

    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;
    let ws = web.get("/@owner/mine").await?;
    assert!(
        ws.body.contains("href=\"/@owner/mine/builds\""),
        "{}",
        ws.body
    );
    assert!(ws.body.contains("href=\"/@owner/mine/builds/1\""));

    let build = web.get("/@owner/mine/builds/1").await?;
    assert_eq!(build.status, 200, "{}", build.body);
    assert!(
        build
            .body
            .contains("<title>Build #1 of owner/mine – Coder</title>")
    );
    assert_eq!(build.body.matches("<h1").count(), 1);
    for text in [
        "start",
        "Running",
        "Initiator",
        "owner",
        "creating the container",
        "Duration",
    ] {
        assert!(build.body.contains(text), "{text}: {}", build.body);
    }
    let history = web.get("/@owner/mine/builds").await?;
    assert_eq!(history.status, 200);
    assert!(history.body.contains("href=\"/@owner/mine/builds/1\""));
    assert!(history.body.contains("scope=\"col\""));
    for missing in [
        "/@owner/mine/builds/2",
        "/@owner/mine/builds/x",
        "/owner/mine/builds/1",
        "/@owner/nope/builds",
    ] {
        assert_eq!(web.get(missing).await?.status, 404, "{missing}");
    }

    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    for path in ["/@owner/mine/builds/1", "/@owner/mine/builds"] {
        assert_eq!(member.get(path).await?.status, 404, "{path}");
    }
    Ok(())
}

#[tokio::test]
async fn tokens_are_shown_once_and_stop_working_when_deleted() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let (member_api, _) = app.user(&owner, "member", &[]).await?;
    redirects_to_login(&app, "/settings/tokens").await?;
    let mut web = Web::new(&app)?;
    web.login("member@example.com", PASSWORD).await?;

    let page = web.get("/settings/tokens").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<title>API tokens – Coder</title>"));
    assert!(page.body.contains("for=\"token-name\""));
    let csrf = page.csrf();
    let fields = [("name", "<b>ci</b>"), ("lifetime_days", "30")];
    assert_eq!(web.post("/settings/tokens", &fields).await?.status, 403);
    let mut forged = fields.to_vec();
    forged.push(("csrf", "00"));
    assert_eq!(web.post("/settings/tokens", &forged).await?.status, 403);
    assert!(member_api.tokens("me").await?.is_empty());

    // Longer than the deployment allows: refused beside the field, nothing made.
    let too_long = web
        .post(
            "/settings/tokens",
            &[
                ("csrf", &csrf),
                ("name", "long"),
                ("lifetime_days", "100000"),
            ],
        )
        .await?;
    assert_eq!(too_long.status, 400, "{}", too_long.body);
    assert!(too_long.body.contains("id=\"token-lifetime-error\""));

    let mut good = fields.to_vec();
    good.push(("csrf", &csrf));
    let made = web.post("/settings/tokens", &good).await?;
    assert_eq!(made.status, 201, "{}", made.body);
    let secret = code_by_id(&made.body, "new-token");
    assert!(secret.len() > 20, "{}", made.body);
    let api = app.client().with_token(secret.clone());
    assert_eq!(api.user("me").await?.username, "member");

    // Listed, escaped, and never shown again.
    let list = web.get("/settings/tokens").await?;
    assert!(
        list.body.contains("&#60;b&#62;ci&#60;/b&#62;"),
        "{}",
        list.body
    );
    assert!(!list.body.contains("<b>ci"));
    assert!(!list.body.contains(&secret));
    assert!(list.body.contains("Never"));

    let delete = action_with(&list.body, "/settings/tokens/");
    assert!(delete.ends_with("/delete"), "{}", list.body);
    assert_eq!(web.post(&delete, &[]).await?.status, 403);
    let cross = web
        .post_with(
            &delete,
            &[("csrf", &csrf)],
            &[("sec-fetch-site", "cross-site")],
        )
        .await?;
    assert_eq!(cross.status, 403);
    assert_eq!(api.user("me").await?.username, "member");
    let gone = web.post(&delete, &[("csrf", &csrf)]).await?;
    assert_eq!((gone.status, gone.location()), (303, "/settings/tokens"));
    let refused = api.user("me").await;
    assert_eq!(refused.err().and_then(|e| e.status()), Some(401));

    // Another user's key is not found, as through the API.
    let owner_key = owner.create_token("me", &Default::default()).await?;
    let owner_id = owner_key.key.split('-').next().unwrap_or_default();
    let foreign = web
        .post(
            &format!("/settings/tokens/{owner_id}/delete"),
            &[("csrf", &csrf)],
        )
        .await?;
    assert_eq!(foreign.status, 404);
    assert_eq!(owner.tokens("me").await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn user_admins_create_suspend_change_roles_and_delete_users() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let (member_api, _) = app.user(&owner, "member", &[]).await?;
    redirects_to_login(&app, "/deployment/users").await?;
    let mut admin = Web::new(&app)?;
    admin.login("owner@example.com", PASSWORD).await?;
    let page = admin.get("/deployment/users").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Create a user") && page.body.contains("for=\"new-email\""));
    let csrf = page.csrf();

    let fields = [
        ("email", "alice@example.com"),
        ("username", "alice"),
        ("name", "<i>Alice</i>"),
        ("password", PASSWORD),
    ];
    assert_eq!(admin.post("/deployment/users", &fields).await?.status, 403);
    let mut bad = vec![("csrf", csrf.as_str()), ("email", "not-an-email")];
    bad.extend_from_slice(&fields[1..]);
    let invalid = admin.post("/deployment/users", &bad).await?;
    assert_eq!(invalid.status, 400);
    assert!(
        invalid.body.contains("id=\"new-email-error\""),
        "{}",
        invalid.body
    );
    assert!(invalid.body.contains("value=\"alice\""));
    assert!(owner.user("alice").await.is_err());
    let mut good = vec![("csrf", csrf.as_str())];
    good.extend_from_slice(&fields);
    let made = admin.post("/deployment/users", &good).await?;
    assert_eq!(
        (made.status, made.location()),
        (303, "/deployment/users"),
        "{}",
        made.body
    );
    let alice = owner.user("alice").await?;
    app.login("alice@example.com", PASSWORD).await?;
    let taken = admin.post("/deployment/users", &good).await?;
    assert_eq!(taken.status, 409);
    let list = admin.get("/deployment/users?search=alice").await?;
    assert!(
        list.body.contains("&#60;i&#62;Alice&#60;/i&#62;"),
        "{}",
        list.body
    );
    assert!(!list.body.contains("<i>Alice"));

    // Members see the directory but not the forms, and are refused as the API refuses them.
    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    let theirs = member.get("/deployment/users").await?;
    assert_eq!(theirs.status, 200);
    assert!(!theirs.body.contains("Create a user"));
    let member_csrf = theirs.csrf();
    let id = alice.id.to_string();
    let mut as_member = vec![("csrf", member_csrf.as_str())];
    as_member.extend_from_slice(&fields);
    as_member[1] = ("email", "mallory@example.com");
    as_member[2] = ("username", "mallory");
    let api_create = member_api
        .create_user(&CreateUserRequest {
            email: "mallory@example.com".into(),
            username: "mallory".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await;
    let api_status = api_create.err().and_then(|e| e.status());
    assert_eq!(
        Some(member.post("/deployment/users", &as_member).await?.status),
        api_status
    );
    let api_suspend = member_api
        .update_user_status(&id, UserStatus::Suspended)
        .await
        .err()
        .and_then(|e| e.status());
    for (verb, extra) in [("status", "suspended"), ("delete", ""), ("roles", "")] {
        let path = format!("/deployment/users/{id}/{verb}");
        let form = [("csrf", member_csrf.as_str()), ("status", extra)];
        let page = member.post(&path, &form).await?;
        assert_eq!(Some(page.status), api_suspend, "{verb}");
    }
    assert_eq!(owner.user("alice").await?.status, UserStatus::Active);

    // Suspended: alice can no longer sign in; activated: she can again.
    let status = format!("/deployment/users/{id}/status");
    assert_eq!(
        admin
            .post(&status, &[("status", "suspended")])
            .await?
            .status,
        403
    );
    let suspend = [("csrf", csrf.as_str()), ("status", "suspended")];
    assert_eq!(admin.post(&status, &suspend).await?.status, 303);
    assert!(app.login("alice@example.com", PASSWORD).await.is_err());
    let list = admin.get("/deployment/users?search=alice").await?;
    assert!(list.body.contains("Activate alice"), "{}", list.body);
    let activate = [("csrf", csrf.as_str()), ("status", "active")];
    assert_eq!(admin.post(&status, &activate[1..]).await?.status, 403);
    assert_eq!(admin.post(&status, &activate).await?.status, 303);
    app.login("alice@example.com", PASSWORD).await?;

    // Roles: the boxes ticked replace her site roles.
    let roles = format!("/deployment/users/{id}/roles");
    let form = [
        ("csrf", csrf.as_str()),
        ("role", "template-admin"),
        ("role", "auditor"),
    ];
    assert_eq!(admin.post(&roles, &form[1..]).await?.status, 403);
    assert_eq!(admin.post(&roles, &form).await?.status, 303);
    let mut held = owner.user_roles("alice").await?.roles;
    held.sort();
    assert_eq!(held, ["auditor", "template-admin"]);
    let unknown = admin
        .post(&roles, &[("csrf", &csrf), ("role", "emperor")])
        .await?;
    assert_eq!(unknown.status, 400);

    // One may not suspend oneself.
    let me = owner.user("me").await?.id;
    let own = admin
        .post(&format!("/deployment/users/{me}/status"), &suspend)
        .await?;
    assert_eq!(own.status, 400);

    let delete = format!("/deployment/users/{id}/delete");
    assert_eq!(admin.post(&delete, &[]).await?.status, 403);
    assert_eq!(admin.post(&delete, &[("csrf", &csrf)]).await?.status, 303);
    assert_eq!(
        owner.user("alice").await.err().and_then(|e| e.status()),
        Some(404)
    );
    Ok(())
}

#[tokio::test]
async fn provisioner_jobs_and_keys_pages() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let (member_api, _) = app.user(&owner, "member", &[]).await?;
    // No daemon has this tag: the import waits in the queue.
    let stuck = app
        .echo_version(
            &owner,
            "default",
            &crate::common::echo_template(),
            &[("pool", "nowhere")],
        )
        .await?;
    for path in [
        "/organizations/default/provisioner-jobs",
        "/organizations/default/provisioner-keys",
    ] {
        redirects_to_login(&app, path).await?;
    }
    let mut admin = Web::new(&app)?;
    admin.login("owner@example.com", PASSWORD).await?;
    let daemons = admin.get("/organizations/default/provisioners").await?;
    // Links name the organization as it is called ("coder", the default one).
    for link in [
        "/organizations/coder/provisioner-jobs",
        "/organizations/coder/provisioner-keys",
    ] {
        assert!(daemons.body.contains(&format!("href=\"{link}\"")), "{link}");
    }

    let jobs = admin.get("/organizations/default/provisioner-jobs").await?;
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    assert!(
        jobs.body
            .contains("<title>Provisioner jobs of coder – Coder</title>"),
        "{}",
        jobs.body
    );
    assert!(jobs.body.contains("Pending") && jobs.body.contains("pool=nowhere"));
    assert!(jobs.body.contains("Position 1 of 1"), "{}", jobs.body);
    let pending = admin
        .get("/organizations/default/provisioner-jobs?status=pending")
        .await?;
    assert!(pending.body.contains("pool=nowhere"));
    let bad = admin
        .get("/organizations/default/provisioner-jobs?status=sleeping")
        .await?;
    assert_eq!(bad.status, 400);
    assert_eq!(
        admin
            .get("/organizations/nope/provisioner-jobs")
            .await?
            .status,
        404
    );

    let csrf = jobs.csrf();
    let cancel = format!(
        "/organizations/coder/provisioner-jobs/{}/cancel",
        stuck.job.id
    );
    assert!(jobs.body.contains(&cancel));
    assert_eq!(admin.post(&cancel, &[]).await?.status, 403);
    let done = admin.post(&cancel, &[("csrf", &csrf)]).await?;
    assert_eq!(done.status, 303, "{}", done.body);
    eventually(
        Duration::from_secs(10),
        "the import is canceled",
        || async {
            let job = owner.template_version(stuck.id).await?.job;
            Ok(job.status == ProvisionerJobStatus::Canceled)
        },
    )
    .await?;

    // Members see their organization but neither its queue nor its keys: 403, as the API.
    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    let api_jobs = member_api.provisioner_jobs("default", None, 0).await;
    let api_keys = member_api.provisioner_keys("default").await;
    assert_eq!(
        Some(
            member
                .get("/organizations/default/provisioner-jobs")
                .await?
                .status
        ),
        api_jobs.err().and_then(|e| e.status())
    );
    assert_eq!(
        Some(
            member
                .get("/organizations/default/provisioner-keys")
                .await?
                .status
        ),
        api_keys.err().and_then(|e| e.status())
    );
    let member_csrf = member.get("/workspaces").await?.csrf();
    let forbidden = member
        .post(
            "/organizations/default/provisioner-keys",
            &[("csrf", &member_csrf), ("name", "mine")],
        )
        .await?;
    assert_eq!(forbidden.status, 403);
    assert_eq!(
        member
            .post(&cancel, &[("csrf", &member_csrf)])
            .await?
            .status,
        403
    );
    let theirs = member.get("/organizations/default/provisioners").await?;
    assert!(!theirs.body.contains("provisioner-keys"));

    // Keys: the secret once, then only the name and tags; delete takes it away.
    let keys = admin.get("/organizations/default/provisioner-keys").await?;
    assert_eq!(keys.status, 200);
    assert!(keys.body.contains("for=\"key-name\""));
    let fields = [("name", "<k>"), ("tags", "env=prod")];
    assert_eq!(
        admin
            .post("/organizations/default/provisioner-keys", &fields)
            .await?
            .status,
        403
    );
    let wrong = admin
        .post(
            "/organizations/default/provisioner-keys",
            &[("csrf", &csrf), ("name", "ci"), ("tags", "nope")],
        )
        .await?;
    assert_eq!(wrong.status, 400);
    assert!(wrong.body.contains("id=\"key-tags-error\""));
    let reserved = admin
        .post(
            "/organizations/default/provisioner-keys",
            &[("csrf", &csrf), ("name", "psk")],
        )
        .await?;
    assert_eq!(reserved.status, 400);
    assert!(reserved.body.contains("id=\"key-name-error\""));
    let mut good = fields.to_vec();
    good.push(("csrf", &csrf));
    let made = admin
        .post("/organizations/default/provisioner-keys", &good)
        .await?;
    assert_eq!(made.status, 201, "{}", made.body);
    let secret = code_by_id(&made.body, "new-key");
    assert!(secret.len() > 20, "{}", made.body);
    let listed = owner.provisioner_keys("default").await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "<k>");
    let list = admin.get("/organizations/default/provisioner-keys").await?;
    assert!(list.body.contains("&#60;k&#62;") && list.body.contains("env=prod"));
    assert!(!list.body.contains("<k>"));
    assert!(!list.body.contains(&secret));
    let delete = action_with(&list.body, "/organizations/coder/provisioner-keys/");
    assert!(delete.ends_with("/delete"), "{}", list.body);
    assert_eq!(admin.post(&delete, &[]).await?.status, 403);
    assert_eq!(admin.post(&delete, &[("csrf", &csrf)]).await?.status, 303);
    assert!(owner.provisioner_keys("default").await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn health_is_for_owners_and_linked_for_them() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    app.user(&owner, "member", &[]).await?;
    redirects_to_login(&app, "/health").await?;
    let mut admin = Web::new(&app)?;
    admin.login("owner@example.com", PASSWORD).await?;
    let page = admin.get("/health").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("<title>Deployment health – Coder</title>")
    );
    for section in [
        "Database",
        "Access URL",
        "Workspace relay",
        "Provisioner daemons",
    ] {
        assert!(page.body.contains(section), "{section}");
    }
    // The test server answers at its access URL and runs a daemon.
    assert!(
        page.body.contains("The access URL reaches this server."),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("Provisioner daemons are online"),
        "{}",
        page.body
    );
    let workspaces = admin.get("/workspaces").await?;
    assert!(workspaces.body.contains("href=\"/health\""));
    assert!(workspaces.body.contains("href=\"/settings/tokens\""));

    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    assert_eq!(member.get("/health").await?.status, 404);
    let theirs = member.get("/workspaces").await?;
    assert!(!theirs.body.contains("href=\"/health\""));
    assert!(theirs.body.contains("href=\"/settings/tokens\""));
    Ok(())
}

#[tokio::test]
async fn overview_lists_options_with_sources_and_hides_secrets() -> anyhow::Result<()> {
    use coderd::deployment_options::parse;
    const SECRET: &str = "oidc-secret-that-must-not-show";
    let options = parse([
        "--oidc-client-id",
        "coder-test-client",
        "--oidc-client-secret",
        SECRET,
    ])?;
    let app = testutil::TestApp::with_options(move |o| {
        o.front_doors.push(std::sync::Arc::new(dashboard::router));
        o.deployment.config_options = options;
    })
    .await?;
    let (owner, _) = app.owner().await?;
    app.user(&owner, "member", &[]).await?;
    redirects_to_login(&app, "/deployment/overview").await?;

    let mut admin = Web::new(&app)?;
    admin.login("owner@example.com", PASSWORD).await?;
    let page = admin.get("/deployment/overview").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let row = |flag: &str| {
        let marker = format!("<tr id=\"option-{flag}\">");
        page.body
            .find(&marker)
            .map(|i| &page.body[i..])
            .and_then(|rest| rest.split("</tr>").next())
            .unwrap_or("")
            .to_owned()
    };
    let client_id = row("oidc-client-id");
    assert!(
        client_id.contains("<code>coder-test-client</code>"),
        "{client_id}"
    );
    assert!(client_id.contains("CODER_OIDC_CLIENT_ID"), "{client_id}");
    assert!(client_id.contains(">flag<"), "{client_id}");
    let session = row("session-duration");
    assert!(session.contains("<code>24h</code>"), "{session}");
    assert!(session.contains(">default<"), "{session}");
    let secret = row("oidc-client-secret");
    assert!(secret.contains("secret, set"), "{secret}");
    assert!(!page.body.contains(SECRET), "the secret is on the page");
    assert!(row("provisioner-daemon-psk").contains(">unset<"));
    // Hidden options are not listed.
    assert!(row("autobuild-poll-interval").is_empty());
    let workspaces = admin.get("/workspaces").await?;
    assert!(workspaces.body.contains("href=\"/deployment/overview\""));

    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    assert_eq!(member.get("/deployment/overview").await?.status, 404);
    let theirs = member.get("/workspaces").await?;
    assert!(!theirs.body.contains("href=\"/deployment/overview\""));
    Ok(())
}
