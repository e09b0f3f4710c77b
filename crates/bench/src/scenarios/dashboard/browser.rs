//! DOMContentLoaded of dashboard pages in headless Chromium: Debian's `chromium` driven through
//! `chromedriver` (WebDriver, as the dashboard's browser tests do), signed in with the owner's
//! session cookie. After each navigation (WebDriver returns once the page has loaded) the page's
//! Navigation Timing entry gives `domContentLoadedEventEnd`, counted from the navigation's
//! start; the page's rows are checked so a login form is never timed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, ensure};
use fantoccini::{Client, ClientBuilder};
use serde_json::json;

use super::{Plan, Target};
use crate::deploy::Deployment;
use crate::stats::Percentiles;

const TIMING: &str = "const n = performance.getEntriesByType('navigation')[0];
    return [n.domContentLoadedEventEnd - n.startTime,
            document.querySelectorAll('tr[data-live-workspace]').length];";

/// The browser and its driver, found on PATH.
pub struct Browser {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

impl Browser {
    /// Both programs, or why the browser rows cannot be measured.
    pub fn find() -> Result<Self, String> {
        let find = |name: &str| {
            on_path(name).ok_or_else(|| {
                format!("{name} is not on PATH (scripts/setup.sh --bench installs it)")
            })
        };
        Ok(Self {
            chromium: find("chromium")?,
            chromedriver: find("chromedriver")?,
        })
    }

    /// DOMContentLoaded percentiles per measured run, for each of `targets`.
    pub async fn measure(
        &self,
        profile: &Path,
        deploy: &Deployment,
        targets: &[Target],
        plan: &Plan,
    ) -> anyhow::Result<Vec<(Target, Vec<Percentiles>)>> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let _driver = tokio::process::Command::new(&self.chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting chromedriver")?;
        let client = self.connect(port, profile, plan.timeout).await?;
        let measured = navigate(&client, deploy, targets, plan).await;
        let closed = client.close().await;
        let measured = measured?;
        closed?;
        Ok(measured)
    }

    async fn connect(
        &self,
        port: u16,
        profile: &Path,
        timeout: Duration,
    ) -> anyhow::Result<Client> {
        std::fs::create_dir_all(profile)?;
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": self.chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--no-first-run", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match ClientBuilder::rustls()?
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => return Ok(client),
                // chromedriver takes a moment to listen.
                Err(e) if tokio::time::Instant::now() > deadline => {
                    return Err(e).context("connecting to chromedriver");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

async fn navigate(
    client: &Client,
    deploy: &Deployment,
    targets: &[Target],
    plan: &Plan,
) -> anyhow::Result<Vec<(Target, Vec<Percentiles>)>> {
    let base = deploy.server.url.clone();
    // A cookie is set from a page of its origin: any will do. (chromedriver refuses WebDriver's
    // add-cookie for an IP address host, so the page sets it.)
    client.goto(base.join("/login")?.as_str()).await?;
    client
        .execute(
            "document.cookie = arguments[0] + '=' + arguments[1] + '; path=/; samesite=lax';",
            vec![
                json!(codersdk::client::SESSION_TOKEN_COOKIE),
                json!(deploy.token),
            ],
        )
        .await?;
    let mut measured = Vec::new();
    for target in targets {
        let url = base.join(&target.path)?;
        // The first load fills the cache with the page's assets, as for anyone who has opened
        // the dashboard before.
        load(client, url.as_str(), target).await?;
        let mut runs = Vec::new();
        for run in 0..usize::from(plan.warmup) + plan.runs {
            let mut samples = Vec::with_capacity(plan.navigations);
            for _ in 0..plan.navigations {
                samples.push(load(client, url.as_str(), target).await?);
            }
            if run >= usize::from(plan.warmup) {
                runs.push(Percentiles::of(&samples).context("no navigation was timed")?);
            }
        }
        measured.push((target.clone(), runs));
    }
    Ok(measured)
}

/// One navigation to `url`; its DOMContentLoaded time.
async fn load(client: &Client, url: &str, target: &Target) -> anyhow::Result<Duration> {
    client.goto(url).await?;
    let timing = client.execute(TIMING, Vec::new()).await?;
    let dcl = timing[0].as_f64().context("no Navigation Timing entry")?;
    let rows = timing[1].as_u64().unwrap_or_default() as usize;
    ensure!(
        Some(rows) == target.rows,
        "Chromium showed {rows} workspaces on {}, not {:?} (not signed in?)",
        target.path,
        target.rows
    );
    ensure!(
        dcl > 0.0,
        "DOMContentLoaded had not fired on {}",
        target.path
    );
    Ok(Duration::from_secs_f64(dcl / 1e3))
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}
