//! GitHub login end to end: coderd against `testutil::github::FakeGithub`, a loopback stand-in
//! for GitHub's OAuth and REST endpoints (the machine is offline: github.com cannot be reached
//! and GitHub Enterprise cannot be installed), given to coderd as a GitHub Enterprise base URL.
//! A cookie-keeping browser walks the redirects.

use anyhow::{Context, bail};
use coderd_sso::{GITHUB_CALLBACK_PATH, GithubSettings};
use codersdk::users::{LoginType, LoginWithPasswordRequest};
use oauth_client::KeyRing;
use reqwest::StatusCode;
use serde_json::Value;
use testutil::TestApp;
use testutil::github::{FakeGithub, GithubAccount};
use testutil::idp::{Browser, Landing};
use url::Url;

struct Gh {
    app: TestApp,
    github: FakeGithub,
}

/// coderd with GitHub login (members of `corp`, signups on, tokens sealed with `key`), adjusted
/// by `adjust`, with its owner created.
async fn start(key: &str, adjust: impl FnOnce(&mut GithubSettings)) -> anyhow::Result<Gh> {
    let github = FakeGithub::start().await?;
    let (client_id, secret) = github.register_client();
    let mut settings = GithubSettings::new(client_id, secret, vec!["corp".into()], &[], false)
        .map_err(anyhow::Error::msg)?;
    settings.allow_signups = true;
    settings.enterprise_base_url = Some(github.base_url.clone());
    adjust(&mut settings);
    let ring = KeyRing::from_base64(&[key.to_string()])?;
    let app = TestApp::with_options(|o| {
        o.deployment.github = Some(settings);
        o.deployment.external_token_keys = Some(std::sync::Arc::new(ring));
    })
    .await?;
    app.owner().await?;
    Ok(Gh { app, github })
}

impl Gh {
    /// Walks a browser signed in to GitHub as `login` from coderd's start route through GitHub
    /// and back to (not into) the callback: the callback URL with `code` and `state`.
    async fn authorize(&self, browser: &Browser, login: &str) -> anyhow::Result<Url> {
        self.github.sign_in_as(login);
        let mut start = self.app.url.join("/api/v2/users/oauth2/github")?;
        start
            .query_pairs_mut()
            .append_pair("redirect", "/templates");
        let callback = self.app.url.join(GITHUB_CALLBACK_PATH)?;
        match browser.navigate(start, Some(callback.as_str())).await? {
            Landing::Stopped(url) => Ok(url),
            Landing::Page(response, url) => bail!(
                "stopped at {url}: {} {}",
                response.status(),
                response.text().await?
            ),
        }
    }

    async fn sign_in(&self, login: &str) -> anyhow::Result<reqwest::Response> {
        let browser = Browser::new();
        let callback = self.authorize(&browser, login).await?;
        Ok(browser.http.get(callback).send().await?)
    }

    async fn written(&self) -> anyhow::Result<(i64, i64, i64)> {
        Ok(sqlx::query_as(
            "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM api_keys), \
                    (SELECT count(*) FROM user_links)",
        )
        .fetch_one(self.app.pool())
        .await?)
    }
}

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

