//! Issue 14: the dashboard on 10,000 workspaces, on its own server and cluster.
//!
//! One workspace is created through the API from the echo build template (a resource, an agent,
//! an app; one echo daemon builds it) and cloned into the rest (`seed`), then `ANALYZE`d as a
//! deployment that has run a while would be. Measured, in this order:
//!
//! - server side: `GET /workspaces?filter=&page=1` and the last page (400 of 400; `filter=` is
//!   the "All workspaces" preset, what an owner sees) and the API-created workspace's page,
//!   sequential requests with the owner's session cookie, send → last byte over loopback; the
//!   HTML's size (uncompressed: the bench asks for no encoding) and its rows are checked;
//! - in headless Chromium (`browser`): DOMContentLoaded of the same list pages from Navigation
//!   Timing, read through WebDriver after each navigation, assets cached from a first load;
//! - the live socket (`live`): a build created through the API → the workspace's re-rendered
//!   status fragment, and its first log line, on an open `/-/live` socket;
//! - idle live sockets: coderd's RSS before and after opening them, each on its own workspace's
//!   page, after each has received its first fragment.

mod browser;
mod live;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use reqwest::header::{COOKIE, HeaderValue};

use crate::deploy::{Deployment, build_template};
use crate::procs::{Cluster, Memory};
use crate::seed::{self, Jobs, Source};
use crate::stats::Percentiles;

pub use browser::Browser;
pub use live::LiveRun;

/// Workspaces a list page shows (the dashboard's page size).
pub const PAGE_SIZE: usize = 25;
/// The deepest page the goal names.
const DEEP_PAGE: usize = 400;

/// How much to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workspaces: usize,
    /// Sequential requests per page and run (server side).
    pub requests: usize,
    /// Browser navigations per list page and run.
    pub navigations: usize,
    /// Builds timed on the open live socket per run.
    pub builds: usize,
    /// Idle live sockets held for coderd's memory.
    pub sockets: usize,
    pub runs: usize,
    pub warmup: bool,
    pub timeout: Duration,
}

/// A page the scenario times.
#[derive(Debug, Clone)]
pub struct Target {
    pub label: String,
    pub path: String,
    /// Workspace rows the page must hold (list pages), or none (the workspace page).
    pub rows: Option<usize>,
}

/// One run of sequential requests to one page.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub latency: Percentiles,
    pub bytes: usize,
}

/// coderd's memory around opening the idle sockets.
#[derive(Debug, Clone, Copy)]
pub struct IdleSockets {
    pub count: usize,
    pub before: Memory,
    pub after: Memory,
    /// From the first handshake to the last socket's first fragment.
    pub opened_in: Duration,
}

pub struct DashboardRun {
    pub workspaces: usize,
    /// Per target (page 1, the deep page, the workspace page), one entry per measured run.
    pub served: Vec<(Target, Vec<Served>)>,
    /// Per list page, DOMContentLoaded percentiles per measured run; or why the browser was
    /// not run.
    pub browser: Result<Vec<(Target, Vec<Percentiles>)>, String>,
    pub live: LiveRun,
    pub idle: IdleSockets,
}

pub async fn run(
    coder_bin: &Path,
    work: &Path,
    plan: &Plan,
    progress: &dyn Fn(&str),
) -> anyhow::Result<DashboardRun> {
    // Each idle socket is a descriptor here and one in `coder server`, which inherits the limit.
    crate::procs::raise_nofile(4096 + 2 * plan.sockets as u64)?;
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        let mut deploy =
            Deployment::start(coder_bin, &cluster, &work.join("server"), plan.timeout).await?;
        let result = measure(&mut deploy, coder_bin, work, plan, progress).await;
        deploy.stop().await?;
        result
    }
    .await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    Ok(run)
}

