//! The workspace-app proxy (issue 13). A fresh `coder server` on its own cluster, one echo
//! daemon, and one workspace whose agent is a real `coder agent` process on this machine, with
//! a path app (`coder_app` with a `url`) pointing at a small HTTP/1.1 server this process runs
//! on loopback — the agent's loopback, since the agent runs here too. A request to
//! `/@bench/<ws>/apps/bench/…` therefore takes the real path: coderd's front door, its signed
//! app token, the proxy's pooled HTTP/1.1 connection over a relay stream, the agent, and the
//! server. Side by side in the same run, interleaved run by run, the same client against the
//! same server reached directly:
//!
//! - small GETs one after another on one keep-alive connection: p50/p99 per request;
//! - small GETs from N keep-alive connections in closed loops for a window: requests/s, with
//!   the CPU coderd and the agent spent on them;
//! - one large download (`GET /bytes/<n>`): MB/s.
//!
//! The client behaves as a browser would: it sends its session token and keeps the signed app
//! token cookie coderd sets, so the hot path is the cookie's (no database work), and a refreshed
//! cookie is picked up when the old one expires.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nix::unistd::Pid;
use provisionerd::engines::echo::EchoTemplate;
use reqwest::header::{COOKIE, SET_COOKIE};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

use crate::deploy::Deployment;
use crate::procs::{Cluster, cpu_time};
use crate::stats::Percentiles;

/// coderd's signed app token cookie (`coderd_relay::apps::token::TOKEN_COOKIE`, private to coderd):
/// what a browser keeps between app requests so that coderd skips the database.
const APP_TOKEN_COOKIE: &str = "coder_signed_app_token";
/// The app's slug in the bench template.
const SLUG: &str = "bench";
/// The small response's body: the request, not the payload, is what is measured.
const SMALL_BODY: &[u8] = b"ok";

/// How much of each measurement to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Bytes of the large download.
    pub bytes: u64,
    /// Sequential small GETs per path and run (latency).
    pub requests: usize,
    /// Concurrent keep-alive connections per path for requests/s, and the window per run.
    pub connections: usize,
    pub window: Duration,
    /// Measured runs (after one unrecorded when `warmup`).
    pub runs: usize,
    pub warmup: bool,
    pub timeout: Duration,
}

/// One run's figures through one path.
#[derive(Debug, Clone, Copy)]
pub struct PathRun {
    pub latency: Percentiles,
    pub per_second: f64,
    /// MB/s (10^6 bytes).
    pub download: f64,
}

/// CPU spent on the proxied requests/s window, in CPU-microseconds per request.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    pub coderd_us: f64,
    pub agent_us: f64,
    /// This process: the client and the workspace-side server both.
    pub bench_us: f64,
}

pub struct AppsRun {
    pub direct: Vec<PathRun>,
    pub proxied: Vec<PathRun>,
    /// Per measured run, during the proxied requests/s window.
    pub cpu: Vec<Cpu>,
    /// Per measured run, during the proxied download: vCPU (CPU seconds per second).
    pub download_cpu: Vec<(f64, f64)>,
    /// Requests that failed (anything but a complete 200), over all runs and both paths.
    pub errors: usize,
    pub first_error: Option<String>,
    /// Small GETs measured (latency and requests/s), both paths.
    pub requests: usize,
}

/// Progress on the caller's terms.
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

pub async fn run(
    coder_bin: &Path,
    work: &Path,
    plan: &Plan,
    progress: Progress<'_>,
) -> anyhow::Result<AppsRun> {
    // The agent runs in its own home directory, where a relative `--coder-bin` would not
    // resolve.
    let coder_bin = &std::fs::canonicalize(coder_bin)
        .with_context(|| format!("locating {}", coder_bin.display()))?;
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = measure(coder_bin, &cluster, work, plan, progress).await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    Ok(run)
}

/// A workspace with one agent and one path app on `port` of its loopback (no health check, so
/// the app is never held back as unhealthy).
fn template(token: &str, port: u16) -> anyhow::Result<EchoTemplate> {
    Ok(serde_json::from_value(serde_json::json!({
        "start": {
            "resources": [{
                "name": "dev", "type": "bench_instance",
                "agents": [{
                    "name": "main", "operating_system": "linux", "architecture": "amd64",
                    "auth": {"token": token},
                    "apps": [{
                        "slug": SLUG, "display_name": "Bench app",
                        "url": format!("http://127.0.0.1:{port}")
                    }]
                }]
            }]
        },
        "stop": {"resources": [{"name": "dev", "type": "bench_instance"}]}
    }))?)
}