#[tokio::test]
async fn first_github_sign_in_creates_the_user_and_later_ones_reuse_it() -> anyhow::Result<()> {
    let key = KeyRing::generate_key();
    let gh = start(&key, |_| {}).await?;
    let methods = gh.app.client().auth_methods().await?;
    assert!(methods.github.enabled && methods.password.enabled && !methods.oidc.enabled);

    // "owner" is taken by the first user: the GitHub login is made unique.
    gh.github
        .add_account(GithubAccount::new(4242, "octo-cat").in_org("corp"));
    gh.github
        .add_account(GithubAccount::new(7, "Owner").in_org("corp"));
    let (token, location) = session_of(&gh.sign_in("octo-cat").await?)?;
    assert_eq!(location, "/templates", "back where the sign-in started");
    let me = gh.app.client().with_token(token).user("me").await?;
    assert_eq!(
        (me.username.as_str(), me.email.as_str(), me.name.as_str()),
        ("octo-cat", "octo-cat@users.example", "octo-cat (GitHub)")
    );
    assert_eq!(me.login_type, LoginType::Github);
    let written = gh.written().await?;

    // The token is kept sealed: the stand-in's `gho_` token never appears in the database.
    let (linked_id, sealed): (String, String) =
        sqlx::query_as("SELECT linked_id, oauth_access_token FROM user_links WHERE user_id = $1")
            .bind(me.id)
            .fetch_one(gh.app.pool())
            .await?;
    assert_eq!(linked_id, "4242", "linked by GitHub's numeric user id");
    assert!(!sealed.is_empty() && !sealed.contains("gho_"), "{sealed}");
    let ring = KeyRing::from_base64(&[key])?;
    let opened = String::from_utf8(ring.open("user_link_oauth_access_token", &sealed)?)?;
    assert!(opened.starts_with("gho_"));

    // Second sign-in: the same user, a new session, no new user or link.
    let (token, _) = session_of(&gh.sign_in("octo-cat").await?)?;
    let again = gh.app.client().with_token(token).user("me").await?;
    assert_eq!(again.id, me.id);
    let (users, keys, links) = gh.written().await?;
    assert_eq!((users, links), (written.0, written.2));
    assert_eq!(keys, written.1 + 1);

    let (token, _) = session_of(&gh.sign_in("Owner").await?)?;
    let other = gh.app.client().with_token(token).user("me").await?;
    assert!(
        other.username.starts_with("Owner-") && other.username.len() == "Owner-0000".len(),
        "{}",
        other.username
    );

    // A GitHub user has no password: refused like any wrong password.
    let err = gh
        .app
        .client()
        .login_with_password(&LoginWithPasswordRequest {
            email: "octo-cat@users.example".into(),
            password: testutil::PASSWORD.into(),
        })
        .await
        .expect_err("no password login");
    assert_eq!(err.status(), Some(401), "{err}");
    // What coderd asked GitHub: who, where they belong, and their addresses.
    let calls = gh.github.calls();
    for call in [
        "GET /user",
        "GET /user/memberships/orgs",
        "GET /user/emails",
    ] {
        assert!(calls.iter().any(|c| c == call), "{call} in {calls:?}");
    }
    Ok(())
}

#[tokio::test]
async fn outsiders_are_refused_with_a_reason_and_nothing_is_written() -> anyhow::Result<()> {
    let gh = start(&KeyRing::generate_key(), |s| {
        s.allowed_teams = vec![coderd_sso::AllowedTeam {
            organization: "corp".into(),
            slug: "devs".into(),
        }];
    })
    .await?;
    gh.github
        .add_account(GithubAccount::new(1, "stranger").in_org("elsewhere"));
    gh.github
        .add_account(GithubAccount::new(2, "sales").in_org("corp"));
    gh.github.add_account(
        GithubAccount::new(3, "invited")
            .in_team("corp", "devs")
            .in_org("corp"),
    );
    let mut unverified = GithubAccount::new(4, "unverified")
        .in_org("corp")
        .in_team("corp", "devs");
    unverified.emails = vec![
        ("u@users.example".into(), true, false),
        ("u2@users.example".into(), false, true),
    ];
    gh.github.add_account(unverified);
    let mut pending = GithubAccount::new(5, "pending").in_team("corp", "devs");
    pending.orgs = vec![("corp".into(), "pending".into())];
    gh.github.add_account(pending);
    gh.github.add_account(
        GithubAccount::new(6, "dev")
            .in_org("corp")
            .in_team("corp", "devs"),
    );
    let before = gh.written().await?;

    for (login, status, expected) in [
        (
            "stranger",
            StatusCode::UNAUTHORIZED,
            "You aren't a member of the authorized GitHub organizations!",
        ),
        (
            "pending",
            StatusCode::UNAUTHORIZED,
            "You aren't a member of the authorized GitHub organizations!",
        ),
        (
            "sales",
            StatusCode::UNAUTHORIZED,
            "You aren't a member of an authorized team in the corp GitHub organization(s)!",
        ),
        (
            "unverified",
            StatusCode::PRECONDITION_REQUIRED,
            "Your primary email must be verified on GitHub!",
        ),
    ] {
        let (got, message) = refusal(gh.sign_in(login).await?).await?;
        assert_eq!(got, status, "{login}: {message}");
        assert!(message.contains(expected), "{login}: {message}");
        assert_eq!(gh.written().await?, before, "{login}: nothing written");
    }
    // The invited member is in the team: admitted.
    session_of(&gh.sign_in("invited").await?)?;
    session_of(&gh.sign_in("dev").await?)?;
    assert!(
        gh.github
            .calls()
            .iter()
            .any(|c| c == "GET /orgs/corp/teams/devs/memberships/dev")
    );
    Ok(())
}