async fn measure(
    deploy: &mut Deployment,
    coder_bin: &Path,
    work: &Path,
    plan: &Plan,
    progress: &dyn Fn(&str),
) -> anyhow::Result<DashboardRun> {
    deploy.start_daemons(coder_bin, 1).await?;
    let (_, template) = deploy
        .template("bench-dashboard", &build_template()?, &[], true)
        .await?;
    let template = template.context("the dashboard template was not created")?;
    let first = deploy
        .workspaces(template.id, "dash-live", 1)
        .await?
        .pop()
        .context("the API-created workspace")?;
    progress(&format!(
        "dashboard: seeding {} workspaces",
        plan.workspaces
    ));
    let source = Source::of(&deploy.pool, first.id).await?;
    seed::workspaces(
        &deploy.pool,
        source,
        plan.workspaces.saturating_sub(1),
        "ws-",
        Jobs::Completed,
    )
    .await?;
    sqlx::query("ANALYZE").execute(&deploy.pool).await?;
    let total = seed::workspace_count(&deploy.pool).await? as usize;
    ensure!(
        total == plan.workspaces,
        "{total} workspaces, expected {}",
        plan.workspaces
    );

    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let deep = pages.min(DEEP_PAGE);
    let list = |page: usize| Target {
        label: format!("/workspaces page {page} of {pages}"),
        path: format!("/workspaces?filter=&page={page}"),
        rows: Some(PAGE_SIZE.min(total - (page - 1) * PAGE_SIZE)),
    };
    let targets = vec![
        list(1),
        list(deep),
        Target {
            label: "workspace page".into(),
            path: format!("/@{}/{}", first.owner_name, first.name),
            rows: None,
        },
    ];
    let cookie = HeaderValue::from_str(&format!(
        "{}={}",
        codersdk::client::SESSION_TOKEN_COOKIE,
        deploy.token
    ))?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(plan.timeout)
        .build()?;
    let mut served = Vec::new();
    for target in &targets {
        progress(&format!("dashboard: serving {}", target.label));
        let mut runs = Vec::new();
        for run in 0..usize::from(plan.warmup) + plan.runs {
            let timed = serve(&http, deploy, &cookie, target, plan.requests).await?;
            if run >= usize::from(plan.warmup) {
                runs.push(timed);
            }
        }
        served.push((target.clone(), runs));
    }

    progress("dashboard: DOMContentLoaded in headless Chromium");
    let list_pages = &targets[..2];
    let browser = match Browser::find() {
        Err(why) => Err(why),
        Ok(found) => Ok(found
            .measure(&work.join("chromium"), deploy, list_pages, plan)
            .await
            .context("timing the pages in Chromium")?),
    };

    progress("dashboard: build events on an open live socket");
    let live = live::builds(deploy, first.id, plan).await?;

    progress(&format!("dashboard: {} idle live sockets", plan.sockets));
    let idle = live::idle(deploy, plan).await?;
    Ok(DashboardRun {
        workspaces: total,
        served,
        browser,
        live,
        idle,
    })
}

/// `requests` sequential GETs of `target` with the session cookie, each timed from sending to
/// the last byte.
async fn serve(
    http: &reqwest::Client,
    deploy: &Deployment,
    cookie: &HeaderValue,
    target: &Target,
    requests: usize,
) -> anyhow::Result<Served> {
    let url = deploy.server.url.join(&target.path)?;
    let mut samples = Vec::with_capacity(requests);
    let mut bytes = 0;
    for _ in 0..requests {
        let started = Instant::now();
        let resp = http
            .get(url.clone())
            .header(COOKIE, cookie.clone())
            .send()
            .await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        samples.push(started.elapsed());
        ensure!(status.is_success(), "GET {}: {status}", target.path);
        bytes = body.len();
        check_page(target, &String::from_utf8_lossy(&body))?;
    }
    Ok(Served {
        latency: Percentiles::of(&samples).context("no request was timed")?,
        bytes,
    })
}

/// A page that is not what the goal is about (a login form, an empty list) must not be timed.
fn check_page(target: &Target, html: &str) -> anyhow::Result<()> {
    match target.rows {
        Some(rows) => {
            let shown = html.matches("<tr data-live-workspace=").count();
            ensure!(
                shown == rows,
                "{} showed {shown} workspaces, not {rows}",
                target.path
            );
        }
        None => ensure!(
            html.contains("id=\"ws-live\""),
            "{} is not a workspace's page",
            target.path
        ),
    }
    Ok(())
}