async fn measure(
    coder_bin: &Path,
    cluster: &Cluster,
    work: &Path,
    plan: &Plan,
    progress: Progress<'_>,
) -> anyhow::Result<AppsRun> {
    let mut deploy =
        Deployment::start(coder_bin, cluster, &work.join("server"), plan.timeout).await?;
    deploy.start_daemons(coder_bin, 1).await?;
    let result = with_deployment(&deploy, coder_bin, work, plan, progress).await;
    deploy.stop().await?;
    result
}

async fn with_deployment(
    deploy: &Deployment,
    coder_bin: &Path,
    work: &Path,
    plan: &Plan,
    progress: Progress<'_>,
) -> anyhow::Result<AppsRun> {
    progress("apps: a workspace with a real coder agent and a path app on a loopback server");
    let (port, _server) = serve().await?;
    let token = Uuid::new_v4().to_string();
    let started = super::agent_workspace::start(
        deploy,
        coder_bin,
        work,
        "apps",
        &template(&token, port)?,
        &token,
        plan.timeout,
    )
    .await?;
    let (ws, agent_pid) = (
        &started.workspace,
        Pid::from_raw(i32::try_from(started.process.0.id())?),
    );

    let base = deploy.server.url.as_str().trim_end_matches('/');
    let proxied = Target {
        base: format!("{base}/@bench/{}/apps/{SLUG}", ws.name),
        session: Some(Arc::new(Session {
            token: deploy.token.clone(),
            cookie: RwLock::new(None),
        })),
    };
    let direct = Target {
        base: format!("http://127.0.0.1:{port}"),
        session: None,
    };
    // The first proxied request authorises against the database and sets the app token; check
    // it answers at all before timing anything.
    small(&client(1, plan.timeout)?, &proxied)
        .await
        .context("the first request through the app proxy")?;

    let mut out = AppsRun {
        direct: Vec::new(),
        proxied: Vec::new(),
        cpu: Vec::new(),
        download_cpu: Vec::new(),
        errors: 0,
        first_error: None,
        requests: 0,
    };
    let total = plan.runs + usize::from(plan.warmup);
    for run in 0..total {
        let recorded = run >= usize::from(plan.warmup);
        let label = if recorded { "run" } else { "warm-up" };
        progress(&format!(
            "apps {label} {}/{total}: {} sequential GETs, {} connections for {:?}, {} MiB \
             download; direct, then through coderd",
            run + 1,
            plan.requests,
            plan.connections,
            plan.window,
            plan.bytes >> 20
        ));
        let d_latency = latency(&direct, plan).await?;
        let p_latency = latency(&proxied, plan).await?;

        let d_load = load(&direct, plan).await?;
        let (cpu_coderd, cpu_agent, cpu_bench) = (
            deploy.server.cpu()?,
            cpu_time(agent_pid)?,
            cpu_time(Pid::this())?,
        );
        let p_load = load(&proxied, plan).await?;
        let per_request = |before: Duration, after: Duration| {
            (after.saturating_sub(before)).as_secs_f64() * 1e6 / p_load.ok.max(1) as f64
        };
        let cpu = Cpu {
            coderd_us: per_request(cpu_coderd, deploy.server.cpu()?),
            agent_us: per_request(cpu_agent, cpu_time(agent_pid)?),
            bench_us: per_request(cpu_bench, cpu_time(Pid::this())?),
        };

        let d_download = download(&direct, plan).await?;
        let (cpu_coderd, cpu_agent) = (deploy.server.cpu()?, cpu_time(agent_pid)?);
        let started = Instant::now();
        let p_download = download(&proxied, plan).await?;
        let elapsed = started.elapsed().as_secs_f64();
        let download_cpu = (
            (deploy.server.cpu()?.saturating_sub(cpu_coderd)).as_secs_f64() / elapsed,
            (cpu_time(agent_pid)?.saturating_sub(cpu_agent)).as_secs_f64() / elapsed,
        );

        for load in [&d_load, &p_load] {
            out.errors += load.errors;
            if out.first_error.is_none() {
                out.first_error.clone_from(&load.first_error);
            }
        }
        if recorded {
            out.requests += 2 * plan.requests + d_load.ok + p_load.ok;
            out.direct.push(PathRun {
                latency: d_latency,
                per_second: d_load.per_second,
                download: d_download,
            });
            out.proxied.push(PathRun {
                latency: p_latency,
                per_second: p_load.per_second,
                download: p_download,
            });
            out.cpu.push(cpu);
            out.download_cpu.push(download_cpu);
        }
    }
    drop(started);
    Ok(out)
}

