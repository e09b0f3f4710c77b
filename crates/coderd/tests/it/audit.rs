//! The audit log through the real API: a scripted sequence of security-relevant actions must
//! appear exactly (actor, action, resource, target, changed fields, status), nothing more and
//! nothing less; no secret may appear in it; the query language filters it; only owners and
//! auditors may read it.

use std::time::Duration;

use coderd_authz::Subject;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest};
use codersdk::audit::{AuditLog, AuditLogResponse};
use codersdk::provisionerd::Transition;
use codersdk::provisioners::CreateProvisionerKeyRequest;
use codersdk::users::{CreateUserRequest, LoginWithPasswordRequest};
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use codersdk::{Client, ClientError};
use provisionerd::engines::echo::EchoTemplate;
use testutil::{PASSWORD, TestApp, wait_build};

const WRONG_PASSWORD: &str = "not-the-Password-42!";
const ALICE_PASSWORD: &str = "wonderland-Secret-Passw0rd!";

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

/// What the comparison looks at in each entry.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    actor: Option<String>,
    action: String,
    resource_type: String,
    target: String,
    diff: Vec<String>,
    status: i32,
}

fn seen(entry: &AuditLog) -> Seen {
    Seen {
        actor: entry.user.as_ref().map(|u| u.username.clone()),
        action: entry.action.as_str().into(),
        resource_type: entry.resource_type.as_str().into(),
        target: entry.resource_target.clone(),
        diff: entry.diff.keys().cloned().collect(),
        status: entry.status_code,
    }
}

fn expect(
    actor: Option<&str>,
    action: &str,
    resource_type: &str,
    target: &str,
    diff: &[&str],
    status: i32,
) -> Seen {
    let mut diff: Vec<String> = diff.iter().map(|s| s.to_string()).collect();
    diff.sort();
    Seen {
        actor: actor.map(str::to_owned),
        action: action.into(),
        resource_type: resource_type.into(),
        target: target.into(),
        diff,
        status,
    }
}

/// The whole log, oldest first.
async fn whole_log(client: &Client) -> anyhow::Result<Vec<AuditLog>> {
    let page = client.audit_logs("", 1000, 0).await?;
    anyhow::ensure!(page.count as usize == page.audit_logs.len(), "one page");
    let mut entries = page.audit_logs;
    entries.reverse();
    Ok(entries)
}

async fn bad_login(app: &TestApp, email: &str, password: &str) -> anyhow::Result<()> {
    let refused = app
        .client()
        .login_with_password(&LoginWithPasswordRequest {
            email: email.into(),
            password: password.into(),
        })
        .await
        .expect_err("refused");
    anyhow::ensure!(status(&refused) == 401, "{refused}");
    Ok(())
}

const KEY_FIELDS: &[&str] = &[
    "expires_at",
    "hashed_secret",
    "id",
    "lifetime_seconds",
    "login_type",
    "scope",
    "token_name",
    "user_id",
];
const TEMPLATE_FIELDS: &[&str] = &[
    "active_version_id",
    "activity_bump_ms",
    "allow_user_autostart",
    "allow_user_autostop",
    "allow_user_cancel_workspace_jobs",
    "autostart_allowed_days",
    "autostop_requirement_days_of_week",
    "autostop_requirement_weeks",
    "cors_behavior",
    "created_by",
    "default_ttl_ms",
    "deleted",
    "deprecated",
    "description",
    "display_name",
    "failure_ttl_ms",
    "icon",
    "id",
    "max_port_share_level",
    "name",
    "organization_id",
    "provisioner",
    "require_active_version",
    "time_til_dormant_autodelete_ms",
    "time_til_dormant_ms",
];
const BUILD_FIELDS: &[&str] = &[
    "id",
    "initiator_id",
    "job_id",
    "reason",
    "template_version_id",
    "transition",
    "workspace_id",
];

/// Everything the scripted sequence did, for the secret scan.
struct Script {
    owner: Client,
    secrets: Vec<String>,
    workspace: uuid::Uuid,
    template: uuid::Uuid,
}

