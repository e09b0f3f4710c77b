//! What an API fuzzer found, kept found: hostile values (NUL, arrays for objects, unbounded
//! numbers and text, malformed path segments) answer 4xx in Coder's error shape and write
//! nothing; users with workspaces cannot be deleted.

use codersdk::templates::Template;
use codersdk::workspaces::CreateWorkspaceRequest;
use codersdk::{Client, Response};
use provisionerd::engines::echo::EchoTemplate;
use reqwest::Method;
use testutil::TestApp;

/// Sends a raw request and returns its status and Coder-shaped body (failing if the body is
/// not JSON in that shape).
async fn send(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<(u16, Response)> {
    let mut req = client.request(method, path)?;
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = resp.text().await?;
    anyhow::ensure!(
        content_type.starts_with("application/json"),
        "{path}: {status} answered {content_type:?}: {text}"
    );
    let body: Response = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{path}: {status} body {text:?} is not Coder's shape: {e}"))?;
    Ok((status, body))
}

fn fields(body: &Response) -> Vec<&str> {
    body.validations.iter().map(|v| v.field.as_str()).collect()
}

async fn template(app: &TestApp, owner: &Client) -> anyhow::Result<Template> {
    app.echo_template(owner, "fuzzed", &EchoTemplate::default(), &[])
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn nul_characters_are_refused_at_the_edge_naming_the_field() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, first) = app.owner().await?;
    let tpl = template(&app, &owner).await?;

    // Without logging in.
    let (status, body) = send(
        &app.client(),
        Method::POST,
        "/api/v2/users/login",
        Some(r#"{"email":"a\u0000b","password":"x"}"#),
    )
    .await?;
    assert_eq!((status, fields(&body)), (400, vec!["email"]), "{body:?}");

    for (path, field) in [
        ("/api/v2/users?q=%00", "q"),
        ("/api/v2/workspaces?q=%00", "q"),
        ("/api/v2/workspaces?q=owner:me%00", "q"),
        ("/api/v2/users/a%00b", "user"),
        ("/api/v2/organizations/%00", "organization"),
    ] {
        let (status, body) = send(&owner, Method::GET, path, None).await?;
        assert_eq!(
            (status, fields(&body)),
            (400, vec![field]),
            "{path}: {body:?}"
        );
    }

    let writes = [
        (
            Method::POST,
            "/api/v2/organizations".to_string(),
            r#"{"name":"org2","display_name":"x\u0000y"}"#.to_string(),
            "display_name",
        ),
        (
            Method::PATCH,
            format!("/api/v2/templates/{}", tpl.id),
            r#"{"description":"a\u0000"}"#.to_string(),
            "description",
        ),
        (
            Method::POST,
            "/api/v2/users".to_string(),
            r#"{"email":"n@example.com","username":"n","password":"a long password","name":"\u0000"}"#
                .to_string(),
            "name",
        ),
        (
            Method::POST,
            format!("/api/v2/organizations/{}/templateversions", first.organization_id),
            format!(
                r#"{{"file_id":"{}","provisioner":"echo","name":"v\u0000","message":"m\u0000","tags":{{"k\u0000":"v"}}}}"#,
                uuid::Uuid::new_v4()
            ),
            "name",
        ),
    ];
    for (method, path, body, field) in writes {
        let (status, resp) = send(&owner, method, &path, Some(&body)).await?;
        assert_eq!(status, 400, "{path}: {resp:?}");
        assert!(fields(&resp).contains(&field), "{path}: {resp:?}");
        assert_eq!(resp.message, "Validation failed.");
    }
    // Every field is named, keys too.
    let (_, resp) = send(
        &owner,
        Method::POST,
        &format!(
            "/api/v2/organizations/{}/templateversions",
            first.organization_id
        ),
        Some(r#"{"name":"v\u0000","message":"m\u0000","tags":{"k\u0000":"v"}}"#),
    )
    .await?;
    let mut named = fields(&resp);
    named.sort_unstable();
    assert_eq!(named, vec!["message", "name", "tags.k\\u0000"]);

    assert_eq!(owner.organizations().await?.len(), 1, "no organization");
    assert_eq!(owner.users("").await?.count, 1, "no user");
    assert_eq!(owner.template(tpl.id).await?.description, "", "unchanged");
    assert_eq!(
        owner.template_versions(tpl.id).await?.len(),
        1,
        "no version"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_must_be_json_objects() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let tpl = template(&app, &owner).await?;
    let tokens_before = owner.tokens("me").await?.len();
    for body in ["[]", r#"["arrname"]"#, "null", "42", r#""text""#, "true"] {
        let (status, resp) = send(
            &owner,
            Method::POST,
            "/api/v2/users/me/keys/tokens",
            Some(body),
        )
        .await?;
        assert_eq!(status, 400, "{body}");
        assert_eq!(resp.message, "Request body must be a JSON object.");
        let (status, _) = send(
            &owner,
            Method::PATCH,
            &format!("/api/v2/templates/{}", tpl.id),
            Some(body),
        )
        .await?;
        assert_eq!(status, 400, "{body}");
    }
    assert_eq!(owner.tokens("me").await?.len(), tokens_before, "no token");
    assert_eq!(owner.template(tpl.id).await?.name, "fuzzed", "not renamed");

    // A wrong type names its field.
    let (status, resp) = send(
        &owner,
        Method::PATCH,
        &format!("/api/v2/templates/{}", tpl.id),
        Some(r#"{"default_ttl_ms":"soon"}"#),
    )
    .await?;
    assert_eq!((status, fields(&resp)), (400, vec!["default_ttl_ms"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn values_are_bounded_by_coders_limits() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let tpl = template(&app, &owner).await?;
    let path = format!("/api/v2/templates/{}", tpl.id);
    for (body, field) in [
        (
            r#"{"default_ttl_ms":9223372036854775807}"#.to_string(),
            "default_ttl_ms",
        ),
        (r#"{"default_ttl_ms":-1}"#.to_string(), "default_ttl_ms"),
        (
            format!(r#"{{"description":"{}"}}"#, "d".repeat(10_000)),
            "description",
        ),
        (
            format!(r#"{{"description":"{}"}}"#, "d".repeat(128)),
            "description",
        ),
        (
            format!(r#"{{"display_name":"{}"}}"#, "d".repeat(65)),
            "display_name",
        ),
        (
            r#"{"display_name":"bell\u0007"}"#.to_string(),
            "display_name",
        ),
        (r#"{"name":"new"}"#.to_string(), "name"),
        (format!(r#"{{"icon":"{}"}}"#, "i".repeat(2049)), "icon"),
    ] {
        let (status, resp) = send(&owner, Method::PATCH, &path, Some(&body)).await?;
        assert_eq!((status, fields(&resp)), (400, vec![field]), "{resp:?}");
    }
    let after = owner.template(tpl.id).await?;
    assert_eq!((after.default_ttl_ms, after.description.as_str()), (0, ""));

    // The largest values Coder allows are accepted.
    let ok = format!(
        r#"{{"description":"{}","default_ttl_ms":2592000000}}"#,
        "d".repeat(127)
    );
    let resp = owner
        .request(Method::PATCH, &path)?
        .header("content-type", "application/json")
        .body(ok)
        .send()
        .await?;
    assert_eq!(resp.status(), 200);

    for ttl in [1, 59_999, 2_592_000_001, i64::MAX] {
        let err = owner
            .create_workspace(
                "me",
                &CreateWorkspaceRequest {
                    template_id: Some(tpl.id),
                    name: "ws".into(),
                    ttl_ms: Some(ttl),
                    ..Default::default()
                },
            )
            .await
            .expect_err("refused");
        let codersdk::ClientError::Api { status, response } = err else {
            anyhow::bail!("not an API error: {err}");
        };
        assert_eq!((status, fields(&response)), (400, vec!["ttl_ms"]));
    }
    assert_eq!(owner.workspaces("").await?.count, 0);
    Ok(())
}

#[tokio::test]
async fn path_and_query_rejections_answer_in_coders_shape() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (status, body) = send(
        &owner,
        Method::DELETE,
        "/api/v2/templates/null%2Cnull",
        None,
    )
    .await?;
    assert_eq!((status, fields(&body)), (400, vec!["id"]), "{body:?}");
    assert_eq!(body.validations[0].detail, "must be a UUID");
    let (status, body) = send(
        &owner,
        Method::GET,
        "/api/v2/organizations/default/provisionerjobs/not-a-uuid",
        None,
    )
    .await?;
    assert_eq!((status, fields(&body)), (400, vec!["job"]), "{body:?}");
    let (status, body) = send(
        &owner,
        Method::GET,
        "/api/v2/users/me/workspace/x/builds/one",
        None,
    )
    .await?;
    assert_eq!((status, fields(&body)), (400, vec!["number"]), "{body:?}");
    let (status, body) = send(&owner, Method::GET, "/api/v2/users?limit=many", None).await?;
    assert_eq!((status, fields(&body)), (400, vec!["limit"]), "{body:?}");
    let (status, body) = send(&owner, Method::PUT, "/api/v2/users", None).await?;
    assert_eq!(status, 405, "{body:?}");

    // An unknown role is bad input, not a permission problem.
    let (status, body) = send(
        &owner,
        Method::POST,
        "/api/v2/users",
        Some(r#"{"email":"r@example.com","username":"r","password":"a long password","roles":["emperor"]}"#),
    )
    .await?;
    assert_eq!((status, fields(&body)), (400, vec!["roles"]), "{body:?}");
    assert_eq!(owner.users("").await?.count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_owns_workspaces_cannot_be_deleted() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let tpl = template(&app, &owner).await?;
    let ws = member
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(tpl.id),
                name: "dev".into(),
                ..Default::default()
            },
        )
        .await?;
    testutil::wait_build(&member, ws.latest_build.id).await?;

    let (status, body) = send(&owner, Method::DELETE, "/api/v2/users/member", None).await?;
    assert_eq!(status, 417, "{body:?}");
    assert_eq!(
        body.message,
        "You cannot delete a user that has workspaces. Delete their workspaces and try again!"
    );
    assert_eq!(
        owner.user("member").await?.username,
        "member",
        "still there"
    );
    assert_eq!(member.workspaces("").await?.count, 1, "still usable");

    let build = member
        .create_workspace_build(
            ws.id,
            &codersdk::workspaces::CreateWorkspaceBuildRequest {
                transition: "delete".into(),
                ..Default::default()
            },
        )
        .await?;
    testutil::wait_build(&member, build.id).await?;
    owner.delete_user("member").await?;
    assert_eq!(
        owner.user("member").await.expect_err("gone").status(),
        Some(404)
    );
    Ok(())
}
