//! Reaching into a workspace end to end: the `local-process` template with real terraform, the
//! real agent, coderd's relay, and the CLI (`coder port-forward`, `coder ping`), with real
//! servers inside the workspace.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use codersdk::workspaces::Workspace;
use testutil::eventually;
use uuid::Uuid;

use crate::agent::local_process;
use crate::harness::{Deployment, free_port};
use crate::terraform::Reaper;

/// How long a workspace's agent may take to download `coder`, connect and run its scripts.
const AGENT_START: Duration = Duration::from_secs(60);

/// Kills a child the test started, however the test ends.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `local-process` workspace named `name` with a ready agent; the reaper stops its
/// process when the test ends.
pub(crate) async fn running_workspace(
    d: &Deployment,
    workspaces: &std::path::Path,
    name: &str,
) -> anyhow::Result<(Workspace, Uuid, Reaper)> {
    d.ok(&["create", name, "-t", "local-process", "--yes"])?;
    let ws = d.workspace(name).await?;
    let reaper = Reaper(
        workspaces
            .join(ws.id.to_string())
            .join(".coder-workspace.pid"),
    );
    let agent = ws
        .latest_build
        .resources
        .iter()
        .flat_map(|r| r.agents.iter())
        .next()
        .context("an agent")?
        .id;
    eventually(AGENT_START, "the agent connected and ready", || async {
        let a = d.owner.workspace_agent(agent).await?;
        Ok(a.status == "connected" && a.lifecycle_state == "ready")
    })
    .await?;
    Ok((d.workspace(name).await?, agent, reaper))
}

