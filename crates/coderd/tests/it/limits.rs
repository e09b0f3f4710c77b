//! Login abuse limits through the real API: a burst of wrong passwords is cut off with 429s
//! before any more hashing, the refusal does not tell which accounts exist, and the right
//! password works again once the window has passed.

use std::time::{Duration, Instant};

use coderd_core::limits::{LoginLimitSettings, LoginQuota};
use reqwest::StatusCode;
use serde_json::{Value, json};
use testutil::{PASSWORD, TestApp};

/// Each attempt: status, `Retry-After` seconds, body.
async fn attempt(
    app: &TestApp,
    email: &str,
    password: &str,
) -> anyhow::Result<(StatusCode, Option<u64>, Value)> {
    let response = reqwest::Client::new()
        .post(app.url.join("/api/v2/users/login")?)
        .json(&json!({"email": email, "password": password}))
        .send()
        .await?;
    let status = response.status();
    let retry = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    Ok((status, retry, response.json().await?))
}

/// `coderd_login_attempts_total{result=...}` from `/metrics`.
async fn attempts_counted(app: &TestApp, result: &str) -> anyhow::Result<u64> {
    let text = reqwest::get(app.url.join("/metrics")?)
        .await?
        .text()
        .await?;
    let prefix = format!("coderd_login_attempts_total{{result=\"{result}\"}} ");
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse::<f64>())
        .transpose()?
        .map_or(0, |v| v as u64))
}

#[tokio::test]
async fn a_burst_of_wrong_passwords_is_refused_before_hashing() -> anyhow::Result<()> {
    let period = Duration::from_secs(2);
    let app = TestApp::with_options(|o| {
        o.deployment.login_limits = LoginLimitSettings {
            per_ip: Some(LoginQuota { burst: 10, period }),
            per_account: None,
        };
    })
    .await?;
    app.owner().await?;
    let hashed_before =
        attempts_counted(&app, "failed").await? + attempts_counted(&app, "succeeded").await?;

    let started = Instant::now();
    let mut outcomes = Vec::new();
    for batch in 0..10 {
        let tries = (0..100).map(|i| {
            // Half for the real account, half for one that does not exist.
            let email = if i % 2 == 0 {
                "owner@example.com".to_string()
            } else {
                format!("ghost{batch}-{i}@example.com")
            };
            let app = &app;
            async move { attempt(app, &email, "wrong-password-1").await }
        });
        for outcome in futures::future::join_all(tries).await {
            outcomes.push(outcome?);
        }
    }
    let elapsed = started.elapsed();
    let unauthorized = outcomes
        .iter()
        .filter(|(s, _, _)| *s == StatusCode::UNAUTHORIZED)
        .count();
    let limited: Vec<_> = outcomes
        .iter()
        .filter(|(s, _, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(unauthorized + limited.len(), 1000, "only 401s and 429s");
    // The owner's own login spent one of the 10; the bucket refills one per period meanwhile.
    let allowed = 9 + (elapsed.as_secs_f64() / period.as_secs_f64()).ceil() as usize;
    assert!(
        unauthorized <= allowed,
        "{unauthorized} attempts got through in {elapsed:?}"
    );
    assert!(limited.len() >= 1000 - allowed);
    // One answer for everyone: whether the account exists is not told.
    let first = &limited[0].2;
    for (_, retry_after, body) in &limited {
        assert_eq!(body["message"], first["message"]);
        assert!(
            retry_after.is_some_and(|s| (1..=2).contains(&s)),
            "{retry_after:?}"
        );
    }
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("Too many login attempts")),
        "{first}"
    );
    // Passwords were hashed only for the attempts that got through.
    let hashed = attempts_counted(&app, "failed").await?
        + attempts_counted(&app, "succeeded").await?
        - hashed_before;
    assert_eq!(hashed as usize, unauthorized);
    assert_eq!(
        attempts_counted(&app, "rate_limited").await? as usize,
        limited.len()
    );

    // Still limited at once; after the window the right password works.
    let (status, retry_after, _) = attempt(&app, "owner@example.com", PASSWORD).await?;
    if status == StatusCode::TOO_MANY_REQUESTS {
        tokio::time::sleep(Duration::from_secs(retry_after.unwrap_or(2))).await;
        let (status, _, body) = attempt(&app, "owner@example.com", PASSWORD).await?;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    } else {
        assert_eq!(status, StatusCode::CREATED);
    }
    Ok(())
}