/// Where requests go: the server directly, or the path app through coderd.
struct Target {
    /// The URL that `/small` and `/bytes/<n>` are appended to.
    base: String,
    /// Through coderd: the owner's session, and the app token cookie coderd set last.
    session: Option<Arc<Session>>,
}

struct Session {
    token: String,
    cookie: RwLock<Option<String>>,
}

impl Target {
    fn get(&self, client: &reqwest::Client, path: &str) -> reqwest::RequestBuilder {
        let mut request = client.get(format!("{}{path}", self.base));
        if let Some(session) = &self.session {
            request = request.header(codersdk::client::SESSION_TOKEN_HEADER, &session.token);
            // A poisoned lock only means another request panicked mid-update; the value is
            // still a whole string (or none), so use it.
            let cookie = session
                .cookie
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(cookie) = cookie {
                request = request.header(COOKIE, format!("{APP_TOKEN_COOKIE}={cookie}"));
            }
        }
        request
    }

    /// Keeps a newly set app token, as a browser's cookie jar would.
    fn remember(&self, response: &reqwest::Response) {
        let Some(session) = &self.session else {
            return;
        };
        let prefix = format!("{APP_TOKEN_COOKIE}=");
        for value in response.headers().get_all(SET_COOKIE) {
            let Ok(value) = value.to_str() else { continue };
            if let Some(rest) = value.strip_prefix(&prefix) {
                let token = rest.split(';').next().unwrap_or_default().to_string();
                *session.cookie.write().unwrap_or_else(|e| e.into_inner()) = Some(token);
            }
        }
    }
}

/// A keep-alive client that keeps up to `connections` idle connections, so a closed loop of
/// that many tasks reuses its connections instead of opening new ones.
fn client(connections: usize, timeout: Duration) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(connections)
        .pool_idle_timeout(None)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()?)
}

/// One small GET, whole body read: how long it took.
async fn small(client: &reqwest::Client, target: &Target) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let response = target.get(client, "/small").send().await?;
    target.remember(&response);
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    if status != reqwest::StatusCode::OK || body.as_ref() != SMALL_BODY {
        bail!(
            "GET {}/small answered {status}: {}",
            target.base,
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    Ok(elapsed)
}

/// Sequential small GETs on one keep-alive connection (after a few unrecorded to open it).
async fn latency(target: &Target, plan: &Plan) -> anyhow::Result<Percentiles> {
    let client = client(1, plan.timeout)?;
    for _ in 0..10 {
        small(&client, target).await?;
    }
    let mut samples = Vec::with_capacity(plan.requests);
    for _ in 0..plan.requests {
        samples.push(small(&client, target).await?);
    }
    Percentiles::of(&samples).context("no small GET was measured")
}

struct Load {
    per_second: f64,
    ok: usize,
    errors: usize,
    first_error: Option<String>,
}

/// `plan.connections` closed loops of small GETs for `plan.window`: completed requests/s.
async fn load(target: &Target, plan: &Plan) -> anyhow::Result<Load> {
    let client = client(plan.connections, plan.timeout)?;
    // Open every connection before the window, so it measures requests, not connects.
    let opened =
        futures::future::join_all((0..plan.connections).map(|_| small(&client, target))).await;
    for result in opened {
        result?;
    }
    let target = Arc::new(Target {
        base: target.base.clone(),
        session: target.session.clone(),
    });
    let started = Instant::now();
    let end = started + plan.window;
    let tasks: Vec<_> = (0..plan.connections)
        .map(|_| {
            let (client, target) = (client.clone(), target.clone());
            tokio::spawn(async move {
                let (mut ok, mut errors, mut first_error) = (0usize, 0usize, None);
                while Instant::now() < end {
                    match small(&client, &target).await {
                        Ok(_) => ok += 1,
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| format!("{e:#}"));
                        }
                    }
                }
                (ok, errors, first_error)
            })
        })
        .collect();
    let mut out = Load {
        per_second: 0.0,
        ok: 0,
        errors: 0,
        first_error: None,
    };
    for task in tasks {
        let (ok, errors, first_error) = task.await?;
        out.ok += ok;
        out.errors += errors;
        if out.first_error.is_none() {
            out.first_error = first_error;
        }
    }
    // The last requests end after the window; count the time they took.
    out.per_second = out.ok as f64 / started.elapsed().as_secs_f64();
    Ok(out)
}

