//! The browser harness shared by the end-to-end tests: chromedriver on a free port, a
//! headless Debian chromium with a throwaway profile, screenshots under
//! `target/e2e-screenshots/`, and small waiting helpers.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

pub(crate) fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("e2e-screenshots")
}

/// chromedriver on a free port, killed when dropped.
pub(crate) struct Driver {
    // Held so the driver is killed (kill_on_drop) when the test ends.
    _child: tokio::process::Child,
    pub(crate) port: u16,
}

impl Driver {
    pub(crate) async fn start(binary: &PathBuf) -> anyhow::Result<Self> {
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

pub(crate) async fn browser(driver: &Driver, chromium: &PathBuf) -> anyhow::Result<Client> {
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

pub(crate) struct Shots {
    pub(crate) dir: PathBuf,
    pub(crate) n: u32,
}

impl Shots {
    pub(crate) async fn take(&mut self, client: &Client, name: &str) -> anyhow::Result<()> {
        self.n += 1;
        let png = client.screenshot().await?;
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(self.dir.join(format!("{:02}-{name}.png", self.n)), png)?;
        Ok(())
    }
}

pub(crate) async fn text_of(client: &Client, css: &str) -> anyhow::Result<String> {
    Ok(client.find(Locator::Css(css)).await?.text().await?)
}

/// Waits until the element's text contains `want`, without reloading the page.
pub(crate) async fn wait_text(
    client: &Client,
    css: &str,
    want: &str,
    within: Duration,
) -> anyhow::Result<()> {
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

pub(crate) async fn fill(client: &Client, css: &str, value: &str) -> anyhow::Result<()> {
    let field = client.find(Locator::Css(css)).await?;
    field.clear().await?;
    field.send_keys(value).await?;
    Ok(())
}

pub(crate) async fn submit(client: &Client, css: &str) -> anyhow::Result<()> {
    client.find(Locator::Css(css)).await?.click().await?;
    Ok(())
}

/// One test's browser: chromedriver, a fresh chromium and its screenshots.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) shots: Shots,
    // Held so chromedriver lives as long as the session.
    _driver: Driver,
}

impl Session {
    /// Starts a browser, or `None` when chromium is not installed (a failure with `CI=true`).
    pub(crate) async fn start() -> anyhow::Result<Option<Self>> {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let (Some(chromium), Some(chromedriver)) = (on_path("chromium"), on_path("chromedriver"))
        else {
            anyhow::ensure!(
                !ci,
                "chromium and chromedriver are required with CI=true (scripts/setup.sh --tests)"
            );
            eprintln!("skipping: chromium or chromedriver missing (scripts/setup.sh --tests)");
            return Ok(None);
        };
        let driver = Driver::start(&chromedriver).await?;
        let client = browser(&driver, &chromium).await?;
        Ok(Some(Self {
            client,
            shots: Shots {
                dir: screenshots_dir(),
                n: 0,
            },
            _driver: driver,
        }))
    }

    /// Closes the browser, after a screenshot named `failure` if the test failed.
    pub(crate) async fn finish(
        mut self,
        name: &str,
        result: anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if result.is_err() {
            let _ = self
                .shots
                .take(&self.client, &format!("{name}-failure"))
                .await;
        }
        let _ = self.client.close().await;
        result
    }
}
