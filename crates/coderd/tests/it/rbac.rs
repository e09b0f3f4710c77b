//! The RBAC matrix: every role against every endpoint built so far, through the real API.
//! Each row names an endpoint and the status each role must get. Rows that change or delete a
//! user act on a fresh victim per role, so rows never depend on each other.

use codersdk::Client;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::users::{CreateUserRequest, LoginType};
use reqwest::Method;
use serde_json::{Value, json};
use testutil::{TestApp, unique};

/// Column order of the expectations.
const ROLES: [&str; 6] = [
    "owner",
    "user-admin",
    "template-admin",
    "auditor",
    "member",
    "org-admin",
];

struct Row {
    method: Method,
    /// `{victim}` becomes the victim's username.
    path: &'static str,
    body: Option<Value>,
    expect: [u16; 6],
}

fn row(method: Method, path: &'static str, body: Option<Value>, expect: [u16; 6]) -> Row {
    Row {
        method,
        path,
        body,
        expect,
    }
}

fn rows() -> Vec<Row> {
    use Method as M;
    vec![
        row(M::GET, "/api/v2/buildinfo", None, [200; 6]),
        row(M::GET, "/api/v2/users/me", None, [200; 6]),
        row(M::GET, "/api/v2/users", None, [200; 6]),
        row(M::GET, "/api/v2/users/roles", None, [200; 6]),
        row(M::GET, "/api/v2/users/first", None, [200; 6]),
        row(
            M::POST,
            "/api/v2/users",
            Some(
                json!({"email": "{victim}-new@example.com", "username": "{victim}-new", "login_type": "none"}),
            ),
            [201, 201, 403, 403, 403, 403],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/roles",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/organizations",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/status/suspend",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/status/activate",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/roles",
            Some(json!({"roles": ["auditor"]})),
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/users/{victim}/password",
            Some(json!({"password": "a brand new password"})),
            [204, 204, 403, 403, 404, 404],
        ),
        row(
            M::DELETE,
            "/api/v2/users/{victim}",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::GET,
            "/api/v2/users/{victim}/keys/tokens",
            None,
            [200, 404, 404, 404, 404, 404],
        ),
        row(
            M::POST,
            "/api/v2/users/{victim}/keys/tokens",
            Some(json!({"token_name": "t"})),
            [201, 403, 403, 403, 404, 404],
        ),
        row(M::GET, "/api/v2/organizations", None, [200; 6]),
        row(M::GET, "/api/v2/organizations/coder", None, [200; 6]),
        row(
            M::GET,
            "/api/v2/organizations/coder/members",
            None,
            [200; 6],
        ),
        row(
            M::POST,
            "/api/v2/organizations",
            Some(json!({"name": "{victim}-org"})),
            [201, 403, 403, 403, 403, 403],
        ),
        row(
            M::GET,
            "/api/v2/organizations/other",
            None,
            [200, 200, 200, 200, 404, 404],
        ),
        row(
            M::POST,
            "/api/v2/organizations/other/members/{victim}",
            None,
            [200, 200, 403, 403, 404, 404],
        ),
        row(
            M::PUT,
            "/api/v2/organizations/coder/members/{victim}/roles",
            Some(json!({"roles": ["organization-auditor"]})),
            [200, 200, 403, 403, 403, 200],
        ),
        row(
            M::DELETE,
            "/api/v2/organizations/coder/members/{victim}",
            None,
            [204, 204, 403, 403, 403, 204],
        ),
    ]
}

fn fill(value: &Value, victim: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace("{victim}", victim)),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, victim)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, victim)).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn every_role_against_every_endpoint() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    owner
        .create_organization(&CreateOrganizationRequest {
            name: "other".into(),
            ..Default::default()
        })
        .await?;
    let mut callers: Vec<Client> = vec![owner.clone()];
    for (name, roles) in [
        ("useradmin", &["user-admin"][..]),
        ("templateadmin", &["template-admin"]),
        ("auditor", &["auditor"]),
        ("member", &[]),
        ("orgadmin", &[]),
    ] {
        callers.push(app.user(&owner, name, roles).await?.0);
    }
    owner
        .update_organization_member_roles("coder", "orgadmin", &["organization-admin".into()])
        .await?;

    let mut failures = Vec::new();
    for row in rows() {
        for (i, caller) in callers.iter().enumerate() {
            let victim = unique("victim");
            owner
                .create_user(&CreateUserRequest {
                    email: format!("{victim}@example.com"),
                    username: victim.clone(),
                    login_type: Some(LoginType::None),
                    ..Default::default()
                })
                .await?;
            let path = row.path.replace("{victim}", &victim);
            let mut req = caller.request(row.method.clone(), &path)?;
            if let Some(body) = &row.body {
                req = req.json(&fill(body, &victim));
            }
            let got = req.send().await?.status().as_u16();
            if got != row.expect[i] {
                failures.push(format!(
                    "{} {} as {}: expected {}, got {got}",
                    row.method, row.path, ROLES[i], row.expect[i]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "RBAC mismatches:\n{}",
        failures.join("\n")
    );
    Ok(())
}

#[tokio::test]
async fn endpoints_need_a_session_except_the_public_ones() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    app.owner().await?;
    let anonymous = app.client();
    for path in ["/api/v2/buildinfo", "/api/v2/users/first", "/healthz"] {
        let status = anonymous.request(Method::GET, path)?.send().await?.status();
        assert_eq!(status, 200, "{path}");
    }
    for path in [
        "/api/v2/users",
        "/api/v2/users/me",
        "/api/v2/organizations",
        "/api/v2/users/roles",
    ] {
        let status = anonymous.request(Method::GET, path)?.send().await?.status();
        assert_eq!(status, 401, "{path}");
    }
    Ok(())
}
