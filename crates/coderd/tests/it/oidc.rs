//! OIDC login end to end: coderd against a real OpenID provider (oidc-provider under Node, see
//! `testutil::idp`), a cookie-keeping browser walking the redirects.

use anyhow::{Context, bail};
use coderd_sso::groups::sync::GroupSyncSettings;
use coderd_sso::{CALLBACK_PATH, OidcSettings};
use codersdk::Client;
use codersdk::groups::GroupSource;
use codersdk::users::{LoginType, LoginWithPasswordRequest};
use oauth_client::KeyRing;
use reqwest::StatusCode;
use serde_json::{Value, json};
use testutil::idp::{Browser, Landing, Tamper, TestIdp};
use testutil::{PASSWORD, TestApp};
use tokio::net::TcpListener;
use url::Url;

struct Sso {
    app: TestApp,
    idp: TestIdp,
    owner: Client,
}

/// coderd with OIDC login against a fresh provider, adjusted by `adjust`, and its owner.
async fn start(
    adjust: impl FnOnce(&mut OidcSettings, &mut coderd_core::state::Options),
) -> anyhow::Result<Sso> {
    let idp = TestIdp::start().await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let callback = format!("http://{}{CALLBACK_PATH}", listener.local_addr()?);
    let (client_id, secret) = idp.register_client(&callback).await?;
    let mut settings = OidcSettings::new(idp.issuer.clone(), client_id, secret);
    settings.sign_in_text = "Sign in with Corp".into();
    let app = TestApp::with_listener(listener, |o| {
        adjust(&mut settings, &mut o.deployment);
        o.deployment.oidc = Some(settings);
    })
    .await?;
    let (owner, _) = app.owner().await?;
    Ok(Sso { app, idp, owner })
}

impl Sso {
    async fn account(&self, sub: &str, claims: Value) -> anyhow::Result<()> {
        self.idp.add_account(sub, claims).await?;
        self.idp.login_as(sub).await
    }

    fn start_url(&self, redirect: &str) -> anyhow::Result<Url> {
        let mut url = self.app.url.join(CALLBACK_PATH)?;
        url.query_pairs_mut().append_pair("redirect", redirect);
        Ok(url)
    }

    /// Walks a browser from coderd through the provider and back to (not into) the callback:
    /// the callback URL with `code` and `state`.
    async fn authorize(&self, browser: &Browser) -> anyhow::Result<Url> {
        let callback = self.app.url.join(CALLBACK_PATH)?;
        match browser
            .navigate(self.start_url("/workspaces")?, Some(callback.as_str()))
            .await?
        {
            Landing::Stopped(url) => Ok(url),
            Landing::Page(response, url) => {
                bail!(
                    "stopped at {url}: {} {}",
                    response.status(),
                    response.text().await?
                )
            }
        }
    }

    /// A full sign-in: the callback's response.
    async fn sign_in(&self) -> anyhow::Result<reqwest::Response> {
        let browser = Browser::new();
        let callback = self.authorize(&browser).await?;
        Ok(browser.http.get(callback).send().await?)
    }

    /// Rows of the tables a sign-in writes, to show a refusal wrote nothing.
    async fn written(&self) -> anyhow::Result<(i64, i64, i64)> {
        Ok(sqlx::query_as(
            "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM api_keys), \
                    (SELECT count(*) FROM user_links)",
        )
        .fetch_one(self.app.pool())
        .await?)
    }
}

/// The session a successful callback hands the browser, and where it sends it.
fn session_of(response: &reqwest::Response) -> anyhow::Result<(String, String)> {
    if response.status() != StatusCode::TEMPORARY_REDIRECT {
        bail!("callback answered {}", response.status());
    }
    let location = response.headers()[reqwest::header::LOCATION]
        .to_str()?
        .to_string();
    let token = response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .find_map(|c| c.strip_prefix("coder_session_token="))
        .and_then(|c| c.split(';').next())
        .filter(|t| !t.is_empty())
        .context("no session cookie")?;
    Ok((token.to_string(), location))
}

async fn refusal(response: reqwest::Response) -> anyhow::Result<(StatusCode, String)> {
    let status = response.status();
    let body: Value = response.json().await?;
    Ok((status, format!("{} {}", body["message"], body["detail"])))
}

fn alice() -> Value {
    json!({"email": "alice@corp.example", "email_verified": true,
           "preferred_username": "alice", "name": "Alice Liddell"})
}

