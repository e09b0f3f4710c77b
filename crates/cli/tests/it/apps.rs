//! Workspace apps end to end: the `apps` example template (the `local-process` workspace with a
//! Python web app its startup script starts), real terraform, the real agent, and coderd's app
//! proxy reached over real HTTP — pages, credentials stripped, WebSocket, SSE, uploads, sharing
//! levels, and the subdomain auth hand-off (app hosts sent as `Host` headers on loopback).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use codersdk::portsharing::{
    DeleteWorkspaceAgentPortShareRequest, UpsertWorkspaceAgentPortShareRequest,
};
use codersdk::templates::UpdateTemplateMeta;
use codersdk::users::{CreateUserRequest, LoginWithPasswordRequest};
use futures::{SinkExt as _, StreamExt as _};
use reqwest::header::{ACCEPT, COOKIE, HOST, LOCATION, SET_COOKIE};
use reqwest::{Client, StatusCode};
use testutil::{PASSWORD, eventually};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

use crate::harness::{Deployment, free_port};
use crate::terraform::{Reaper, example, terraform};

const AGENT_START: Duration = Duration::from_secs(90);

struct Apps {
    d: Deployment,
    port: u16,
    _reaper: Reaper,
    http: Client,
}

impl Apps {
    /// A deployment (with `extra` flags) running one `apps` workspace, `dev`, whose app answers
    /// through the proxy.
    async fn start(extra: &[&str]) -> anyhow::Result<Option<Self>> {
        if terraform()?.is_none() {
            return Ok(None);
        }
        let port = free_port()?;
        let address = format!("127.0.0.1:{port}");
        let wildcard = format!("*.apps.localhost:{port}");
        let mut args = vec!["--provisioner-daemons=1", "--http-address", &address];
        for flag in extra {
            args.push(if *flag == "WILDCARD" { &wildcard } else { flag });
        }
        let d = Deployment::new(&args).await?;
        let workspaces: PathBuf = d.dir.path().join("workspaces");
        d.ok(&[
            "templates",
            "push",
            "apps",
            "-d",
            &example("apps"),
            "--variable",
            &format!("workspaces_dir={}", workspaces.display()),
            "--yes",
        ])?;
        let app_port = free_port()?;
        d.ok(&[
            "create",
            "dev",
            "-t",
            "apps",
            "--parameter",
            &format!("port={app_port}"),
            "--yes",
        ])?;
        let ws = d.workspace("dev").await?;
        let reaper = Reaper(
            workspaces
                .join(ws.id.to_string())
                .join(".coder-workspace.pid"),
        );
        let http = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let apps = Self {
            d,
            port,
            _reaper: reaper,
            http,
        };
        let url = apps.url("/@admin/dev/apps/web/healthz");
        eventually(
            AGENT_START,
            "the app answered through the proxy",
            || async {
                let r = apps
                    .http
                    .get(&url)
                    .header("Coder-Session-Token", &apps.d.token)
                    .send()
                    .await?;
                Ok(r.status() == StatusCode::OK)
            },
        )
        .await?;
        Ok(Some(apps))
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A second member of the default organization, and their session token.
    async fn member(&self, name: &str) -> anyhow::Result<String> {
        self.d
            .owner
            .create_user(&CreateUserRequest {
                email: format!("{name}@example.com"),
                username: name.into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await?;
        Ok(codersdk::Client::new(self.d.owner.url().clone())
            .login_with_password(&LoginWithPasswordRequest {
                email: format!("{name}@example.com"),
                password: PASSWORD.into(),
            })
            .await?
            .session_token)
    }

    async fn get_as(&self, path: &str, token: Option<&str>) -> anyhow::Result<reqwest::Response> {
        let mut req = self.http.get(self.url(path));
        if let Some(t) = token {
            req = req.header(COOKIE, format!("coder_session_token={t}"));
        }
        Ok(req.send().await?)
    }
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The value of cookie `name` a response sets.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers().get_all(SET_COOKIE).iter().find_map(|v| {
        let v = v.to_str().ok()?;
        let (n, rest) = v.split_once('=')?;
        (n == name).then(|| rest.split(';').next().unwrap_or_default().to_string())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn path_apps_serve_their_owner_only_and_never_see_coderds_credentials() -> anyhow::Result<()>
{
    let Some(apps) = Apps::start(&[]).await? else {
        return Ok(());
    };
    let token = apps.d.token.clone();

    // A missing trailing slash is redirected (relative links need it); then the page.
    let r = apps
        .get_as("/@admin/dev/apps/web?a=1", Some(&token))
        .await?;
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(location(&r), "/@admin/dev/apps/web/?a=1");
    let r = apps.get_as("/@admin/dev/apps/web/", Some(&token)).await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        set_cookie(&r, "coder_signed_app_token").is_some(),
        "the decision is cached"
    );
    assert_eq!(r.text().await?, "hello from the workspace app at /");

    // Every credential of coderd's is stripped; the app's own cookie and query pass.
    let r = apps
        .http
        .get(apps.url(&format!(
            "/@admin/dev/apps/web/headers?x=1&coder_session_token={token}"
        )))
        .header(COOKIE, format!("coder_session_token={token}; theme=dark"))
        .header("Coder-Session-Token", &token)
        .header("Authorization", format!("Bearer {token}"))
        .header("X-Forwarded-For", "6.6.6.6")
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    // coderd's framing policy is its own pages', not the app's.
    assert!(r.headers().get("x-frame-options").is_none());
    let seen: serde_json::Value = r.json().await?;
    let text = seen.to_string();
    let secret = token.split_once('-').context("token shape")?.1;
    assert!(
        !text.contains(secret),
        "a credential reached the app: {text}"
    );
    assert!(
        !text.to_ascii_lowercase().contains("coder-session-token"),
        "{text}"
    );
    assert_eq!(seen["path"], "/headers?x=1");
    let header = |name: &str| {
        seen["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .and_then(|h| h[1].as_str().map(str::to_owned))
    };
    assert_eq!(header("cookie").as_deref(), Some("theme=dark"));
    assert_eq!(header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(header("x-forwarded-proto").as_deref(), Some("http"));

    // Strangers: an anonymous browser is sent to log in, an API client gets 401, another
    // member gets 404 — for owner apps, and for shared ones too (path apps are owner-only
    // unless the operator opts in).
    let r = apps
        .http
        .get(apps.url("/@admin/dev/apps/web/x?y=1"))
        .header(ACCEPT, "text/html")
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        location(&r),
        "/login?redirect=%2F%40admin%2Fdev%2Fapps%2Fweb%2Fx%3Fy%3D1"
    );
    let r = apps.get_as("/@admin/dev/apps/web/", None).await?;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let body: serde_json::Value = r.json().await?;
    assert!(body["message"].is_string(), "{body}");
    let bob = apps.member("bob").await?;
    for app in ["web", "public", "members", "nope"] {
        let r = apps
            .get_as(&format!("/@admin/dev/apps/{app}/"), Some(&bob))
            .await?;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{app}");
    }
    let r = apps.get_as("/@admin/nope/apps/web/", Some(&bob)).await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A forged decision cookie is not trusted.
    let r = apps
        .http
        .get(apps.url("/@admin/dev/apps/web/"))
        .header(
            COOKIE,
            format!("coder_session_token={bob}; coder_signed_app_token=k:AAAA"),
        )
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // WebSocket upgrades go through.
    let mut request = apps
        .url("/@admin/dev/apps/web/ws")
        .replace("http://", "ws://")
        .into_client_request()?;
    request
        .headers_mut()
        .insert("Coder-Session-Token", token.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await?;
    ws.send(Message::text("hi")).await?;
    let echoed = tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await?
        .context("an answer")??;
    assert_eq!(echoed.into_text()?.as_str(), "echo: hi");

    // Server-sent events stream one by one (the app sends one a second).
    let r = apps
        .get_as("/@admin/dev/apps/web/sse", Some(&token))
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    let start = Instant::now();
    let mut body = r.bytes_stream();
    let mut arrivals = Vec::new();
    let mut seen_text = String::new();
    while let Some(chunk) = body.next().await {
        seen_text.push_str(&String::from_utf8_lossy(&chunk?));
        while arrivals.len() < seen_text.matches("data: event").count() {
            arrivals.push(start.elapsed());
        }
    }
    assert_eq!(arrivals.len(), 3, "{seen_text}");
    assert!(
        arrivals[0] < Duration::from_millis(900),
        "first event late: {arrivals:?}"
    );
    assert!(
        arrivals[2] - arrivals[0] >= Duration::from_millis(1500),
        "buffered: {arrivals:?}"
    );

    // The agent checks the app's health and coderd shows it.
    eventually(
        Duration::from_secs(30),
        "the web app reported healthy",
        || async {
            let ws = apps.d.workspace("dev").await?;
            Ok(ws
                .latest_build
                .resources
                .iter()
                .flat_map(|r| &r.agents)
                .flat_map(|a| &a.apps)
                .any(|a| a.slug == "web" && a.health == "healthy"))
        },
    )
    .await?;

    // A failing health check makes the app unhealthy, and its agent with it.
    let r = apps
        .get_as("/@admin/dev/apps/web/fail-health", Some(&token))
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    eventually(
        Duration::from_secs(40),
        "the web app reported unhealthy",
        || async {
            let ws = apps.d.workspace("dev").await?;
            let agent = ws
                .latest_build
                .resources
                .iter()
                .flat_map(|r| &r.agents)
                .next()
                .cloned();
            Ok(agent.is_some_and(|a| {
                !a.health.healthy
                    && a.health.reason.contains("unhealthy")
                    && a.apps
                        .iter()
                        .any(|x| x.slug == "web" && x.health == "unhealthy")
            }))
        },
    )
    .await?;

    // A large upload streams through.
    let size = 8 << 20;
    let r = apps
        .http
        .post(apps.url("/@admin/dev/apps/web/upload"))
        .header("Coder-Session-Token", &token)
        .body(vec![7u8; size])
        .send()
        .await?;
    assert_eq!(r.text().await?, size.to_string());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_and_subdomain_apps_with_the_auth_hand_off() -> anyhow::Result<()> {
    let Some(apps) = Apps::start(&[
        "--dangerous-allow-path-app-sharing",
        "--wildcard-access-url",
        "WILDCARD",
    ])
    .await?
    else {
        return Ok(());
    };
    let token = apps.d.token.clone();
    let bob = apps.member("bob").await?;

    // Sharing levels, now that path apps may be shared.
    assert_eq!(
        apps.get_as("/@admin/dev/apps/public/", None)
            .await?
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        apps.get_as("/@admin/dev/apps/members/", None)
            .await?
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        apps.get_as("/@admin/dev/apps/members/", Some(&bob))
            .await?
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        apps.get_as("/@admin/dev/apps/web/", Some(&bob))
            .await?
            .status(),
        StatusCode::NOT_FOUND
    );

    // The API names the subdomain app's host.
    let ws = apps.d.workspace("dev").await?;
    let sub = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .flat_map(|a| &a.apps)
        .find(|a| a.slug == "sub")
        .context("the sub app")?;
    assert_eq!(sub.subdomain_name.as_deref(), Some("sub--main--dev--admin"));

    // The hand-off: app host → dashboard → (signed in) back with a sealed key → own cookie.
    let host = format!("sub--main--dev--admin.apps.localhost:{}", apps.port);
    let on_host = |path: &str| apps.http.get(apps.url(path)).header(HOST, &host);
    let r = on_host("/page?q=1")
        .header(ACCEPT, "text/html")
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    let to_dashboard = location(&r);
    let expected = format!("http%3A%2F%2F{}%2Fpage%3Fq%3D1", host.replace(':', "%3A"));
    assert_eq!(
        to_dashboard,
        apps.url(&format!(
            "/api/v2/applications/auth-redirect?redirect_uri={expected}"
        ))
    );
    let r = apps
        .http
        .get(&to_dashboard)
        .header(COOKIE, format!("coder_session_token={token}"))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    let back = url::Url::parse(&location(&r))?;
    assert_eq!(
        back.host_str(),
        Some(host.split(':').next().unwrap_or_default())
    );
    let sealed = back
        .query_pairs()
        .find(|(k, _)| k == "coder_application_connect_api_key")
        .map(|(_, v)| v.into_owned())
        .context("the sealed key")?;
    // Not a session token: the browser never sees the key itself in the URL.
    assert!(!sealed.contains(&token));
    let r = on_host(&format!("{}?{}", back.path(), back.query().unwrap_or("")))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(location(&r), "/page?q=1");
    let app_key =
        set_cookie(&r, "coder_subdomain_app_session_token").context("the app host's cookie")?;
    let r = on_host("/page?q=1")
        .header(
            COOKIE,
            format!("coder_subdomain_app_session_token={app_key}"),
        )
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await?, "hello from the workspace app at /page?q=1");
    // The app host's key opens apps, not the API.
    let r = apps
        .http
        .get(apps.url("/api/v2/users/me"))
        .header("Coder-Session-Token", &app_key)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Port sharing: the port is the owner's until shared, never beyond the template's maximum.
    let app_port: i32 = sub
        .url
        .as_deref()
        .and_then(|u| u.rsplit(':').next())
        .context("the app's port")?
        .parse()?;
    let port_host = format!("{app_port}--main--dev--admin.apps.localhost");
    let r = apps
        .http
        .get(apps.url("/healthz"))
        .header(HOST, &port_host)
        .header("Coder-Session-Token", &token)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK, "the owner opens their port");
    let as_bob = || {
        apps.http
            .get(apps.url("/healthz"))
            .header(HOST, &port_host)
            .header("Coder-Session-Token", &bob)
    };
    assert_eq!(as_bob().send().await?.status(), StatusCode::NOT_FOUND);
    let share = UpsertWorkspaceAgentPortShareRequest {
        agent_name: "main".into(),
        port: app_port,
        share_level: "authenticated".into(),
        protocol: "http".into(),
    };
    let refused = apps
        .d
        .owner
        .upsert_workspace_port_share(ws.id, &share)
        .await;
    assert!(
        refused.is_err(),
        "the template's maximum is owner: {refused:?}"
    );
    apps.d
        .owner
        .update_template_meta(
            ws.template_id,
            &UpdateTemplateMeta {
                max_port_share_level: Some("public".into()),
                ..Default::default()
            },
        )
        .await?;
    let shared = apps
        .d
        .owner
        .upsert_workspace_port_share(ws.id, &share)
        .await?;
    assert_eq!(
        (shared.port, shared.share_level.as_str()),
        (app_port, "authenticated")
    );
    let listed = apps.d.owner.workspace_port_shares(ws.id).await?;
    assert_eq!(listed.shares, vec![shared]);
    let bob_client = codersdk::Client::new(apps.d.owner.url().clone()).with_token(&bob);
    assert!(
        bob_client
            .upsert_workspace_port_share(ws.id, &share)
            .await
            .is_err(),
        "only updaters share"
    );
    assert_eq!(as_bob().send().await?.status(), StatusCode::OK);
    let anonymous = apps
        .http
        .get(apps.url("/healthz"))
        .header(HOST, &port_host)
        .send()
        .await?;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    apps.d
        .owner
        .delete_workspace_port_share(
            ws.id,
            &DeleteWorkspaceAgentPortShareRequest {
                agent_name: "main".into(),
                port: app_port,
            },
        )
        .await?;
    assert_eq!(as_bob().send().await?.status(), StatusCode::NOT_FOUND);

    // Bob's own hand-off key does not open the owner's app.
    let r = apps
        .http
        .get(&to_dashboard)
        .header(COOKIE, format!("coder_session_token={bob}"))
        .send()
        .await?;
    let back = location(&r);
    let url = url::Url::parse(&back)?;
    let r = on_host(&format!("/page?{}", url.query().unwrap_or("")))
        .send()
        .await?;
    let bob_key = set_cookie(&r, "coder_subdomain_app_session_token").context("bob's cookie")?;
    let r = on_host("/page")
        .header(
            COOKIE,
            format!("coder_subdomain_app_session_token={bob_key}"),
        )
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Abuse: redirect targets outside the wildcard, tampered keys.
    for target in [
        "http://evil.example.com/".to_string(),
        format!(
            "http://sub--main--dev--admin.apps.localhost.evil.com:{}/",
            apps.port
        ),
        format!("https://{host}/"),
        "/relative".to_string(),
    ] {
        let url = format!(
            "/api/v2/applications/auth-redirect?redirect_uri={}",
            url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
        );
        let r = apps.get_as(&url, Some(&token)).await?;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{target}");
    }
    let r = on_host("/?coder_application_connect_api_key=k:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    Ok(())
}
