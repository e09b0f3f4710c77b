//! The relay (issue 12: P9, P10 and their companions). A fresh `coder server` on its own
//! cluster, one echo daemon, and one workspace whose agent is a real `coder agent` process on
//! this machine. Then, side by side in the same run, the relay against direct baselines:
//!
//! - P10: bulk TCP through `coder port-forward` (and through a bare relay stream, without the
//!   CLI's hop) against loopback TCP, into a counting sink;
//! - P9 and the rest, in [`ssh`]: bulk SSH through `coder ssh` and OpenSSH-via-`config-ssh`
//!   against OpenSSH's `sshd` on loopback, connect times, keystroke echo;
//! - coderd's memory per idle stream: RSS before and after holding many ping streams open.

pub mod ssh;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::ensure;
use codersdk::relay::Target;
use provisionerd::engines::echo::EchoTemplate;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

use crate::deploy::Deployment;
use crate::procs::Cluster;
use ssh::{Killed, coder};

/// A figure per run, or why there is none.
pub type Figures = Result<Vec<f64>, String>;

/// How much of each measurement to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Bytes per bulk transfer.
    pub bytes: u64,
    /// Measured transfers per path (after one unrecorded when `warmup`).
    pub runs: usize,
    pub warmup: bool,
    /// Timed connections per path (after one unrecorded).
    pub connects: usize,
    /// Timed keystrokes per terminal.
    pub keystrokes: usize,
    /// Idle streams held open for coderd's memory figure.
    pub streams: usize,
    pub timeout: Duration,
}

/// What one run measured: throughputs in MB/s (10^6 bytes), times in ms.
pub struct RelayRun {
    pub direct_tcp: Vec<f64>,
    pub port_forward: Vec<f64>,
    pub relay_stream: Vec<f64>,
    pub ssh: ssh::SshRun,
    pub idle_streams: usize,
    pub rss_before_mib: f64,
    pub rss_after_mib: f64,
}

/// Progress on the caller's terms.
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

pub async fn run(
    coder_bin: &Path,
    work: &Path,
    plan: &Plan,
    progress: Progress<'_>,
) -> anyhow::Result<RelayRun> {
    // Each idle stream is a socket here and one in `coder server` (which inherits the limit).
    let nofile = crate::procs::raise_nofile(4096 + 2 * plan.streams as u64)?;
    ensure!(
        nofile >= plan.streams as u64 + 1024,
        "the open-files limit is {nofile}, too low for {} idle streams (raise `ulimit -n`)",
        plan.streams
    );
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = measure(coder_bin, &cluster, work, plan, progress).await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    Ok(run)
}

