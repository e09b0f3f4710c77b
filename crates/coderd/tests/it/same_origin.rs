//! Cross-site request forgery through the session cookie: a page on another origin — a
//! workspace app on a sibling subdomain is same-site, so SameSite=Lax lets the cookie through —
//! can neither write through the API nor open a terminal or SSH stream as its viewer.

use reqwest::StatusCode;
use testutil::TestApp;
use uuid::Uuid;

async fn token_count(app: &TestApp, token: &str) -> anyhow::Result<usize> {
    let list: Vec<serde_json::Value> = reqwest::Client::new()
        .get(app.url.join("api/v2/users/me/keys/tokens")?)
        .header("Coder-Session-Token", token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(list.len())
}

#[tokio::test]
async fn cookie_requests_from_another_origin_are_refused() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    let own_origin = app.url.origin().ascii_serialization();
    let app_origin = format!(
        "http://code--dev--owner.{}",
        app.url.host_str().unwrap_or("localhost")
    );
    let http = reqwest::Client::new();
    let create = |origin: &str, name: &str, by_cookie: bool| {
        let req = http
            .post(app.url.join("api/v2/users/me/keys/tokens").expect("url"))
            .header("Origin", origin)
            .json(&serde_json::json!({ "token_name": name }));
        if by_cookie {
            req.header("Cookie", format!("coder_session_token={token}"))
        } else {
            req.header("Coder-Session-Token", token.as_str())
        }
    };

    // A write from an app's origin, riding on the cookie: refused, and nothing created.
    let before = token_count(&app, &token).await?;
    let r = create(&app_origin, "forged", true).send().await?;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = r.json().await?;
    assert_eq!(body["message"], "Cross-origin request refused.");
    assert_eq!(token_count(&app, &token).await?, before);

    // The same write from the deployment's own pages, or by header from anywhere, works.
    let r = create(&own_origin, "own-page", true).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await?);
    let r = create(&app_origin, "by-header", false).send().await?;
    assert_eq!(r.status(), StatusCode::CREATED, "{}", r.text().await?);
    assert_eq!(token_count(&app, &token).await?, before + 2);

    // A terminal opened by an app's page is refused before the agent is even looked up; from
    // the deployment's own origin the request goes on (and finds no such agent).
    let pty = app.url.join(&format!(
        "api/v2/workspaceagents/{}/pty?reconnect={}",
        Uuid::new_v4(),
        Uuid::new_v4()
    ))?;
    let upgrade = |origin: &str| {
        http.get(pty.clone())
            .header("Cookie", format!("coder_session_token={token}"))
            .header("Origin", origin)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
    };
    assert_eq!(
        upgrade(&app_origin).send().await?.status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        upgrade(&own_origin).send().await?.status(),
        StatusCode::NOT_FOUND
    );
    Ok(())
}
