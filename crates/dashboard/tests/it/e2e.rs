//! The dashboard in a real browser: Debian's chromium driven over WebDriver (chromium-driver)
//! with fantoccini. Setup → login → create a workspace from the form (a wrong value shows its
//! validation) → the build log streams and the status turns Running without a reload → stop →
//! start → delete after typing the name → template versions → users → a pending build no daemon
//! matches, on its workspace page and on the provisioners page. Every page is photographed and
//! audited with axe-core (light and dark) into `target/e2e-screenshots/flow/`; a serious or
//! critical violation fails the test. Without a browser the test is skipped, and without axe-core
//! the audits are, except with `CI=true`, where either is a failure.

use std::time::Duration;

use fantoccini::{Client, Locator};
use provisionerd::DaemonAuth;
use serde_json::json;
use testutil::{DaemonSpec, PASSWORD, eventually};

use crate::browser::{Driver, Shots, browser, fill, on_path, submit, text_of, wait_text};

#[tokio::test]
async fn browser_flow() -> anyhow::Result<()> {
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
    // Before the browser starts: an early return after it would leave chromium running.
    let mut shots = Shots::new("flow", ci)?;
    let app = crate::common::app().await?;
    let driver = Driver::start(&chromedriver).await?;
    let client = browser(&driver, &chromium).await?;
    let result = flow(&app, &client, &mut shots).await;
    if result.is_err() {
        let _ = shots.shot(&client, "failure").await;
    }
    let _ = client.close().await;
    drop(driver);
    result?;
    shots.verdict()
}

async fn flow(app: &testutil::TestApp, client: &Client, shots: &mut Shots) -> anyhow::Result<()> {
    let url = |path: &str| url_of(app, path);

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
    create(client, "docker", "/@owner/dev").await?;

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

    // Stop, then start again, through the action forms.
    submit(client, &action("stop")).await?;
    wait_text(client, "#ws-status", "Stopped", Duration::from_secs(30)).await?;
    shots.take(client, "workspace-stopped").await?;
    client.goto(&url("/workspaces")).await?;
    wait_text(client, "table.list", "dev", Duration::from_secs(5)).await?;
    shots.take(client, "workspaces").await?;
    submit(client, "a[href='/@owner/dev']").await?;
    client
        .wait()
        .for_element(Locator::Css(&action("start")))
        .await?;
    submit(client, &action("start")).await?;
    wait_text(client, "#ws-status", "Running", Duration::from_secs(30)).await?;
    shots.take(client, "workspace-started").await?;
    visit(client, shots, &url("/@owner/dev/builds"), "builds").await?;
    visit(client, shots, &url("/@owner/dev/builds/1"), "build-1").await?;
    client.goto(&url("/@owner/dev")).await?;
    client
        .wait()
        .for_element(Locator::Css("#ws-status"))
        .await?;

    delete_workspace(client, shots).await?;

    pending_without_daemon(app, &owner, client, shots).await?;
    client.goto(&url("/templates/docker/versions")).await?;
    wait_text(client, "table.list", "Active", Duration::from_secs(5)).await?;
    shots.take(client, "template-versions").await?;
    submit(client, "table.list a[href^='/templates/docker/versions/']").await?;
    wait_text(client, "#import", "Succeeded", Duration::from_secs(5)).await?;
    shots.take(client, "template-version").await?;
    visit(client, shots, &url("/templates/docker"), "template").await?;
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
    // Both jobs of `pending_without_daemon` wait, each saying so with its tags.
    let waiting = text_of(client, "#waiting").await?;
    for want in [
        "Template import",
        "Workspace build",
        "No provisioner matches its tags",
        "gpu=a100",
        "gpu=t4",
    ] {
        anyhow::ensure!(waiting.contains(want), "no {want:?} in {waiting:?}");
    }
    shots.take(client, "provisioners").await?;
    for (path, name) in [
        (
            "/organizations/default/provisioner-jobs",
            "provisioner-jobs",
        ),
        (
            "/organizations/default/provisioner-keys",
            "provisioner-keys",
        ),
        ("/settings/tokens", "tokens"),
        ("/health", "health"),
        ("/deployment/overview", "deployment-overview"),
    ] {
        visit(client, shots, &url(path), name).await?;
    }
    Ok(())
}

