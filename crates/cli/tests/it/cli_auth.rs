//! `coder login` on a deployment that signs people in through the browser: the CLI prints
//! `<url>/cli-auth`, the signed-in browser mints a session token there, and the token pasted on
//! the CLI's standard input logs it in.

use anyhow::Context;
use codersdk::users::User;
use testutil::{PASSWORD, TestApp};

use crate::harness::Coder;

/// What a signed-in browser does on `/cli-auth`: opens it, presses the button, reads the token.
async fn token_from_cli_auth_page(app: &TestApp, session: &str) -> anyhow::Result<String> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let page_url = app.url.join("/cli-auth")?;
    let cookie = format!("coder_session_token={session}");
    let page = http
        .get(page_url.clone())
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await?;
    anyhow::ensure!(
        page.status().is_success(),
        "GET /cli-auth: {}",
        page.status()
    );
    let html = page.text().await?;
    let csrf = attribute_after(&html, "name=\"csrf\" value=\"").context("csrf field")?;
    let minted = http
        .post(page_url)
        .header(reqwest::header::COOKIE, &cookie)
        .header(reqwest::header::CONTENT_TYPE, FORM)
        .body(form_body(&csrf))
        .send()
        .await?;
    anyhow::ensure!(
        minted.status().is_success(),
        "POST /cli-auth: {}",
        minted.status()
    );
    let html = minted.text().await?;
    attribute_after(&html, "data-session-token=\"").context("token on the page")
}

const FORM: &str = "application/x-www-form-urlencoded";

fn form_body(csrf: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("csrf", csrf)
        .finish()
}

fn attribute_after(html: &str, prefix: &str) -> Option<String> {
    let start = html.find(prefix)? + prefix.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn login_through_the_cli_auth_page() -> anyhow::Result<()> {
    let app = TestApp::with_options(|o| {
        o.deployment.disable_password_auth = true;
        o.front_doors.push(std::sync::Arc::new(dashboard::router));
    })
    .await?;
    let (owner, _) = app.owner().await?;
    let url = app.url.as_str().trim_end_matches('/');

    // Without a browser session the page sends the person to sign in first, and back.
    let anonymous = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?
        .get(app.url.join("/cli-auth")?)
        .send()
        .await?;
    let location = anonymous
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        location.starts_with("/login?redirect=%2Fcli-auth"),
        "{location}"
    );
    // And minting needs the session's form token.
    let session = owner.token().context("owner token")?.to_string();
    let forged = reqwest::Client::new()
        .post(app.url.join("/cli-auth")?)
        .header(
            reqwest::header::COOKIE,
            format!("coder_session_token={session}"),
        )
        .header(reqwest::header::CONTENT_TYPE, FORM)
        .body(form_body("forged"))
        .send()
        .await?;
    assert!(forged.status().is_client_error(), "{}", forged.status());

    let token = token_from_cli_auth_page(&app, &session).await?;
    assert_ne!(token, session, "a new session for the CLI");

    let coder = Coder::new()?;
    let out = coder.with_stdin(&["login", url, "--no-open"], &format!("{token}\n"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Open the following in your browser:\n\n\t{url}/cli-auth"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Paste your token here"), "{stderr}");
    assert!(stderr.contains("Welcome to Coder, owner!"), "{stderr}");
    let me: User = serde_json::from_str(&coder.ok(&["users", "show", "me", "-o", "json"])?)?;
    assert_eq!(me.username, "owner");

    // A wrong token is refused and nothing is saved.
    let other = Coder::new()?;
    let out = other.with_stdin(&["login", url, "--no-open"], "not-a-token\n")?;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("That's not a valid token!"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!other.config_dir().join("session").exists());

    // Naming an email still chooses the password (owners keep theirs).
    let by_password = Coder::new()?;
    let out = by_password.with_stdin(
        &["login", url, "--email", "owner@example.com"],
        &format!("{PASSWORD}\n"),
    )?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
