//! The app proxy's answers when it cannot proxy, through the real HTTP API: the agent not
//! connected (with its status), nothing listening in the workspace, path apps disabled, the
//! hand-off without a wildcard, and pages for browsers. (Proxying itself is exercised end to
//! end with the real agent in the CLI's tests.)

use std::time::Duration;

use reqwest::StatusCode;
use testutil::{TestApp, eventually};
use uuid::Uuid;

use crate::agents::{agent_id, agent_template, workspace_for, workspace_with};
use crate::relay::TestAgent;

async fn get(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    html: bool,
) -> anyhow::Result<(StatusCode, String, String)> {
    let mut req = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?
        .get(format!(
            "{}{}",
            app.url.as_str().trim_end_matches('/'),
            path
        ));
    if let Some(t) = token {
        req = req.header("Coder-Session-Token", t);
    }
    if html {
        req = req.header("Accept", "text/html");
    }
    let r = req.send().await?;
    let status = r.status();
    let kind = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok((status, kind, r.text().await?))
}

#[tokio::test(flavor = "multi_thread")]
async fn app_requests_say_why_they_cannot_be_proxied() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.provisioner_daemons = 1).await?;
    let (owner, _) = app.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    let agent_token = Uuid::new_v4().to_string();
    let ws = workspace_for(&app, &owner, "me", "dev", &agent_token).await?;

    // The agent has not connected yet: said so, with its status.
    let (status, _, body) = get(&app, "/@owner/dev/apps/code/", Some(&token), false).await?;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(body["message"], "The workspace agent is not connected.");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("connecting")),
        "{body}"
    );

    // Connected, but nothing listens on the app's port: the app did not answer.
    let _agent = TestAgent::connect(&app, &agent_token).await?;
    let agent = agent_id(&ws);
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;
    let (status, _, body) = get(&app, "/@owner/dev/apps/code/", Some(&token), false).await?;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");

    // Browsers get pages; unknown apps are not found.
    let (status, kind, body) = get(&app, "/@owner/dev/apps/nope/", Some(&token), true).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        kind.starts_with("text/html") && body.contains("not found"),
        "{kind}: {body}"
    );

    // No wildcard access URL: no hand-off.
    let (status, _, body) = get(
        &app,
        "/api/v2/applications/auth-redirect?redirect_uri=http%3A%2F%2Fa--b--c--d.example.com%2F",
        Some(&token),
        false,
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("wildcard"), "{body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn path_apps_can_be_disabled() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| o.deployment.apps.disable_path_apps = true).await?;
    let (owner, _) = app.owner().await?;
    let (status, _, body) = get(&app, "/@owner/dev/apps/code/", owner.token(), false).await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("disabled"), "{body}");
    // The API is unaffected.
    let (status, _, _) = get(&app, "/api/v2/users/me", owner.token(), false).await?;
    assert_eq!(status, StatusCode::OK);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_app_times_out_without_holding_up_coderd() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.deployment.apps.response_timeout = Duration::from_secs(1);
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    // An app that accepts connections and never answers.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = hung.local_addr()?.port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            held.push(socket);
        }
    });
    let agent_token = Uuid::new_v4().to_string();
    let mut template = agent_template(&agent_token);
    if let Some(app) = template
        .start
        .as_mut()
        .and_then(|s| s.resources.first_mut())
        .and_then(|r| r.agents.first_mut())
        .and_then(|a| a.apps.first_mut())
    {
        app.url = format!("http://127.0.0.1:{port}");
    }
    let ws = workspace_with(&app, &owner, "me", "dev", &template).await?;
    let _agent = TestAgent::connect(&app, &agent_token).await?;
    let agent = agent_id(&ws);
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(agent).await?.status == "connected")
    })
    .await?;

    let started = std::time::Instant::now();
    let hung_requests = (0..4).map(|_| get(&app, "/@owner/dev/apps/code/", Some(&token), false));
    // While they wait, the API answers at once.
    let api = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let answered = get(&app, "/api/v2/users/me", Some(&token), false).await;
        (answered, started.elapsed())
    };
    let (hung, (api, api_at)) = tokio::join!(futures::future::join_all(hung_requests), api);
    assert_eq!(api?.0, StatusCode::OK);
    assert!(
        api_at < Duration::from_millis(900),
        "the API waited: {api_at:?}"
    );
    for result in hung {
        let (status, _, body) = result?;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
        assert!(body.contains("no response within"), "{body}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    Ok(())
}
