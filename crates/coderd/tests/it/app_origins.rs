//! Apps beyond plain HTTP on one coderd: apps serving https inside the workspace (an app URL
//! `https://…` and a port host `<port>s--…`), the template's `cors_behavior`, and app keys that
//! every replica of a deployment can open.

use std::sync::Arc;
use std::time::Duration;

use codersdk::templates::UpdateTemplateMeta;
use codersdk::workspaces::Workspace;
use reqwest::StatusCode;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use testutil::{TestApp, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use uuid::Uuid;

use crate::agents::{agent_id, agent_template, workspace_with};
use crate::relay::TestAgent;

const WILDCARD: &str = "*.apps.test";

/// An app serving https with a self-signed certificate (as development servers do), answering
/// every request with its request line and a CORS header of its own.
async fn tls_app() -> anyhow::Result<u16> {
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])?.self_signed(&key)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let body = format!("over tls: {}", text.lines().next().unwrap_or_default());
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
                     access-control-allow-origin: *\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Ok(port)
}

/// A workspace `dev` of the owner whose app `code` is at `url`, with its agent connected.
async fn workspace(
    app: &TestApp,
    owner: &codersdk::Client,
    url: &str,
) -> anyhow::Result<(Workspace, TestAgent)> {
    let agent_token = Uuid::new_v4().to_string();
    let mut template = agent_template(&agent_token);
    if let Some(a) = template
        .start
        .as_mut()
        .and_then(|s| s.resources.first_mut())
        .and_then(|r| r.agents.first_mut())
        .and_then(|a| a.apps.first_mut())
    {
        a.url = url.to_string();
    }
    let ws = workspace_with(app, owner, "me", "dev", &template).await?;
    let agent = TestAgent::connect(app, &agent_token).await?;
    let id = agent_id(&ws);
    eventually(Duration::from_secs(10), "the agent connected", || async {
        Ok(owner.workspace_agent(id).await?.status == "connected")
    })
    .await?;
    Ok((ws, agent))
}

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

/// A request to app host `label` under the wildcard, sent to `base` with a `Host` header.
fn on_host(
    base: &url::Url,
    method: reqwest::Method,
    label: &str,
    path: &str,
) -> anyhow::Result<reqwest::RequestBuilder> {
    Ok(client()?
        .request(
            method,
            format!("{}{path}", base.as_str().trim_end_matches('/')),
        )
        .header("host", format!("{label}.apps.test")))
}

