//! The dashboard in a real browser: Debian's chromium driven over WebDriver (chromium-driver)
//! with fantoccini. Setup → login → create a workspace from the form (a wrong value shows its
//! validation) → the status turns Running without a reload → stop → logout. A screenshot per
//! step lands in `target/e2e-screenshots/`. Without a browser the test is skipped, except with
//! `CI=true`, where that is a failure.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use testutil::PASSWORD;

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("e2e-screenshots")
}

/// chromedriver on a free port, killed when dropped.
struct Driver {
    // Held so the driver is killed (kill_on_drop) when the test ends.
    _child: tokio::process::Child,
    port: u16,
}

impl Driver {
    async fn start(binary: &PathBuf) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting chromedriver")?;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(Self {
                    _child: child,
                    port,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("chromedriver did not listen on {port}")
    }
}

async fn browser(driver: &Driver, chromium: &PathBuf) -> anyhow::Result<Client> {
    let profile = tempfile::tempdir()?;
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--window-size=1280,900",
                format!("--user-data-dir={}", profile.keep().display()),
            ],
        }),
    );
    Ok(ClientBuilder::rustls()?
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await?)
}

struct Shots {
    dir: PathBuf,
    n: u32,
}

impl Shots {
    async fn take(&mut self, client: &Client, name: &str) -> anyhow::Result<()> {
        self.n += 1;
        let png = client.screenshot().await?;
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(self.dir.join(format!("{:02}-{name}.png", self.n)), png)?;
        Ok(())
    }
}

async fn text_of(client: &Client, css: &str) -> anyhow::Result<String> {
    Ok(client.find(Locator::Css(css)).await?.text().await?)
}

/// Waits until the element's text contains `want`, without reloading the page.
async fn wait_text(client: &Client, css: &str, want: &str, within: Duration) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Ok(text) = text_of(client, css).await
            && text.contains(want)
        {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("{css} never showed {want:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn fill(client: &Client, css: &str, value: &str) -> anyhow::Result<()> {
    let field = client.find(Locator::Css(css)).await?;
    field.clear().await?;
    field.send_keys(value).await?;
    Ok(())
}

async fn submit(client: &Client, css: &str) -> anyhow::Result<()> {
    client.find(Locator::Css(css)).await?.click().await?;
    Ok(())
}

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