#[tokio::test]
async fn first_sign_in_creates_the_user_and_later_ones_reuse_it() -> anyhow::Result<()> {
    let sso = start(|_, _| {}).await?;
    let methods = sso.app.client().auth_methods().await?;
    assert!(methods.password.enabled && methods.oidc.enabled && !methods.github.enabled);
    assert_eq!(methods.oidc.sign_in_text, "Sign in with Corp");

    sso.account("alice-sub", alice()).await?;
    let (token, location) = session_of(&sso.sign_in().await?)?;
    assert_eq!(location, "/workspaces", "back where the sign-in started");
    let client = sso.app.client().with_token(token);
    let me = client.user("me").await?;
    assert_eq!(
        (me.username.as_str(), me.email.as_str(), me.name.as_str()),
        ("alice", "alice@corp.example", "Alice Liddell")
    );
    assert_eq!(me.login_type, LoginType::Oidc);
    assert!(me.roles.is_empty(), "a plain member");
    let default_org = sso.owner.organization("coder").await?;
    assert_eq!(me.organization_ids, vec![default_org.id]);
    // What the provider said about her, as she can read it back (and a password user cannot).
    let claims: Value = client.get("/api/v2/users/oidc-claims").await?;
    assert_eq!(claims["claims"]["email"], "alice@corp.example", "{claims}");
    let not_oidc = sso
        .owner
        .request(reqwest::Method::GET, "/api/v2/users/oidc-claims")?
        .send()
        .await?;
    assert_eq!(not_oidc.status(), 400);
    let written = sso.written().await?;

    // The provider renames her email: the link (issuer and subject) still finds her.
    sso.account(
        "alice-sub",
        json!({"email": "alice.l@corp.example", "email_verified": true, "preferred_username": "al"}),
    )
    .await?;
    let (token, _) = session_of(&sso.sign_in().await?)?;
    let again = sso.app.client().with_token(token).user("me").await?;
    assert_eq!(again.id, me.id);
    assert_eq!(again.username, "alice");
    let (users, keys, links) = sso.written().await?;
    assert_eq!(
        (users, links),
        (written.0, written.2),
        "no new user or link"
    );
    assert_eq!(keys, written.1 + 1, "a new session");
    Ok(())
}

#[tokio::test]
async fn usernames_come_from_the_claim_and_are_made_unique() -> anyhow::Result<()> {
    let sso = start(|s, _| s.username_field = "nickname".into()).await?;
    // "owner" is taken by the first user.
    sso.account(
        "s1",
        json!({"email": "o@corp.example", "nickname": "Owner"}),
    )
    .await?;
    let (token, _) = session_of(&sso.sign_in().await?)?;
    let me = sso.app.client().with_token(token).user("me").await?;
    assert!(
        me.username.starts_with("Owner-") && me.username.len() == "Owner-0000".len(),
        "{}",
        me.username
    );
    // Without the claim, the email's local part, made valid.
    sso.account("s2", json!({"email": "jane.doe+x@corp.example"}))
        .await?;
    let (token, _) = session_of(&sso.sign_in().await?)?;
    assert_eq!(
        sso.app
            .client()
            .with_token(token)
            .user("me")
            .await?
            .username,
        "jane-doe-x"
    );
    Ok(())
}