/// A process inside the workspace's host: a Python one-liner serving HTTP or echoing UDP.
fn python(script: &str, port: u16) -> anyhow::Result<Killed> {
    let child = Command::new("python3")
        .args(["-c", script, &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("python3 (installed by scripts/setup.sh --tests)")?;
    Ok(Killed(child))
}

const HTTP_SERVER: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the workspace"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

const UDP_ECHO: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(b"echo:" + data, peer)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn port_forward_and_ping_reach_servers_inside_the_workspace() -> anyhow::Result<()> {
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (_, agent, _reaper) = running_workspace(&d, &workspaces, "dev").await?;

    let (http_port, udp_port) = (free_port()?, free_port()?);
    let _http = python(HTTP_SERVER, http_port)?;
    let _udp = python(UDP_ECHO, udp_port)?;
    let (local_tcp, local_udp) = (free_port()?, free_port()?);
    let log = std::fs::File::create(d.dir.path().join("port-forward.log"))?;
    let _forward = Killed(
        d.coder(&d.token)
            .args([
                "port-forward",
                "dev",
                "--tcp",
                &format!("{local_tcp}:{http_port}"),
                "--udp",
                &format!("127.0.0.1:{local_udp}:{udp_port}"),
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?,
    );

    // The listening ports the agent sees include the HTTP server.
    eventually(
        Duration::from_secs(20),
        "the HTTP server listed",
        || async {
            let ports = d.owner.listening_ports(agent).await?;
            Ok(ports.ports.iter().any(|p| p.port == http_port))
        },
    )
    .await?;

    // HTTP through the forward: a fresh relay stream per connection.
    let url = format!("http://127.0.0.1:{local_tcp}/");
    eventually(
        Duration::from_secs(20),
        "HTTP through the forward",
        || async { Ok(reqwest::get(&url).await.is_ok()) },
    )
    .await?;
    for _ in 0..3 {
        let body = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()?
            .get(&url)
            .send()
            .await?
            .text()
            .await?;
        assert_eq!(body, "hello from the workspace");
    }

    // UDP datagrams both ways.
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut answered = false;
    for attempt in 0..10 {
        socket.send_to(
            format!("ping {attempt}").as_bytes(),
            ("127.0.0.1", local_udp),
        )?;
        let mut buf = [0u8; 100];
        if let Ok((n, _)) = socket.recv_from(&mut buf) {
            assert!(
                std::str::from_utf8(&buf[..n])?.starts_with("echo:ping "),
                "{:?}",
                &buf[..n]
            );
            answered = true;
            break;
        }
    }
    let forward_log = std::fs::read_to_string(d.dir.path().join("port-forward.log"))?;
    assert!(answered, "no UDP echo; port-forward said:\n{forward_log}");
    assert!(
        forward_log.contains(&format!("Forwarding 127.0.0.1:{local_tcp} (tcp)")),
        "{forward_log}"
    );

    // A port nobody listens on: the agent's reason reaches the client.
    let closed = free_port()?;
    let err = d
        .owner
        .connect_agent(agent, codersdk::relay::Target::Tcp(closed))
        .await
        .err()
        .context("a closed port refuses")?;
    assert_eq!(err.status(), Some(502), "{err}");

    // coder ping: round trips, hop by hop.
    let out = d.ok(&["ping", "dev", "-n", "3"])?;
    assert_eq!(out.matches("pong from dev in ").count(), 3, "{out}");
    assert!(out.contains("coderd ↔ agent"), "{out}");
    assert!(out.contains("3 round trips: min "), "{out}");
    Ok(())
}

/// A tool the tests drive (installed by `scripts/setup.sh --tests`); missing, the test fails.
pub(crate) fn tool(name: &str) -> anyhow::Result<()> {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()));
    anyhow::ensure!(
        found,
        "`{name}` is not on PATH; run scripts/setup.sh --tests (it installs openssh-client, tmux \
         and python3)"
    );
    Ok(())
}

/// `ssh`/`scp`/`sftp` with the config `coder config-ssh` wrote into `home`.
pub(crate) fn openssh(program: &str, home: &std::path::Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("HOME", home)
        .arg("-F")
        .arg(home.join(".ssh/config"))
        .stdin(Stdio::null());
    cmd
}

pub(crate) fn output(cmd: &mut Command) -> anyhow::Result<(i32, String, String)> {
    let out = cmd.output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Reads a reconnecting PTY's output until it holds `wanted`.
async fn pty_shows(
    pty: &mut codersdk::relay::PtyConnection,
    wanted: &str,
) -> anyhow::Result<String> {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains(wanted) {
        let piece = tokio::time::timeout_at(deadline, pty.recv())
            .await
            .with_context(|| format!("the terminal never showed {wanted:?}: {seen:?}"))?
            .with_context(|| format!("the terminal ended before {wanted:?}: {seen:?}"))??;
        seen.push_str(&String::from_utf8_lossy(&piece));
    }
    Ok(seen)
}

/// The web terminal's backend through the real coderd and agent: a terminal whose client goes
/// away keeps running, and re-attaching with the same id replays what it printed meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_reconnecting_pty_replays_what_it_printed_while_detached() -> anyhow::Result<()> {
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (_, agent, _reaper) = running_workspace(&d, &workspaces, "dev").await?;
    let id = Uuid::new_v4();
    let input = |data: &str| codersdk::agentsdk::PtyInput {
        data: data.into(),
        height: 0,
        width: 0,
    };

    let mut first = d.owner.agent_pty(agent, id, 100, 30, "").await?;
    first.send(&input("echo attached-$((20+1))\r")).await?;
    pty_shows(&mut first, "attached-21").await?;
    // Printed only after the client has gone.
    first
        .send(&input("sleep 2; echo meanwhile-$((6*7))\r"))
        .await?;
    drop(first);
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut again = d.owner.agent_pty(agent, id, 100, 30, "").await?;
    let replayed = pty_shows(&mut again, "meanwhile-42").await?;
    assert!(replayed.contains("attached-21"), "{replayed:?}");
    // The same shell, still live.
    again.send(&input("echo live-$((3*3))\r")).await?;
    pty_shows(&mut again, "live-9").await?;

    // Another id is another terminal, with nothing to replay.
    let mut other = d
        .owner
        .agent_pty(agent, Uuid::new_v4(), 100, 30, "")
        .await?;
    other.send(&input("echo fresh-$((1+1))\r")).await?;
    let fresh = pty_shows(&mut other, "fresh-2").await?;
    assert!(!fresh.contains("meanwhile-42"), "{fresh:?}");
    Ok(())
}