/// `GET /bytes/<n>`, the body read as it streams and counted: MB/s.
async fn download(target: &Target, plan: &Plan) -> anyhow::Result<f64> {
    // A whole transfer must fit; the plan's timeout is for single waits.
    let client = client(1, plan.timeout.max(Duration::from_secs(600)))?;
    small(&client, target).await?;
    let started = Instant::now();
    let mut response = target
        .get(&client, &format!("/bytes/{}", plan.bytes))
        .send()
        .await?;
    target.remember(&response);
    ensure!(
        response.status() == reqwest::StatusCode::OK,
        "GET {}/bytes answered {}",
        target.base,
        response.status()
    );
    let mut got = 0u64;
    while let Some(chunk) = response.chunk().await? {
        got += chunk.len() as u64;
    }
    let elapsed = started.elapsed();
    ensure!(
        got == plan.bytes,
        "the download through {} got {got} bytes of {}",
        target.base,
        plan.bytes
    );
    Ok(plan.bytes as f64 / elapsed.as_secs_f64() / 1e6)
}

/// Stops a task when dropped.
struct Aborted(tokio::task::JoinHandle<()>);

impl Drop for Aborted {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The workspace-side app: a minimal HTTP/1.1 keep-alive server on loopback, written here
/// rather than with hyper so the bench adds no dependency and the server's own cost stays
/// tiny and the same for both paths. `GET …/small` answers 2 bytes; `GET …/bytes/<n>` answers
/// n incompressible bytes with a Content-Length. It listens until the guard is dropped.
async fn serve() -> anyhow::Result<(u16, Aborted)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let block: Arc<[u8]> = crate::scenarios::relay::block().into();
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let block = block.clone();
            tokio::spawn(async move {
                // A connection's error (a client gone) ends that connection only.
                let _ = connection(socket, &block).await;
            });
        }
    });
    Ok((port, Aborted(task)))
}

/// Longest request head line accepted; the proxy's heads are well under it.
const MAX_LINE: u64 = 16 << 10;
/// Most header lines accepted in one request head.
const MAX_HEADERS: usize = 100;

async fn connection(socket: TcpStream, block: &[u8]) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let (read, mut write) = socket.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    loop {
        line.clear();
        if (&mut read).take(MAX_LINE).read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
        );
        let mut body = 0u64;
        let mut close = false;
        let mut headers = 0;
        loop {
            line.clear();
            if (&mut read).take(MAX_LINE).read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            headers += 1;
            ensure!(headers <= MAX_HEADERS, "too many request headers");
            let Some((name, value)) = header.split_once(':') else {
                bail!("malformed header line");
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                body = value.parse()?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                // Only GETs are sent here; a chunked body is not worth parsing.
                bail!("chunked request bodies are not supported");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        tokio::io::copy(&mut (&mut read).take(body), &mut tokio::io::sink()).await?;
        let path = target.split('?').next().unwrap_or_default();
        let mut segments = path.rsplit('/');
        let last = segments.next().unwrap_or_default();
        let before = segments.next().unwrap_or_default();
        if method == "GET" && last == "small" {
            let mut response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                SMALL_BODY.len()
            )
            .into_bytes();
            response.extend_from_slice(SMALL_BODY);
            write.write_all(&response).await?;
        } else if method == "GET"
            && before == "bytes"
            && let Ok(n) = last.parse::<u64>()
        {
            write
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                         content-length: {n}\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await?;
            let mut left = n;
            while left > 0 {
                let chunk = left.min(block.len() as u64) as usize;
                write.write_all(&block[..chunk]).await?;
                left -= chunk as u64;
            }
        } else {
            write
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await?;
        }
        if close {
            return Ok(());
        }
    }
}