#[tokio::test]
async fn each_account_has_its_own_budget_across_addresses() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.deployment.login_limits = LoginLimitSettings {
            per_ip: None,
            per_account: Some(LoginQuota {
                burst: 5,
                period: Duration::from_secs(60),
            }),
        };
    })
    .await?;
    let (owner, _) = app.owner().await?;
    app.user(&owner, "alice", &[]).await?;
    for _ in 0..4 {
        assert_eq!(
            attempt(&app, "alice@example.com", "wrong-password-1")
                .await?
                .0,
            StatusCode::UNAUTHORIZED
        );
    }
    // The budget is spent (the harness' own login was the first): even the right password waits.
    let (status, retry_after, body) = attempt(&app, "ALICE@example.com", PASSWORD).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        retry_after.is_some_and(|s| s > 1 && s <= 60),
        "{retry_after:?}"
    );
    for _ in 0..5 {
        attempt(&app, "nobody@example.com", "wrong-password-1").await?;
    }
    let (status, _, unknown) = attempt(&app, "nobody@example.com", "wrong-password-1").await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        unknown["message"], body["message"],
        "the same answer for an unknown account"
    );
    // Other accounts are unaffected.
    assert_eq!(
        attempt(&app, "owner@example.com", PASSWORD).await?.0,
        StatusCode::CREATED
    );
    Ok(())
}

/// `GET /api/v2/users/me` (or `/buildinfo` without a token) with `headers`: status,
/// `Retry-After`, body.
async fn api_call(
    app: &TestApp,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> anyhow::Result<(StatusCode, Option<u64>, Value)> {
    let path = if token.is_some() {
        "/api/v2/users/me"
    } else {
        "/api/v2/buildinfo"
    };
    let mut request = reqwest::Client::new().get(app.url.join(path)?);
    if let Some(token) = token {
        request = request.header("Coder-Session-Token", token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await?;
    let status = response.status();
    let retry = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    Ok((status, retry, response.json().await.unwrap_or(Value::Null)))
}

#[tokio::test]
async fn the_api_limit_counts_per_user_or_address_and_owners_may_bypass() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.deployment.api_rate_limit = Some(20)).await?;
    let (owner, _) = app.owner().await?;
    let (member, _) = app.user(&owner, "member", &[]).await?;
    let (owner_token, member_token) = (
        owner.token().unwrap_or_default().to_string(),
        member.token().unwrap_or_default().to_string(),
    );

    // The member spends their minute (the harness' calls spent none of theirs: they were
    // the owner's, or the exempt login).
    for i in 0..20 {
        let (status, _, body) = api_call(&app, Some(&member_token), &[]).await?;
        assert_eq!(status, StatusCode::OK, "call {i}: {body}");
    }
    let (status, retry_after, body) = api_call(&app, Some(&member_token), &[]).await?;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(
        body["message"],
        "You've been rate limited for sending more than 20 requests in 1m0s."
    );
    assert!(
        retry_after.is_some_and(|s| (1..=3).contains(&s)),
        "{retry_after:?}"
    );

    // Others are counted on their own: the owner, and requests without a session by address.
    assert_eq!(
        api_call(&app, Some(&owner_token), &[]).await?.0,
        StatusCode::OK
    );
    assert_eq!(api_call(&app, None, &[]).await?.0, StatusCode::OK);

    // Only owners may skip the limit.
    let bypass = [("X-Coder-Bypass-Ratelimit", "true")];
    let (status, _, body) = api_call(&app, Some(&member_token), &bypass).await?;
    assert_eq!(status, StatusCode::PRECONDITION_REQUIRED, "{body}");
    for _ in 0..30 {
        assert_eq!(
            api_call(&app, Some(&owner_token), &bypass).await?.0,
            StatusCode::OK
        );
    }
    // Login has its own limits and is not counted here: the member still logs in.
    app.login("member@example.com", PASSWORD).await?;
    // And the member's budget comes back as the minute passes (one every 3 s at 20/min).
    tokio::time::sleep(Duration::from_secs(retry_after.unwrap_or(3))).await;
    assert_eq!(
        api_call(&app, Some(&member_token), &[]).await?.0,
        StatusCode::OK
    );
    Ok(())
}
