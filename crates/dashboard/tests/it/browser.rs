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

/// A screenshot per page, and an axe-core audit of it when axe is installed.
pub(crate) struct Shots {
    dir: PathBuf,
    n: u32,
    axe: Option<String>,
    /// Whether axe has shown, on a probe, that it flags violations (done before the first audit).
    checked: bool,
    violations: Vec<String>,
}

impl Shots {
    /// Files go to `target/e2e-screenshots/{test}/`, emptied first so nothing stale remains.
    /// Without axe-core the pages are only photographed, except with `CI=true`, where that is
    /// a failure.
    pub(crate) fn new(test: &str, ci: bool) -> anyhow::Result<Self> {
        let axe = crate::axe::script()?;
        if axe.is_none() {
            anyhow::ensure!(
                !ci,
                "axe-core is required with CI=true (scripts/setup.sh --tests installs it)"
            );
            eprintln!("not auditing accessibility: axe-core missing (scripts/setup.sh --tests)");
        }
        let dir = screenshots_dir().join(test);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(Self {
            dir,
            n: 0,
            axe,
            checked: false,
            violations: Vec::new(),
        })
    }

    /// Photographs the page (`NN-name.png`) and audits it (`NN-name.axe.json`); serious and
    /// critical violations are collected for [`Shots::verdict`], so one run lists them all.
    pub(crate) async fn take(&mut self, client: &Client, name: &str) -> anyhow::Result<()> {
        self.shot(client, name).await?;
        if let Some(axe) = &self.axe {
            if !self.checked {
                crate::axe::self_check(client, axe).await?;
                self.checked = true;
            }
            let json = self.dir.join(format!("{:02}-{name}.axe.json", self.n));
            let found = crate::axe::audit(client, axe, name, &json).await?;
            self.violations.extend(found);
        }
        Ok(())
    }

    /// Only the screenshot (for a failure, where the page is whatever it was).
    pub(crate) async fn shot(&mut self, client: &Client, name: &str) -> anyhow::Result<()> {
        self.n += 1;
        let png = client.screenshot().await?;
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(self.dir.join(format!("{:02}-{name}.png", self.n)), png)?;
        Ok(())
    }

    /// Fails with every serious or critical violation the audits found.
    pub(crate) fn verdict(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.violations.is_empty(),
            "axe-core found {} serious or critical violation(s) (details in {}):\n{}",
            self.violations.len(),
            self.dir.display(),
            self.violations.join("\n")
        );
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

/// Runs `step` on the element `css` finds, finding it again if a live update replaced it in
/// between (the live socket swaps whole regions; the page's own code keeps what the person
/// works on, but a WebDriver reference taken just before a swap goes stale).
async fn on_element<F, Fut>(client: &Client, css: &str, step: F) -> anyhow::Result<()>
where
    F: Fn(fantoccini::elements::Element) -> Fut,
    Fut: std::future::Future<Output = Result<(), fantoccini::error::CmdError>>,
{
    let mut tries = 0;
    loop {
        let element = client
            .find(Locator::Css(css))
            .await
            .with_context(|| format!("finding {css}"))?;
        match step(element).await {
            Err(e) if e.is_stale_element_reference() && tries < 3 => tries += 1,
            other => return other.with_context(|| format!("using {css}")),
        }
    }
}

pub(crate) async fn fill(client: &Client, css: &str, value: &str) -> anyhow::Result<()> {
    on_element(client, css, |field| async move {
        field.clear().await?;
        field.send_keys(value).await
    })
    .await
}

pub(crate) async fn submit(client: &Client, css: &str) -> anyhow::Result<()> {
    on_element(client, css, |element| async move { element.click().await }).await
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
    /// Screenshots and audits go to `target/e2e-screenshots/{test}/`.
    pub(crate) async fn start(test: &str) -> anyhow::Result<Option<Self>> {
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
        let shots = Shots::new(test, ci)?;
        let driver = Driver::start(&chromedriver).await?;
        let client = browser(&driver, &chromium).await?;
        Ok(Some(Self {
            client,
            shots,
            _driver: driver,
        }))
    }

    /// Closes the browser, after a screenshot named `failure` if the test failed; a passing
    /// test still fails on the accessibility violations its pages had.
    pub(crate) async fn finish(
        mut self,
        name: &str,
        result: anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if result.is_err() {
            let _ = self
                .shots
                .shot(&self.client, &format!("{name}-failure"))
                .await;
        }
        let _ = self.client.close().await;
        result?;
        self.shots.verdict()
    }
}