#[tokio::test(flavor = "multi_thread")]
async fn apps_serving_https_in_the_workspace_are_proxied() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.deployment.apps.wildcard =
            Some(coderd_core::app_urls::Wildcard::parse(WILDCARD, "http").expect("wildcard"));
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    let port = tls_app().await?;
    let (_ws, _agent) = workspace(&app, &owner, &format!("https://localhost:{port}/")).await?;

    // A path app whose URL is https.
    let r = client()?
        .get(format!("{}@owner/dev/apps/code/hello?x=1", app.url))
        .header("Coder-Session-Token", &token)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    // `simple` (the default): the app's own CORS header does not get through.
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    assert_eq!(r.text().await?, "over tls: GET /hello?x=1 HTTP/1.1");

    // The same server as a port host: `<port>s` means https inside the workspace.
    let r = on_host(
        &app.url,
        reqwest::Method::GET,
        &format!("{port}s--main--dev--owner"),
        "/p",
    )?
    .header("Coder-Session-Token", &token)
    .send()
    .await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await?, "over tls: GET /p HTTP/1.1");

    // Plain HTTP to a TLS port fails as the app's failure, not coderd's.
    let r = on_host(
        &app.url,
        reqwest::Method::GET,
        &format!("{port}--main--dev--owner"),
        "/",
    )?
    .header("Coder-Session-Token", &token)
    .send()
    .await?;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_templates_cors_behavior_decides_who_may_call_an_app() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.provisioner_daemons = 1;
        o.deployment.apps.wildcard =
            Some(coderd_core::app_urls::Wildcard::parse(WILDCARD, "http").expect("wildcard"));
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    let port = tls_app().await?;
    let (ws, _agent) = workspace(&app, &owner, &format!("https://localhost:{port}/")).await?;
    let host = "code--main--dev--owner";
    let mine = "http://web--main--other--owner.apps.test";
    let theirs = "http://web--main--dev--mallory.apps.test";

    // `simple`: coderd answers preflights itself, for the same user's app hosts only.
    for (origin, allowed) in [(mine, true), (theirs, false), ("http://evil.test", false)] {
        let r = on_host(&app.url, reqwest::Method::OPTIONS, host, "/api")?
            .header("origin", origin)
            .header("access-control-request-method", "PUT")
            .header("access-control-request-headers", "content-type")
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{origin}");
        let granted = r.headers().get("access-control-allow-origin");
        assert_eq!(
            granted.and_then(|v| v.to_str().ok()),
            allowed.then_some(origin),
            "{origin}"
        );
        if allowed {
            assert_eq!(r.headers()["access-control-allow-credentials"], "true");
        }
    }
    // And on responses: the allowed origin replaces the app's `*`.
    let r = on_host(&app.url, reqwest::Method::GET, host, "/")?
        .header("Coder-Session-Token", &token)
        .header("origin", mine)
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["access-control-allow-origin"], mine);
    let r = on_host(&app.url, reqwest::Method::GET, host, "/")?
        .header("Coder-Session-Token", &token)
        .header("origin", theirs)
        .send()
        .await?;
    assert!(!r.headers().contains_key("access-control-allow-origin"));

    // `passthru`: the app's own headers go through untouched.
    let updated = owner
        .update_template_meta(
            ws.template_id,
            &UpdateTemplateMeta {
                cors_behavior: Some("passthru".into()),
                ..Default::default()
            },
        )
        .await?;
    assert_eq!(updated.cors_behavior, "passthru");
    let r = on_host(&app.url, reqwest::Method::GET, host, "/")?
        .header("Coder-Session-Token", &token)
        .header("origin", theirs)
        .send()
        .await?;
    assert_eq!(r.headers()["access-control-allow-origin"], "*");

    // Anything but the two behaviours is refused, naming the field, and changes nothing.
    let r = client()?
        .patch(format!("{}api/v2/templates/{}", app.url, ws.template_id))
        .header("Coder-Session-Token", &token)
        .json(&serde_json::json!({"cors_behavior": "wide-open"}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = r.json().await?;
    assert_eq!(body["validations"][0]["field"], "cors_behavior", "{body}");
    assert_eq!(
        owner.template(ws.template_id).await?.cors_behavior,
        "passthru"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_key_handed_off_by_one_replica_opens_on_another() -> anyhow::Result<()> {
    let wildcard =
        || Some(coderd_core::app_urls::Wildcard::parse(WILDCARD, "http").expect("wildcard"));
    let a = TestApp::with_options(|o| o.deployment.apps.wildcard = wildcard()).await?;
    let b = a
        .replica(|o| o.deployment.apps.wildcard = wildcard())
        .await?;
    let (owner, _) = a.owner().await?;
    let token = owner.token().unwrap_or_default().to_string();
    let app_url = "http://code--main--dev--owner.apps.test/here?q=1";

    // Replica A seals an app-scoped key for the app host…
    let r = client()?
        .get(format!("{}api/v2/applications/auth-redirect", a.url))
        .query(&[("redirect_uri", app_url)])
        .header("Coder-Session-Token", &token)
        .send()
        .await?;
    assert!(r.status().is_redirection(), "{}", r.status());
    let location = url::Url::parse(
        r.headers()["location"]
            .to_str()
            .map_err(|e| anyhow::anyhow!("{e}"))?,
    )?;
    let path = format!(
        "{}?{}",
        location.path(),
        location.query().unwrap_or_default()
    );

    // …and replica B opens it: the app host keeps the key and goes to the clean URL.
    let r = on_host(
        &b.url,
        reqwest::Method::GET,
        "code--main--dev--owner",
        &path,
    )?
    .send()
    .await?;
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/here?q=1");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("coder_subdomain_app_session_token="));
    assert!(cookie.is_some(), "{:?}", r.headers());

    // A key altered on the way is refused by either replica.
    let forged = path.replacen(
        "coder_application_connect_api_key=",
        "coder_application_connect_api_key=A",
        1,
    );
    for base in [&a.url, &b.url] {
        let r = on_host(
            base,
            reqwest::Method::GET,
            "code--main--dev--owner",
            &forged,
        )?
        .send()
        .await?;
        assert!(!r.status().is_redirection(), "{}", r.status());
        assert!(r.headers().get("set-cookie").is_none());
    }
    Ok(())
}