fn template(token: &str) -> anyhow::Result<EchoTemplate> {
    Ok(serde_json::from_value(serde_json::json!({
        "start": {
            "resources": [{
                "name": "dev", "type": "bench_instance",
                "agents": [{
                    "name": "main", "operating_system": "linux", "architecture": "amd64",
                    "auth": {"token": token}
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
) -> anyhow::Result<RelayRun> {
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
) -> anyhow::Result<RelayRun> {
    progress("relay: a workspace with a real coder agent");
    let token = Uuid::new_v4().to_string();
    let started = super::agent_workspace::start(
        deploy,
        coder_bin,
        work,
        "relay",
        &template(&token)?,
        &token,
        plan.timeout,
    )
    .await?;
    let (ws, agent) = (&started.workspace, started.agent);
    // What `coder login` leaves: config-ssh's ProxyCommand reads the session from here.
    let cli_config = work.join("cli");
    std::fs::create_dir_all(&cli_config)?;
    std::fs::write(cli_config.join("url"), deploy.server.url.as_str())?;
    std::fs::write(cli_config.join("session"), &deploy.token)?;

    progress("relay P10: TCP into a sink, direct / relay stream / coder port-forward");
    let (direct_tcp, relay_stream, port_forward) =
        tcp(deploy, coder_bin, &cli_config, &ws.name, agent, plan).await?;

    let ssh_plan = ssh::Plan {
        coder_bin: coder_bin.to_path_buf(),
        cli_config: cli_config.clone(),
        dir: work.join("ssh"),
        workspace: ws.name.clone(),
        bytes: plan.bytes,
        runs: plan.runs,
        warmup: plan.warmup,
        connects: plan.connects,
        keystrokes: plan.keystrokes,
    };
    progress("relay P9: SSH transfers, connect times and keystrokes (sshd, coder ssh, config-ssh)");
    let ssh = tokio::task::spawn_blocking(move || ssh::run(&ssh_plan)).await??;

    progress(&format!(
        "relay: coderd's memory with {} idle streams",
        plan.streams
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before_mib = deploy.server.memory()?.rss_mib;
    let mut open = Vec::with_capacity(plan.streams);
    for _ in 0..plan.streams {
        open.push(deploy.owner.connect_agent(agent, Target::Ping).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after_mib = deploy.server.memory()?.rss_mib;
    let idle_streams = open.len();
    drop(open);
    Ok(RelayRun {
        direct_tcp,
        port_forward,
        relay_stream,
        ssh,
        idle_streams,
        rss_before_mib,
        rss_after_mib,
    })
}

/// P10: the same transfer into a sink in the workspace, directly, through a relay stream, and
/// through `coder port-forward`, interleaved run by run.
async fn tcp(
    deploy: &Deployment,
    coder_bin: &Path,
    cli_config: &Path,
    workspace: &str,
    agent: Uuid,
    plan: &Plan,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let (sink_port, _sink) = sink().await?;
    let forward_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let _forward = Killed(
        coder(coder_bin, cli_config)
            .args([
                "port-forward",
                workspace,
                "--tcp",
                &format!("127.0.0.1:{forward_port}:{sink_port}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + plan.timeout;
    while TcpStream::connect(("127.0.0.1", forward_port))
        .await
        .is_err()
    {
        ensure!(
            Instant::now() < deadline,
            "coder port-forward did not listen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut direct, mut relayed, mut forwarded) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..plan.runs + usize::from(plan.warmup) {
        let d = push(
            TcpStream::connect(("127.0.0.1", sink_port)).await?,
            plan.bytes,
        )
        .await?;
        let r = push(
            deploy
                .owner
                .connect_agent(agent, Target::Tcp(sink_port))
                .await?,
            plan.bytes,
        )
        .await?;
        let f = push(
            TcpStream::connect(("127.0.0.1", forward_port)).await?,
            plan.bytes,
        )
        .await?;
        if run >= usize::from(plan.warmup) {
            direct.push(d);
            relayed.push(r);
            forwarded.push(f);
        }
    }
    Ok((direct, relayed, forwarded))
}

/// Stops a task when dropped.
struct Aborted(tokio::task::JoinHandle<()>);

impl Drop for Aborted {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A sink on loopback that counts what each connection sends until its end, then answers the
/// count (8 bytes, big-endian), so a sender knows everything arrived. It listens until the
/// returned guard is dropped.
async fn sink() -> anyhow::Result<(u16, Aborted)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 << 10];
                let mut total = 0u64;
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(n) => total += n as u64,
                        Err(_) => return,
                    }
                }
                let _ = socket.write_all(&total.to_be_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok((port, Aborted(task)))
}

/// 1 MiB of xorshift bytes: incompressible, should any hop compress.
pub fn block() -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends `bytes` through `stream`, half-closes it and waits for the sink's count: MB/s.
async fn push<S>(mut stream: S, bytes: u64) -> anyhow::Result<f64>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let data = block();
    let started = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(data.len() as u64) as usize;
        stream.write_all(&data[..n]).await?;
        left -= n as u64;
    }
    stream.flush().await?;
    stream.shutdown().await?;
    let mut count = [0u8; 8];
    stream.read_exact(&mut count).await?;
    let elapsed = started.elapsed();
    let got = u64::from_be_bytes(count);
    ensure!(got == bytes, "the sink got {got} bytes of {bytes}");
    Ok(bytes as f64 / elapsed.as_secs_f64() / 1e6)
}