#[tokio::test]
async fn bad_sign_ins_are_refused_with_a_reason_and_write_nothing() -> anyhow::Result<()> {
    let sso = start(|s, _| s.email_domains = vec!["corp.example".into()]).await?;
    sso.account("alice-sub", alice()).await?;
    let before = sso.written().await?;

    // A forged or crossed state: the callback was not started by this browser.
    let browser = Browser::new();
    let mut callback = sso.authorize(&browser).await?;
    let pairs: Vec<(String, String)> = callback.query_pairs().into_owned().collect();
    callback.query_pairs_mut().clear().extend_pairs(
        pairs
            .iter()
            .map(|(k, v)| (k.as_str(), if k == "state" { "forged" } else { v.as_str() })),
    );
    let (status, message) = refusal(browser.http.get(callback.clone()).send().await?).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        message.contains("state returned by the identity provider does not match"),
        "{message}"
    );
    // And a callback in a browser that never started one.
    let (status, message) = refusal(Browser::new().http.get(callback).send().await?).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("state cookie is missing"), "{message}");

    for (tamper, reason) in [
        (Tamper::BadSignature, "signature does not verify"),
        (Tamper::WrongAudience, "another client"),
        (Tamper::Expired, "expired"),
    ] {
        let browser = Browser::new();
        let callback = sso.authorize(&browser).await?;
        sso.idp.tamper_next_id_token(tamper).await?;
        let (status, message) = refusal(browser.http.get(callback).send().await?).await?;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{tamper:?}: {message}");
        assert!(message.contains(reason), "{tamper:?}: {message}");
    }

    for (claims, wanted_status, reason) in [
        (
            json!({"email": "eve@evil.example", "email_verified": true}),
            StatusCode::FORBIDDEN,
            "not in the domains allowed",
        ),
        (
            json!({"email": "bob@corp.example", "email_verified": false}),
            StatusCode::FORBIDDEN,
            "Verify the \\\"bob@corp.example\\\" email",
        ),
        (
            json!({"preferred_username": "nomail"}),
            StatusCode::BAD_REQUEST,
            "did not send an email",
        ),
    ] {
        sso.account("other-sub", claims.clone()).await?;
        let (status, message) = refusal(sso.sign_in().await?).await?;
        assert_eq!(status, wanted_status, "{claims}: {message}");
        assert!(message.contains(reason), "{claims}: {message}");
    }
    assert_eq!(sso.written().await?, before, "no refusal wrote anything");

    // A replayed code: the first use signs in, the second is refused by the provider.
    sso.account("alice-sub", alice()).await?;
    let browser = Browser::new();
    let callback = sso.authorize(&browser).await?;
    let state_cookie = browser
        .cookie(&callback, "oauth_state")
        .context("the state cookie")?;
    session_of(&browser.http.get(callback.clone()).send().await?)?;
    let after_first = sso.written().await?;
    let replay = reqwest::Client::new()
        .get(callback)
        .header(
            reqwest::header::COOKIE,
            format!("oauth_state={state_cookie}"),
        )
        .send()
        .await?;
    let (status, message) = refusal(replay).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("invalid_grant"), "{message}");
    assert_eq!(
        sso.written().await?,
        after_first,
        "the replay wrote nothing"
    );
    Ok(())
}