#[tokio::test]
async fn a_callback_this_browser_did_not_start_is_refused() -> anyhow::Result<()> {
    let gh = start(&KeyRing::generate_key(), |_| {}).await?;
    gh.github
        .add_account(GithubAccount::new(9, "octo").in_org("corp"));
    let before = gh.written().await?;

    // Another state than the one sealed in the cookie.
    let browser = Browser::new();
    let mut callback = gh.authorize(&browser, "octo").await?;
    let code = callback
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("code")?;
    callback
        .query_pairs_mut()
        .clear()
        .append_pair("code", &code)
        .append_pair("state", "forged");
    let (status, message) = refusal(browser.http.get(callback.clone()).send().await?).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("state"), "{message}");

    // A callback in a browser that never started (login CSRF): no state cookie.
    let callback = gh.authorize(&Browser::new(), "octo").await?;
    let (status, message) = refusal(reqwest::get(callback.clone()).await?).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("state cookie is missing"), "{message}");
    assert_eq!(gh.written().await?, before);

    // A code used twice: the second exchange is refused by GitHub.
    let browser = Browser::new();
    let callback = gh.authorize(&browser, "octo").await?;
    session_of(&browser.http.get(callback.clone()).send().await?)?;
    let replay = Browser::new();
    let fresh = gh.authorize(&replay, "octo").await?;
    let mut reused = fresh.clone();
    let state = fresh
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .context("state")?;
    let old_code = callback
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("code")?;
    reused
        .query_pairs_mut()
        .clear()
        .append_pair("code", &old_code)
        .append_pair("state", &state);
    let (status, message) = refusal(replay.http.get(reused).send().await?).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{message}");
    assert!(message.contains("bad_verification_code"), "{message}");
    Ok(())
}

#[tokio::test]
async fn allow_everyone_skips_membership_and_closed_signups_refuse() -> anyhow::Result<()> {
    let gh = start(&KeyRing::generate_key(), |s| {
        s.allowed_orgs.clear();
        s.allow_everyone = true;
        s.allow_signups = false;
    })
    .await?;
    gh.github.add_account(GithubAccount::new(11, "anyone"));
    let before = gh.written().await?;
    let (status, message) = refusal(gh.sign_in("anyone").await?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        message.contains("Signups are disabled for GitHub"),
        "{message}"
    );
    assert_eq!(gh.written().await?, before);
    assert!(
        !gh.github.calls().iter().any(|c| c.contains("memberships")),
        "membership is not asked when everyone is allowed"
    );

    // Made in advance by an administrator, the person signs in (found by the verified email).
    let owner = gh
        .app
        .login("owner@example.com", testutil::PASSWORD)
        .await?;
    let made = owner
        .create_user(&codersdk::users::CreateUserRequest {
            email: "anyone@users.example".into(),
            username: "anyone".into(),
            login_type: Some(LoginType::Github),
            ..Default::default()
        })
        .await?;
    let (token, _) = session_of(&gh.sign_in("anyone").await?)?;
    assert_eq!(
        gh.app.client().with_token(token).user("me").await?.id,
        made.id
    );
    Ok(())
}