/// Opens a page that has no live part to wait for, then photographs and audits it.
async fn visit(client: &Client, shots: &mut Shots, url: &str, name: &str) -> anyhow::Result<()> {
    client.goto(url).await?;
    client.wait().for_element(Locator::Css("main h1")).await?;
    anyhow::ensure!(
        !client.current_url().await?.path().starts_with("/login"),
        "{url} sent the owner to the login page"
    );
    shots.take(client, name).await?;
    Ok(())
}

/// Submits the filled-in form to create a workspace of `template`, which must land on the new
/// workspace's page at `path`.
async fn create(client: &Client, template: &str, path: &str) -> anyhow::Result<()> {
    let form = format!("form[action='/templates/{template}/workspace'] button[type=submit]");
    submit(client, &form).await?;
    client
        .wait()
        .for_element(Locator::Css("#ws-status"))
        .await?;
    let now = client.current_url().await?;
    anyhow::ensure!(now.path() == path, "created, landed on {now}");
    Ok(())
}

/// The submit button of the workspace's action form for `transition`.
fn action(transition: &str) -> String {
    format!("#ws-live form:has(input[name=transition][value={transition}]) button[type=submit]")
}

/// Deletes the workspace shown, typing its name as the page asks (a wrong name first, which
/// the page refuses), and waits for it to leave the list.
async fn delete_workspace(client: &Client, shots: &mut Shots) -> anyhow::Result<()> {
    submit(client, "details.danger summary").await?;
    fill(client, "#confirm-name", "not-this-one").await?;
    submit(client, "details.danger button[type=submit]").await?;
    wait_text(
        client,
        "p.error[role=alert]",
        "Type the workspace's name",
        Duration::from_secs(5),
    )
    .await?;
    shots.take(client, "delete-unconfirmed").await?;
    submit(client, "details.danger summary").await?;
    let name = text_of(client, "label[for=confirm-name] strong").await?;
    anyhow::ensure!(name == "dev", "the page asks for {name:?}");
    fill(client, "#confirm-name", &name).await?;
    submit(client, "details.danger button[type=submit]").await?;
    client.wait().for_element(Locator::Css("#ws-table")).await?;
    anyhow::ensure!(client.current_url().await?.path() == "/workspaces");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while client
        .find(Locator::Css("a[href='/@owner/dev']"))
        .await
        .is_ok()
    {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the deleted workspace stayed in the list"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    shots.take(client, "workspace-deleted").await?;
    Ok(())
}

/// Two jobs no daemon can take. A template version asking for `gpu=t4`, which no daemon has;
/// and a workspace of a template imported by a `gpu=a100` daemon that has since come back as
/// `gpu=h100`, so its build waits: the workspace page says so with the tags.
async fn pending_without_daemon(
    app: &testutil::TestApp,
    owner: &codersdk::Client,
    client: &Client,
    shots: &mut Shots,
) -> anyhow::Result<()> {
    let template = crate::common::echo_template();
    app.echo_version(owner, "default", &template, &[("gpu", "t4")])
        .await?;

    let auth = || DaemonAuth::SessionToken(owner.token().unwrap_or_default().to_string());
    let gpu = app.daemon(DaemonSpec::new("gpu-box", auth()).tags(&[("gpu", "a100")]))?;
    app.echo_template(owner, "gpu", &template, &[("gpu", "a100")])
        .await?;
    gpu.stop().await??;
    let _retagged = app.daemon(DaemonSpec::new("gpu-box", auth()).tags(&[("gpu", "h100")]))?;
    eventually(Duration::from_secs(10), "gpu-box retagged", || async {
        let daemons = owner.provisioner_daemons("default").await?;
        Ok(daemons
            .iter()
            .any(|d| d.name == "gpu-box" && d.tags.get("gpu").is_some_and(|v| v == "h100")))
    })
    .await?;

    client
        .goto(&url_of(app, "/templates/gpu/workspace"))
        .await?;
    fill(client, "#ws-name", "trainer").await?;
    create(client, "gpu", "/@owner/trainer").await?;
    wait_text(client, "#ws-status", "Pending", Duration::from_secs(5)).await?;
    let detail = text_of(client, "#ws-live .detail").await?;
    anyhow::ensure!(
        detail.contains("No provisioner matches") && detail.contains("gpu=a100"),
        "the pending workspace says {detail:?}"
    );
    shots.take(client, "workspace-pending").await?;
    Ok(())
}

fn url_of(app: &testutil::TestApp, path: &str) -> String {
    format!("{}{}", app.url.as_str().trim_end_matches('/'), path)
}