#[tokio::test]
async fn login_types_are_enforced_both_ways() -> anyhow::Result<()> {
    let sso = start(|_, o| o.disable_password_auth = true).await?;
    sso.account("alice-sub", alice()).await?;
    session_of(&sso.sign_in().await?)?;
    // An OIDC user has no password: the same answer as any wrong password.
    let err = sso
        .app
        .client()
        .login_with_password(&LoginWithPasswordRequest {
            email: "alice@corp.example".into(),
            password: PASSWORD.into(),
        })
        .await
        .expect_err("no password login");
    assert_eq!(err.status(), Some(401), "{err}");
    // And the owner's password account is never taken over through the provider by whoever
    // holds the same address there.
    let before = sso.written().await?;
    sso.account(
        "mallory-sub",
        json!({"email": "owner@example.com", "email_verified": true}),
    )
    .await?;
    let (status, message) = refusal(sso.sign_in().await?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        message.contains("Incorrect login type, attempting to use \\\"oidc\\\" but user is of login type \\\"password\\\""),
        "{message}"
    );
    assert_eq!(sso.written().await?, before);
    sso.account("alice-sub", alice()).await?;

    // With password authentication disabled only owners use passwords.
    assert!(!sso.app.client().auth_methods().await?.password.enabled);
    let member = sso
        .owner
        .create_user(&codersdk::users::CreateUserRequest {
            email: "pat@corp.example".into(),
            username: "pat".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    let err = sso
        .app
        .login("pat@corp.example", PASSWORD)
        .await
        .expect_err("password auth disabled");
    assert!(
        err.to_string()
            .contains("Password authentication is disabled"),
        "{err}"
    );
    sso.app.login("owner@example.com", PASSWORD).await?;

    // Suspended OIDC users are turned away at the callback.
    let alice = sso.owner.user("alice").await?;
    sso.owner
        .update_user_status(
            &alice.id.to_string(),
            codersdk::users::UserStatus::Suspended,
        )
        .await?;
    let (status, message) = refusal(sso.sign_in().await?).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(message.contains("suspended"), "{message}");
    assert_eq!(member.login_type, LoginType::Password);
    Ok(())
}

#[tokio::test]
async fn tokens_are_kept_only_sealed_and_signups_can_be_closed() -> anyhow::Result<()> {
    let key = KeyRing::generate_key();
    let ring = KeyRing::from_base64(std::slice::from_ref(&key))?;
    let sso = start(|s, o| {
        s.scopes.push("offline_access".into());
        s.auth_url_params = vec![("prompt".into(), "consent".into())];
        s.allow_signups = false;
        o.external_token_keys = Some(std::sync::Arc::new(
            KeyRing::from_base64(&[key]).expect("key"),
        ));
    })
    .await?;
    sso.account("alice-sub", alice()).await?;
    let (status, message) = refusal(sso.sign_in().await?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(message.contains("Signups are disabled"), "{message}");

    // An account an administrator made for her signs in.
    sso.owner
        .create_user(&codersdk::users::CreateUserRequest {
            email: "alice@corp.example".into(),
            username: "alice".into(),
            login_type: Some(LoginType::Oidc),
            ..Default::default()
        })
        .await?;
    session_of(&sso.sign_in().await?)?;
    let (access, refresh, linked_id): (String, String, String) =
        sqlx::query_as("SELECT oauth_access_token, oauth_refresh_token, linked_id FROM user_links")
            .fetch_one(sso.app.pool())
            .await?;
    assert_eq!(
        linked_id,
        format!(
            "{}||alice-sub",
            sso.idp.issuer.as_str().trim_end_matches('/')
        )
    );
    for (sealed, purpose) in [
        (&access, "user_link_oauth_access_token"),
        (&refresh, "user_link_oauth_refresh_token"),
    ] {
        assert!(
            ring.is_current(sealed),
            "sealed with the configured key: {sealed}"
        );
        let plain = ring.open(purpose, sealed)?;
        assert!(!plain.is_empty() && !sealed.contains(std::str::from_utf8(&plain)?));
    }
    Ok(())
}

#[tokio::test]
async fn the_callback_never_redirects_off_the_deployment() -> anyhow::Result<()> {
    let sso = start(|_, _| {}).await?;
    sso.account("alice-sub", alice()).await?;
    let browser = Browser::new();
    let callback = sso.app.url.join(CALLBACK_PATH)?;
    let mut start = callback.clone();
    start
        .query_pairs_mut()
        .append_pair("redirect", "//evil.example/steal");
    let Landing::Stopped(back) = browser.navigate(start, Some(callback.as_str())).await? else {
        bail!("no redirect back");
    };
    let (_, location) = session_of(&browser.http.get(back).send().await?)?;
    assert_eq!(location, "/");
    Ok(())
}

#[tokio::test]
async fn without_oidc_configured_there_is_no_callback() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let methods = app.client().auth_methods().await?;
    assert!(methods.password.enabled && !methods.oidc.enabled);
    let response = reqwest::get(app.url.join(CALLBACK_PATH)?).await?;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    Ok(())
}

fn with_groups(groups: &[&str]) -> Value {
    let mut claims = alice();
    claims["groups"] = json!(groups);
    claims
}

/// Names of the members of `group` in the default organization, or `None` if it is missing.
async fn members_of(owner: &Client, group: &str) -> anyhow::Result<Option<Vec<String>>> {
    match owner.group_by_org_and_name("coder", group).await {
        Ok(g) => Ok(Some(g.members.into_iter().map(|m| m.username).collect())),
        Err(e) if e.status() == Some(404) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test]
async fn group_claims_map_to_groups_and_follow_the_provider() -> anyhow::Result<()> {
    let filter = regex::Regex::new("^(devs|ops|qa)$")?;
    let sso = start(|s, _| {
        s.scopes.push("groups".into());
        s.groups = GroupSyncSettings {
            field: "groups".into(),
            mapping: [("corp-developers".to_string(), "devs".to_string())].into(),
            auto_create: true,
            regex_filter: Some(filter),
            allowed_groups: Vec::new(),
        };
    })
    .await?;
    let ops = sso
        .owner
        .create_group(
            "coder",
            &codersdk::groups::CreateGroupRequest {
                name: "ops".into(),
                ..Default::default()
            },
        )
        .await?;

    // First sign-in: the mapped group is created (as an OIDC group), the existing one joined,
    // and what the filter drops is neither created nor joined.
    sso.account(
        "alice-sub",
        with_groups(&["corp-developers", "ops", "unrelated"]),
    )
    .await?;
    let (token, _) = session_of(&sso.sign_in().await?)?;
    assert_eq!(
        members_of(&sso.owner, "devs").await?,
        Some(vec!["alice".into()])
    );
    assert_eq!(
        members_of(&sso.owner, "ops").await?,
        Some(vec!["alice".into()])
    );
    assert_eq!(members_of(&sso.owner, "unrelated").await?, None);
    let devs = sso.owner.group_by_org_and_name("coder", "devs").await?;
    assert_eq!(devs.source, GroupSource::Oidc);
    let alice = sso.app.client().with_token(token);
    assert_eq!(alice.group(devs.id).await?.total_member_count, 1);

    // The provider drops her from the developers: the next sign-in removes her from the OIDC
    // group, and leaves the hand-made group alone.
    sso.account("alice-sub", with_groups(&["ops"])).await?;
    session_of(&sso.sign_in().await?)?;
    assert_eq!(members_of(&sso.owner, "devs").await?, Some(vec![]));
    assert_eq!(
        members_of(&sso.owner, "ops").await?,
        Some(vec!["alice".into()])
    );
    assert_eq!(ops.source, GroupSource::User);

    // An OIDC group she is put into by hand is the provider's to decide at the next sign-in.
    sso.owner
        .patch_group(
            devs.id,
            &codersdk::groups::PatchGroupRequest {
                add_users: vec![alice.user("me").await?.id.to_string()],
                ..Default::default()
            },
        )
        .await?;
    sso.account("alice-sub", with_groups(&["qa"])).await?;
    session_of(&sso.sign_in().await?)?;
    assert_eq!(members_of(&sso.owner, "devs").await?, Some(vec![]));
    assert_eq!(
        members_of(&sso.owner, "qa").await?,
        Some(vec!["alice".into()])
    );
    Ok(())
}

#[tokio::test]
async fn only_allowed_groups_may_sign_in() -> anyhow::Result<()> {
    let sso = start(|s, _| {
        s.scopes.push("groups".into());
        s.groups.allowed_groups = vec!["staff".into()];
    })
    .await?;
    let before = sso.written().await?;
    sso.account("alice-sub", with_groups(&["guests"])).await?;
    let (status, message) = refusal(sso.sign_in().await?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(message.contains("not in any group allowed"), "{message}");
    assert_eq!(sso.written().await?, before, "the refusal wrote nothing");
    sso.account("alice-sub", with_groups(&["staff"])).await?;
    session_of(&sso.sign_in().await?)?;
    Ok(())
}

#[tokio::test]
async fn sign_ins_and_their_refusals_are_audited() -> anyhow::Result<()> {
    let key = KeyRing::generate_key();
    let ring = KeyRing::from_base64(std::slice::from_ref(&key))?;
    let sso = start(|s, o| {
        s.scopes.push("offline_access".into());
        s.auth_url_params = vec![("prompt".into(), "consent".into())];
        o.external_token_keys = Some(std::sync::Arc::new(
            KeyRing::from_base64(&[key]).expect("key"),
        ));
    })
    .await?;
    sso.account("alice-sub", alice()).await?;
    session_of(&sso.sign_in().await?)?;
    session_of(&sso.sign_in().await?)?;
    let alice = sso.owner.user("alice").await?;
    sso.owner
        .update_user_status("alice", codersdk::users::UserStatus::Suspended)
        .await?;
    let (status, _) = refusal(sso.sign_in().await?).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let page = sso.owner.audit_logs("username:alice", 100, 0).await?;
    let got: Vec<(&str, &str, i32, bool)> = page
        .audit_logs
        .iter()
        .rev()
        .map(|e| {
            (
                e.action.as_str(),
                e.resource_type.as_str(),
                e.status_code,
                e.diff.values().any(|d| d.secret),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("register", "user", 201, true),
            ("login", "api_key", 201, true),
            ("login", "api_key", 201, true),
            ("login", "api_key", 401, false),
        ]
    );
    assert!(page.audit_logs.iter().all(|e| e.resource_id == alice.id));
    // The provider's tokens, sealed or not, never reach the log.
    let stored = sqlx::query_scalar::<_, String>("SELECT row_to_json(a)::text FROM audit_logs a")
        .fetch_all(sso.app.pool())
        .await?
        .join("\n");
    let (access, refresh): (String, String) =
        sqlx::query_as("SELECT oauth_access_token, oauth_refresh_token FROM user_links")
            .fetch_one(sso.app.pool())
            .await?;
    for (sealed, purpose) in [
        (&access, "user_link_oauth_access_token"),
        (&refresh, "user_link_oauth_refresh_token"),
    ] {
        let plain = String::from_utf8(ring.open(purpose, sealed)?)?;
        assert!(!plain.is_empty());
        assert!(!stored.contains(sealed.as_str()) && !stored.contains(&plain));
    }
    Ok(())
}
