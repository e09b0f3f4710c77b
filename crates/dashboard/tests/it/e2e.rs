//! The dashboard in a real browser: Debian's chromium driven over WebDriver (chromium-driver)
//! with fantoccini. Setup → login → create a workspace from the form (a wrong value shows its
//! validation) → the status turns Running without a reload → stop → logout. A screenshot per
//! step lands in `target/e2e-screenshots/`. Without a browser the test is skipped, except with
//! `CI=true`, where that is a failure.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;
use testutil::PASSWORD;

use crate::browser::{
    Driver, Shots, browser, fill, on_path, screenshots_dir, submit, text_of, wait_text,
};

#[tokio::test]
async fn setup_login_create_watch_running_stop() -> anyhow::Result<()> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let (Some(chromium), Some(chromedriver)) = (on_path("chromium"), on_path("chromedriver"))
    else {
        anyhow::ensure!(
            !ci,
            "chromium and chromedriver are required with CI=true (scripts/setup.sh --tests)"
        );
        eprintln!("skipping: chromium or chromedriver missing (scripts/setup.sh --tests)");
        return Ok(());
    };
    let app = crate::common::app().await?;
    let driver = Driver::start(&chromedriver).await?;
    let client = browser(&driver, &chromium).await?;
    let mut shots = Shots {
        dir: screenshots_dir(),
        n: 0,
    };
    let result = flow(&app, &client, &mut shots).await;
    if result.is_err() {
        let _ = shots.take(&client, "failure").await;
    }
    let _ = client.close().await;
    drop(driver);
    result
}

async fn flow(app: &testutil::TestApp, client: &Client, shots: &mut Shots) -> anyhow::Result<()> {
    let url = |path: &str| format!("{}{}", app.url.as_str().trim_end_matches('/'), path);

    // First visit: no user yet, so the dashboard asks for one.
    client.goto(&url("/")).await?;
    anyhow::ensure!(client.current_url().await?.path() == "/setup");
    shots.take(client, "setup").await?;
    fill(client, "#email", "owner@example.com").await?;
    fill(client, "#username", "owner").await?;
    fill(client, "#password", PASSWORD).await?;
    submit(client, "form[action='/setup'] button[type=submit]").await?;
    client
        .wait()
        .for_element(Locator::Css("table.list"))
        .await?;
    anyhow::ensure!(client.current_url().await?.path() == "/workspaces");

    // Log out and back in through the form.
    submit(client, "form.logout button").await?;
    client.wait().for_element(Locator::Css("#password")).await?;
    shots.take(client, "login").await?;
    fill(client, "#email", "owner@example.com").await?;
    fill(client, "#password", PASSWORD).await?;
    submit(client, "form[action='/login'] button[type=submit]").await?;
    client
        .wait()
        .for_element(Locator::Css("table.list"))
        .await?;
    shots.take(client, "workspaces-empty").await?;

    // A template with a parameter, pushed as the CLI would.
    let owner = app.login("owner@example.com", PASSWORD).await?;
    crate::common::push_template(app, &owner, "docker").await?;
    client.goto(&url("/templates")).await?;
    shots.take(client, "templates").await?;
    submit(client, "a[href='/templates/docker/workspace']").await?;
    client.wait().for_element(Locator::Css("#ws-name")).await?;
    fill(client, "#ws-name", "dev").await?;
    fill(client, "#param-cpus", "99").await?;
    submit(
        client,
        "form[action='/templates/docker/workspace'] button[type=submit]",
    )
    .await?;
    client
        .wait()
        .for_element(Locator::Css("#param-cpus-error"))
        .await?;
    let error = text_of(client, "#param-cpus-error").await?;
    anyhow::ensure!(error.contains('8'), "validation message: {error}");
    shots.take(client, "create-invalid").await?;
    fill(client, "#param-cpus", "4").await?;
    submit(
        client,
        "form[action='/templates/docker/workspace'] button[type=submit]",
    )
    .await?;
    client
        .wait()
        .for_element(Locator::Css("#ws-status"))
        .await?;
    anyhow::ensure!(client.current_url().await?.path() == "/@owner/dev");

    // Marks this document: if the page reloaded, the mark would be gone.
    client
        .execute("window.__e2eMark = 'same page'; return null;", vec![])
        .await?;
    shots.take(client, "workspace-building").await?;
    wait_text(client, "#ws-status", "Running", Duration::from_secs(30)).await?;
    wait_text(
        client,
        "#build-log",
        "creating the container",
        Duration::from_secs(10),
    )
    .await?;
    let mark = client
        .execute("return window.__e2eMark || null;", vec![])
        .await?;
    anyhow::ensure!(mark == json!("same page"), "the page reloaded: {mark}");
    // The update came over the live socket (live.js ran under the CSP and connected), not
    // only through the polling fallback.
    let live = client
        .execute("return document.body.dataset.live || null;", vec![])
        .await?;
    anyhow::ensure!(live == json!("open"), "the live socket is not open: {live}");
    shots.take(client, "workspace-running").await?;

    // Stop through the action form.
    submit(client, "#ws-live form button[type=submit]").await?;
    wait_text(client, "#ws-status", "Stopped", Duration::from_secs(30)).await?;
    shots.take(client, "workspace-stopped").await?;

    client.goto(&url("/workspaces")).await?;
    wait_text(client, "table.list", "dev", Duration::from_secs(5)).await?;
    shots.take(client, "workspaces").await?;
    client.goto(&url("/templates/docker/versions")).await?;
    wait_text(client, "table.list", "Active", Duration::from_secs(5)).await?;
    shots.take(client, "template-versions").await?;
    client.goto(&url("/deployment/users")).await?;
    wait_text(
        client,
        "table.list",
        "owner@example.com",
        Duration::from_secs(5),
    )
    .await?;
    shots.take(client, "users").await?;
    submit(client, "a[href='/organizations/default/provisioners']").await?;
    wait_text(client, "table.list", "echo", Duration::from_secs(5)).await?;
    shots.take(client, "provisioners").await?;
    Ok(())
}