/// Runs the sequence and checks the log equals the expected list exactly.
async fn scripted(app: &TestApp) -> anyhow::Result<Script> {
    let (owner, _) = app.owner().await?;
    let mut secrets = vec![
        PASSWORD.to_string(),
        WRONG_PASSWORD.to_string(),
        ALICE_PASSWORD.to_string(),
    ];
    secrets.extend(owner.token().map(str::to_owned));

    bad_login(app, "owner@example.com", WRONG_PASSWORD).await?;
    bad_login(app, "nobody@example.com", WRONG_PASSWORD).await?;
    owner
        .create_user(&CreateUserRequest {
            email: "alice@example.com".into(),
            username: "alice".into(),
            password: ALICE_PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    // Refused writes record nothing: a validation error and a duplicate.
    let invalid = owner
        .create_user(&CreateUserRequest {
            email: "not-an-email".into(),
            username: "bad name!".into(),
            password: ALICE_PASSWORD.into(),
            ..Default::default()
        })
        .await
        .expect_err("invalid");
    assert_eq!(status(&invalid), 400);
    let duplicate = owner
        .create_user(&CreateUserRequest {
            email: "alice@example.com".into(),
            username: "alice2".into(),
            password: ALICE_PASSWORD.into(),
            ..Default::default()
        })
        .await
        .expect_err("duplicate");
    assert_eq!(status(&duplicate), 409);

    let alice_client = app.login("alice@example.com", ALICE_PASSWORD).await?;
    secrets.extend(alice_client.token().map(str::to_owned));
    owner
        .update_user_roles("alice", &["auditor".to_string()])
        .await?;
    let token = alice_client
        .create_token(
            "me",
            &codersdk::apikeys::CreateTokenRequest {
                token_name: "ci".into(),
                ..Default::default()
            },
        )
        .await?;
    secrets.push(token.key.clone());
    // The stored hashes of every key (sessions and the token), before one is deleted.
    let hashes: Vec<Vec<u8>> = sqlx::query_scalar("SELECT hashed_secret FROM api_keys")
        .fetch_all(app.pool())
        .await?;
    secrets.extend(hashes.iter().map(|h| hex(h)));
    let key_id = token.key.split('-').next().unwrap_or_default().to_string();
    alice_client.delete_api_key("me", &key_id).await?;

    let template = app
        .echo_template(&owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    let ws = testutil::running_workspace(&owner, template.id, "dev").await?;
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
    wait_build(&owner, stop.id).await?;
    owner
        .update_template_meta(
            template.id,
            &codersdk::templates::UpdateTemplateMeta {
                description: Some("audited".into()),
                ..Default::default()
            },
        )
        .await?;
    owner
        .update_workspace_ttl(
            ws.id,
            &codersdk::workspaces::UpdateWorkspaceTTLRequest {
                ttl_ms: Some(3_600_000),
            },
        )
        .await?;

    let psk = owner
        .create_provisioner_key(
            "default",
            &CreateProvisionerKeyRequest {
                name: "gpu".into(),
                tags: Default::default(),
            },
        )
        .await?;
    secrets.push(psk.key.clone());
    let key_hashes: Vec<Vec<u8>> = sqlx::query_scalar("SELECT hashed_secret FROM provisioner_keys")
        .fetch_all(app.pool())
        .await?;
    secrets.extend(key_hashes.iter().map(|h| hex(h)));
    owner.delete_provisioner_key("default", "gpu").await?;

    owner
        .update_user_status("alice", codersdk::users::UserStatus::Suspended)
        .await?;
    let second = app.login("owner@example.com", PASSWORD).await?;
    secrets.extend(second.token().map(str::to_owned));
    second.logout().await?;

    let passwords: Vec<String> = sqlx::query_scalar("SELECT hashed_password FROM users")
        .fetch_all(app.pool())
        .await?;
    secrets.extend(passwords.into_iter().filter(|p| !p.is_empty()));

    let owner_name = Some("owner");
    let alice_name = Some("alice");
    let expected = vec![
        expect(owner_name, "login", "api_key", "owner", KEY_FIELDS, 201),
        expect(owner_name, "login", "api_key", "owner", &[], 401),
        expect(None, "login", "api_key", "", &[], 401),
        expect(
            owner_name,
            "create",
            "user",
            "alice",
            &[
                "deleted",
                "email",
                "hashed_password",
                "id",
                "login_type",
                "name",
                "rbac_roles",
                "status",
                "username",
            ],
            201,
        ),
        expect(alice_name, "login", "api_key", "alice", KEY_FIELDS, 201),
        expect(owner_name, "write", "user", "alice", &["rbac_roles"], 200),
        expect(alice_name, "create", "api_key", "ci", KEY_FIELDS, 201),
        expect(alice_name, "delete", "api_key", "ci", KEY_FIELDS, 200),
        expect(
            owner_name,
            "create",
            "template_version",
            &template_version_name(&owner, template.active_version_id).await?,
            &[
                "created_by",
                "id",
                "job_id",
                "message",
                "name",
                "organization_id",
            ],
            201,
        ),
        expect(
            owner_name,
            "create",
            "template",
            "tpl",
            TEMPLATE_FIELDS,
            201,
        ),
        expect(
            owner_name,
            "create",
            "workspace",
            "dev",
            &[
                "automatic_updates",
                "id",
                "name",
                "organization_id",
                "owner_id",
                "template_id",
            ],
            201,
        ),
        expect(
            owner_name,
            "start",
            "workspace_build",
            "dev",
            BUILD_FIELDS,
            201,
        ),
        expect(
            owner_name,
            "stop",
            "workspace_build",
            "dev",
            BUILD_FIELDS,
            201,
        ),
        expect(
            owner_name,
            "write",
            "template",
            "tpl",
            &["description"],
            200,
        ),
        expect(owner_name, "write", "workspace", "dev", &["ttl"], 200),
        expect(
            owner_name,
            "create",
            "provisioner_key",
            "gpu",
            &["hashed_secret", "id", "name", "organization_id", "tags"],
            201,
        ),
        expect(
            owner_name,
            "delete",
            "provisioner_key",
            "gpu",
            &["hashed_secret", "id", "name", "organization_id", "tags"],
            200,
        ),
        expect(owner_name, "write", "user", "alice", &["status"], 200),
        expect(owner_name, "login", "api_key", "owner", KEY_FIELDS, 201),
        expect(owner_name, "logout", "api_key", "owner", &[], 200),
    ];
    let entries = whole_log(&owner).await?;
    let got: Vec<Seen> = entries.iter().map(seen).collect();
    assert_eq!(got, expected);

    // Details the list does not show.
    let by_action = |action: &str, nth: usize| {
        entries
            .iter()
            .filter(|e| seen(e).action == action)
            .nth(nth)
            .cloned()
    };
    let role_change = by_action("write", 0).ok_or_else(|| anyhow::anyhow!("role change"))?;
    let roles = &role_change.diff["rbac_roles"];
    assert_eq!(
        (&roles.old, &roles.new, roles.secret),
        (
            &serde_json::json!([]),
            &serde_json::json!(["auditor"]),
            false
        )
    );
    let created = entries
        .iter()
        .find(|e| seen(e).resource_type == "user")
        .ok_or_else(|| anyhow::anyhow!("user creation"))?;
    let hashed = &created.diff["hashed_password"];
    assert_eq!(
        (&hashed.old, &hashed.new, hashed.secret),
        (&"".into(), &"".into(), true)
    );
    let stop_entry = by_action("stop", 0).ok_or_else(|| anyhow::anyhow!("stop"))?;
    assert_eq!(stop_entry.additional_fields["build_reason"], "cli");
    assert_eq!(stop_entry.additional_fields["workspace_name"], "dev");
    assert_eq!(stop_entry.resource_id, stop.id);
    let start_entry = by_action("start", 0).ok_or_else(|| anyhow::anyhow!("start"))?;
    assert_eq!(start_entry.additional_fields["build_reason"], "initiator");
    for entry in &entries {
        assert_eq!(entry.ip, "127.0.0.1", "{entry:?}");
        assert!(!entry.request_id.is_nil());
        assert!(!entry.user_agent.is_empty());
    }
    // One request, one id: the workspace and its first build were one POST.
    let workspace_created = entries
        .iter()
        .find(|e| seen(e).resource_type == "workspace")
        .map(|e| e.request_id);
    assert_eq!(workspace_created, Some(start_entry.request_id));

    Ok(Script {
        owner,
        secrets,
        workspace: ws.id,
        template: template.id,
    })
}

async fn template_version_name(owner: &Client, id: uuid::Uuid) -> anyhow::Result<String> {
    Ok(owner.template_version(id).await?.name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_log_holds_exactly_the_scripted_actions_and_no_secret() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let script = scripted(&app).await?;

    // The scan: the API's whole answer and every stored row, as text.
    let api = script
        .owner
        .request(reqwest::Method::GET, "/api/v2/audit?limit=1000")?
        .send()
        .await?
        .text()
        .await?;
    let rows: Vec<String> = sqlx::query_scalar("SELECT row_to_json(a)::text FROM audit_logs a")
        .fetch_all(app.pool())
        .await?;
    assert_eq!(rows.len(), 20);
    let stored = rows.join("\n").to_lowercase();
    let api = api.to_lowercase();
    assert!(script.secrets.len() >= 12, "{}", script.secrets.len());
    for secret in &script.secrets {
        let secret = secret.to_lowercase();
        assert!(!api.contains(&secret), "the API shows a secret");
        assert!(!stored.contains(&secret), "a row stores a secret");
        // Tokens are `id-secret`: the secret half alone must not leak either.
        if let Some((_, half)) = secret.split_once('-').filter(|(_, h)| h.len() >= 16) {
            assert!(!api.contains(half) && !stored.contains(half));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_query_language_filters_and_pages() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let script = scripted(&app).await?;
    let owner = &script.owner;
    let count = |q: &'static str| async move {
        let page: AuditLogResponse = owner.audit_logs(q, 100, 0).await?;
        anyhow::ensure!(page.count as usize == page.audit_logs.len());
        anyhow::Ok(page)
    };

    let logins = count("action:login").await?;
    assert_eq!(logins.count, 5);
    assert!(logins.audit_logs.iter().all(|e| seen(e).action == "login"));
    assert_eq!(count("username:alice").await?.count, 3);
    assert_eq!(
        count("email:alice@example.com action:create").await?.count,
        1
    );
    assert_eq!(count("resource_type:workspace_build").await?.count, 2);
    assert_eq!(count("build_reason:cli").await?.count, 1);
    assert_eq!(
        count("resource_type:workspace_build build_reason:initiator")
            .await?
            .count,
        1
    );
    let q = format!("resource_id:{}", script.template);
    assert_eq!(owner.audit_logs(&q, 100, 0).await?.count, 2);
    let q = format!("resource_id:{} action:write", script.workspace);
    assert_eq!(owner.audit_logs(&q, 100, 0).await?.count, 1);
    let today = chrono::Utc::now().date_naive();
    let yesterday = today.pred_opt().unwrap_or(today);
    let q = format!("date_from:{today} date_to:{today}");
    assert_eq!(owner.audit_logs(&q, 100, 0).await?.count, 20);
    let q = format!("date_to:{yesterday}");
    assert_eq!(owner.audit_logs(&q, 100, 0).await?.count, 0);

    // Pages: newest first, the count is the total.
    let all = owner.audit_logs("", 100, 0).await?;
    let page = owner.audit_logs("", 5, 3).await?;
    assert_eq!(page.count, 20);
    let ids = |entries: &[AuditLog]| entries.iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids(&page.audit_logs), ids(&all.audit_logs[3..8]));
    let past = owner.audit_logs("", 5, 100).await?;
    assert_eq!((past.count, past.audit_logs.len()), (20, 0));

    for bad in [
        "action:fly",
        "colour:red",
        "date_from:yesterday",
        "resource_id:x",
        "plain",
    ] {
        let e = owner.audit_logs(bad, 10, 0).await.expect_err(bad);
        assert_eq!(status(&e), 400, "{bad}");
    }
    Ok(())
}

#[tokio::test]
async fn only_owners_and_auditors_read_the_log() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "bob", &[]).await?;
    let (template_admin, _) = app.user(&owner, "tina", &["template-admin"]).await?;
    let (auditor, _) = app.user(&owner, "audrey", &["auditor"]).await?;
    for client in [&member, &template_admin] {
        let refused = client.audit_logs("", 10, 0).await.expect_err("refused");
        assert_eq!(status(&refused), 403);
    }
    let anonymous = app.client().audit_logs("", 10, 0).await.expect_err("anon");
    assert_eq!(status(&anonymous), 401);
    let ids = |page: &AuditLogResponse| page.audit_logs.iter().map(|e| e.id).collect::<Vec<_>>();
    let seen_by_auditor = auditor.audit_logs("", 100, 0).await?;
    assert_eq!(
        ids(&seen_by_auditor),
        ids(&owner.audit_logs("", 100, 0).await?)
    );
    // Owner login, 3 users created, 3 logins.
    assert_eq!(seen_by_auditor.count, 7);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn executor_builds_have_no_actor_and_their_reason() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let template = app
        .echo_template(&owner, "tpl", &EchoTemplate::default(), &[])
        .await?;
    let ws = testutil::running_workspace(&owner, template.id, "dev").await?;
    let row = app.state.store.workspace_by_id(ws.id, false).await?;
    // What the lifecycle executor does at a workspace's deadline.
    let build = builds::create_build(
        &app.state,
        &Subject::system(),
        &row,
        BuildRequest::new(Transition::Stop, BuildReason::Autostop),
    )
    .await?;
    wait_build(&owner, build.id).await?;
    let page = owner.audit_logs("build_reason:autostop", 10, 0).await?;
    assert_eq!(page.count, 1);
    let entry = &page.audit_logs[0];
    assert_eq!(entry.user, None, "coderd itself acted");
    assert_eq!(entry.resource_id, build.id);
    assert_eq!((entry.ip.as_str(), entry.user_agent.as_str()), ("", ""));
    assert!(!entry.request_id.is_nil());
    assert_eq!(seen(entry).action, "stop");
    Ok(())
}

#[tokio::test]
async fn entries_past_the_retention_setting_are_purged() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    sqlx::query("UPDATE audit_logs SET time = now() - interval '40 days'")
        .execute(app.pool())
        .await?;
    app.login("owner@example.com", PASSWORD).await?;
    assert_eq!(owner.audit_logs("", 10, 0).await?.count, 2);
    // A replica with a 30-day retention purges on start (and hourly after).
    let _replica = app
        .replica(|o| o.deployment.audit_logs_retention = Duration::from_secs(30 * 86400))
        .await?;
    testutil::eventually(Duration::from_secs(10), "the old entry purged", || async {
        Ok(owner.audit_logs("", 10, 0).await?.count == 1)
    })
    .await?;
    let left = owner.audit_logs("", 10, 0).await?;
    assert!(left.audit_logs[0].time > chrono::Utc::now() - chrono::Duration::days(1));
    Ok(())
}

#[tokio::test]
async fn an_entry_names_the_request_that_made_it() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let response = owner
        .request(reqwest::Method::POST, "/api/v2/users/me/keys/tokens")?
        .header(reqwest::header::USER_AGENT, "audit-test/1.0")
        .json(&serde_json::json!({"token_name": "traced"}))
        .send()
        .await?;
    assert_eq!(response.status(), 201);
    let request_id = response
        .headers()
        .get("x-coder-request-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<uuid::Uuid>().ok())
        .ok_or_else(|| anyhow::anyhow!("no request id header"))?;
    let page = owner
        .audit_logs("resource_type:api_key action:create", 10, 0)
        .await?;
    assert_eq!(page.count, 1);
    let entry = &page.audit_logs[0];
    assert_eq!(entry.request_id, request_id);
    assert_eq!(entry.user_agent, "audit-test/1.0");
    assert_eq!(entry.resource_target, "traced");
    // Reading the log answers with an id too, and records nothing.
    let read = owner
        .request(reqwest::Method::GET, "/api/v2/audit")?
        .send()
        .await?;
    assert!(read.headers().contains_key("x-coder-request-id"));
    assert_eq!(owner.audit_logs("", 10, 0).await?.count, 2);
    Ok(())
}
