//! The agent's SSH server, driven by the system's OpenSSH client (`ssh`, `scp`, `sftp`,
//! `ssh-agent`) through the fake coderd's streams: commands and exit codes, the environment,
//! terminals and window changes (in tmux), file transfer, forwarding, the host key.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use codersdk::agentsdk::{Manifest, StreamHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::harness::{TOKEN, TestAgent, echo_server, manifest};
use crate::peer::{Bridge, PATIENCE, Peer};

/// An agent, the fake coderd it is connected to, and a bridge for OpenSSH to reach it.
pub struct Workspace {
    pub peer: Peer,
    pub agent: TestAgent,
    pub bridge: Bridge,
    /// The client side's files (known_hosts, keys, downloads).
    pub client: tempfile::TempDir,
}

impl Workspace {
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(manifest(vec![])).await
    }

    pub async fn start_with(manifest: Manifest) -> anyhow::Result<Self> {
        require("ssh")?;
        let peer = Peer::start(TOKEN, manifest).await?;
        let agent = TestAgent::connect(&peer.url)?;
        peer.wait_for("a connected agent", |p| !p.lifecycle().is_empty())
            .await?;
        let bridge = peer.bridge(StreamHeader::Ssh).await?;
        Ok(Self {
            peer,
            agent,
            bridge,
            client: tempfile::tempdir()?,
        })
    }

    /// The options every OpenSSH tool needs to reach the agent (port option aside).
    fn options(&self) -> Vec<String> {
        [
            "-F",
            "/dev/null",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "BatchMode=yes",
            "-o",
            "User=coder",
        ]
        .map(String::from)
        .into()
    }

    /// `ssh <opts> <the options to reach the agent> 127.0.0.1 <command>`: `opts` come first,
    /// so they win (OpenSSH takes the first value of an option).
    pub fn ssh(&self, opts: &[&str], command: &[&str]) -> Command {
        let mut ssh = Command::new("ssh");
        ssh.args(opts)
            .args(self.options())
            .args(["-p", &self.bridge.port.to_string(), "127.0.0.1"])
            .args(command)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        ssh
    }

    /// `ssh <opts> …` as a single shell line, for tmux.
    pub fn ssh_line(&self, opts: &[&str]) -> String {
        let mut words = vec!["ssh".to_string()];
        words.extend(opts.iter().map(|a| a.to_string()));
        words.extend(self.options());
        words.extend([
            "-p".into(),
            self.bridge.port.to_string(),
            "127.0.0.1".into(),
        ]);
        words.join(" ")
    }

    pub fn scp(&self, args: &[&str]) -> Command {
        let mut command = Command::new("scp");
        command
            .args(self.options())
            .args(["-P", &self.bridge.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    pub fn sftp(&self, batch: &Path) -> Command {
        let mut command = Command::new("sftp");
        command
            .args(self.options())
            .args(["-P", &self.bridge.port.to_string(), "-b"])
            .arg(batch)
            .arg("127.0.0.1")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    pub fn home(&self) -> PathBuf {
        self.agent.home()
    }
}

/// Fails when a tool the tests drive is missing: `scripts/setup.sh --tests` installs them.
pub fn require(tool: &str) -> anyhow::Result<()> {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
        .unwrap_or(false);
    anyhow::ensure!(
        found,
        "`{tool}` is not installed; run scripts/setup.sh --tests (it installs openssh-client and tmux)"
    );
    Ok(())
}

/// Runs to completion within the tests' patience.
pub async fn output(mut command: Command) -> anyhow::Result<Output> {
    let output = tokio::time::timeout(PATIENCE, command.output())
        .await
        .with_context(|| format!("{command:?} did not finish"))??;
    Ok(output)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `127.0.0.1:port` answers an echo, through whatever forwards it.
async fn echoes_through(port: u16) -> anyhow::Result<()> {
    tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(mut conn) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                let mut reply = [0u8; 5];
                if conn.write_all(b"hello").await.is_ok()
                    && conn.read_exact(&mut reply).await.is_ok()
                    && &reply == b"hello"
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .with_context(|| format!("nothing echoes on port {port}"))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::test]
async fn commands_run_in_the_users_shell_with_coders_environment_and_exit_codes()
-> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    let out = output(ws.ssh(
        &["-o", "SetEnv=GREETING=hello CODER=overridden"],
        &["echo $CODER $CODER_WORKSPACE_NAME $CODER_WORKSPACE_AGENT_NAME $CODER_WORKSPACE_OWNER_NAME; \
         echo $FROM_TEMPLATE $GREETING; echo \"[$SSH_CONNECTION]\"; pwd; echo oops >&2; exit 3"],
    ))
    .await?;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "true dev main alice");
    assert_eq!(lines[1], "template-from-the-agent hello");
    assert_eq!(lines[2], "[0.0.0.0 0 0.0.0.0 0]");
    assert_eq!(
        std::fs::canonicalize(lines[3])?,
        std::fs::canonicalize(ws.home().join("project"))?
    );
    assert_eq!(text(&out.stderr), "oops\n");

    // Input reaches the command and its end closes it.
    let mut cat = ws.ssh(&[], &["wc -c"]);
    cat.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cat.spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    stdin.write_all(&vec![b'x'; 1_000_000]).await?;
    drop(stdin);
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output()).await??;
    assert_eq!(text(&out.stdout).trim(), "1000000");
    assert!(out.status.success());
    Ok(())
}

/// Input and output at full speed at once: neither direction may wait on the other.
#[tokio::test]
async fn large_transfers_both_ways_at_once_do_not_stall() -> anyhow::Result<()> {
    const SIZE: usize = 8 << 20;
    let ws = Workspace::start().await?;
    let input = ws.client.path().join("in.bin");
    std::fs::write(&input, vec![b'z'; SIZE])?;
    let mut cat = ws.ssh(&[], &["cat"]);
    cat.stdin(std::fs::File::open(&input)?)
        .stdout(Stdio::piped());
    let out = output(cat).await?;
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(out.stdout.len(), SIZE);
    Ok(())
}

#[tokio::test]
async fn a_killed_command_ends_with_its_signal() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    let out = output(ws.ssh(&["-v"], &["kill -TERM $$"])).await?;
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    assert!(
        text(&out.stderr).contains("exit-signal"),
        "{}",
        text(&out.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn sessions_are_counted_by_the_kind_clients_declare() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    let out = output(ws.ssh(
        &["-o", "SetEnv=CODER_SSH_SESSION_TYPE=vscode"],
        &["echo [$CODER_SSH_SESSION_TYPE]"],
    ))
    .await?;
    assert_eq!(
        text(&out.stdout),
        "[]\n",
        "the variable is the agent's, not the command's"
    );
    assert!(output(ws.ssh(&[], &["true"])).await?.status.success());
    ws.peer
        .wait_for("stats with both sessions", |p| {
            let stats = p.stats();
            stats.iter().any(|s| s.session_count_vscode >= 1)
                && stats.iter().any(|s| s.session_count_ssh >= 1)
                && stats
                    .iter()
                    .any(|s| s.connections_by_proto.get("ssh").is_some_and(|n| *n >= 1))
        })
        .await
}

/// A tmux server of the test's own, with one window running `command`.
struct Tmux {
    socket: String,
}

impl Tmux {
    async fn start(command: &str, cols: u16, rows: u16) -> anyhow::Result<Self> {
        require("tmux")?;
        let socket = format!("agent-test-{}", uuid::Uuid::new_v4());
        let tmux = Self { socket };
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            command,
        ])
        .await?;
        Ok(tmux)
    }

    async fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = output({
            let mut c = Command::new("tmux");
            c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
            c
        })
        .await?;
        anyhow::ensure!(out.status.success(), "tmux {args:?}: {out:?}");
        Ok(text(&out.stdout))
    }

    async fn screen(&self) -> anyhow::Result<String> {
        self.run(&["capture-pane", "-p", "-t", "0"]).await
    }

    async fn wait_for(&self, what: &str) -> anyhow::Result<String> {
        let mut screen = String::new();
        let found = tokio::time::timeout(PATIENCE, async {
            loop {
                screen = self.screen().await.unwrap_or_default();
                if screen.contains(what) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        found.with_context(|| format!("{what:?} never showed; the screen:\n{screen}"))?;
        Ok(screen)
    }

    async fn type_line(&self, line: &str) -> anyhow::Result<()> {
        self.run(&["send-keys", "-t", "0", "-l", line]).await?;
        self.run(&["send-keys", "-t", "0", "Enter"]).await?;
        Ok(())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[tokio::test]
async fn interactive_shells_get_a_terminal_the_motd_and_window_changes() -> anyhow::Result<()> {
    let mut manifest = manifest(vec![]);
    let motd_dir = tempfile::tempdir()?;
    let motd = motd_dir.path().join("motd");
    std::fs::write(&motd, "Welcome to the dev workspace\n")?;
    manifest.motd_file = motd.to_string_lossy().into_owned();
    let ws = Workspace::start_with(manifest).await?;

    let tmux = Tmux::start(&ws.ssh_line(&["-tt"]), 80, 24).await?;
    tmux.wait_for("Welcome to the dev workspace").await?;
    // The marker is computed so that the typed line itself never matches.
    tmux.type_line("stty size; [ \"$(tty)\" = \"$SSH_TTY\" ] && echo tty-$((6*7))")
        .await?;
    let screen = tmux.wait_for("tty-42").await?;
    assert!(screen.contains("24 80"), "{screen}");

    tmux.run(&["resize-window", "-t", "0", "-x", "100", "-y", "30"])
        .await?;
    tmux.type_line("stty size").await?;
    tmux.wait_for("30 100").await?;
    tmux.type_line("exit 7").await?;
    Ok(())
}

#[tokio::test]
async fn commands_on_a_terminal_keep_their_exit_code() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    let out = output(ws.ssh(&["-tt"], &["test -t 0 && echo on-a-tty; exit 4"])).await?;
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(text(&out.stdout).contains("on-a-tty"), "{out:?}");
    Ok(())
}

#[tokio::test]
async fn scp_and_sftp_copy_both_ways() -> anyhow::Result<()> {
    require("scp")?;
    require("sftp")?;
    let ws = Workspace::start().await?;
    let local = ws.client.path();
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(local.join("up.bin"), &payload)?;

    // scp over sftp (OpenSSH 9's default), relative to the home directory.
    let up = local.join("up.bin").to_string_lossy().into_owned();
    let out = output(ws.scp(&[&up, "127.0.0.1:sftp-up.bin"])).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(ws.home().join("sftp-up.bin"))?, payload);
    let down = local.join("sftp-down.bin").to_string_lossy().into_owned();
    let out = output(ws.scp(&["127.0.0.1:sftp-up.bin", &down])).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&down)?, payload);

    // The legacy protocol runs `scp` in the workspace.
    let remote = ws.home().join("legacy-up.bin");
    let target = format!("127.0.0.1:{}", remote.display());
    let out = output(ws.scp(&["-O", &up, &target])).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&remote)?, payload);
    let down = local.join("legacy-down.bin").to_string_lossy().into_owned();
    let out = output(ws.scp(&["-O", &target, &down])).await?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&down)?, payload);

    // sftp itself: directories, listing, rename, remove.
    let batch = local.join("batch");
    std::fs::write(
        &batch,
        format!(
            "mkdir box\ncd box\nput {up} a.bin\nrename a.bin b.bin\nls -l\nget b.bin {}\nrm b.bin\ncd ..\nrmdir box\npwd\n",
            local.join("sftp-get.bin").display()
        ),
    )?;
    let out = output(ws.sftp(&batch)).await?;
    assert!(out.status.success(), "{out:?}");
    let listing = text(&out.stdout);
    assert!(listing.contains("b.bin"), "{listing}");
    assert!(
        listing.contains(&ws.home().to_string_lossy().into_owned()),
        "{listing}"
    );
    assert_eq!(std::fs::read(local.join("sftp-get.bin"))?, payload);
    assert!(!ws.home().join("box").exists());
    Ok(())
}

#[tokio::test]
async fn local_and_remote_forwarding_reach_through_the_session() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    // ssh -L: a port on the client reaches a service in the workspace.
    let service = echo_server().await?;
    let local = free_port()?;
    let _forward = ws
        .ssh(&["-N", "-L", &format!("{local}:127.0.0.1:{service}")], &[])
        .spawn()?;
    echoes_through(local).await?;

    // ssh -R: a port in the workspace reaches a service on the client's side.
    let client_service = echo_server().await?;
    let remote = free_port()?;
    let _reverse = ws
        .ssh(
            &["-N", "-R", &format!("{remote}:127.0.0.1:{client_service}")],
            &[],
        )
        .spawn()?;
    echoes_through(remote).await?;
    Ok(())
}

#[tokio::test]
async fn agent_forwarding_exports_the_clients_agent() -> anyhow::Result<()> {
    for tool in ["ssh-agent", "ssh-add", "ssh-keygen"] {
        require(tool)?;
    }
    let ws = Workspace::start().await?;
    let dir = ws.client.path();
    let socket = dir.join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&socket)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let key = dir.join("id_ed25519");
    let keygen = output({
        let mut c = Command::new("ssh-keygen");
        c.args(["-q", "-t", "ed25519", "-N", "", "-C", "forwarded-key", "-f"])
            .arg(&key);
        c
    })
    .await?;
    assert!(keygen.status.success(), "{keygen:?}");
    tokio::time::timeout(PATIENCE, async {
        while !socket.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    let added = output({
        let mut c = Command::new("ssh-add");
        c.arg(&key).env("SSH_AUTH_SOCK", &socket);
        c
    })
    .await?;
    assert!(added.status.success(), "{added:?}");

    let mut ssh = ws.ssh(&["-A"], &["echo $SSH_AUTH_SOCK; ssh-add -l"]);
    ssh.env("SSH_AUTH_SOCK", &socket);
    let out = output(ssh).await?;
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("forwarded-key"), "{stdout}");
    let exported = stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        !Path::new(&exported).exists(),
        "{exported} outlived its session"
    );

    let out = output(ws.ssh(&[], &["echo [$SSH_AUTH_SOCK]"])).await?;
    assert_eq!(text(&out.stdout), "[]\n", "no agent without -A");
    agent.kill().await?;
    Ok(())
}

#[tokio::test]
async fn the_host_key_survives_agent_restarts() -> anyhow::Result<()> {
    let mut ws = Workspace::start().await?;
    let known_hosts = ws.client.path().join("known_hosts");
    let strict = |policy: &str| -> Vec<String> {
        vec![
            "-o".into(),
            format!("UserKnownHostsFile={}", known_hosts.display()),
            "-o".into(),
            format!("StrictHostKeyChecking={policy}"),
        ]
    };
    let first = strict("accept-new");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    assert!(output(ws.ssh(&first, &["true"])).await?.status.success());
    assert!(read_to_string(&known_hosts)?.contains("ssh-ed25519"));

    ws.agent.stop().await?;
    let attempts = ws.peer.attempts().0;
    ws.agent = TestAgent::connect(&ws.peer.url)?;
    ws.peer
        .wait_for("the restarted agent", |p| {
            p.attempts().0 > attempts && p.manifests_served() >= 2
        })
        .await?;
    let again = strict("yes");
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    let out = output(ws.ssh(&again, &["true"])).await?;
    assert!(out.status.success(), "the host key changed: {out:?}");
    Ok(())
}

fn read_to_string(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// russh's client, for what OpenSSH's cannot be made to do (send a signal).
struct AnyHostKey;

impl russh::client::Handler for AnyHostKey {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

#[tokio::test]
async fn client_signals_reach_the_command_and_come_back_as_its_exit_signal() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", ws.bridge.port)).await?;
    let config = std::sync::Arc::new(russh::client::Config::default());
    let mut client = russh::client::connect_stream(config, stream, AnyHostKey).await?;
    let auth = client.authenticate_none("coder").await?;
    anyhow::ensure!(auth.success(), "{auth:?}");
    let mut channel = client.channel_open_session().await?;
    channel.exec(true, "echo started; exec sleep 30").await?;
    let mut exit = None;
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(message) = channel.wait().await {
            match message {
                russh::ChannelMsg::Data { data } if data.starts_with(b"started") => {
                    channel.signal(russh::Sig::INT).await?;
                }
                russh::ChannelMsg::ExitSignal { signal_name, .. } => {
                    exit = Some(format!("signal {signal_name:?}"));
                }
                russh::ChannelMsg::ExitStatus { exit_status } => {
                    exit = Some(format!("status {exit_status}"));
                }
                _ => {}
            }
        }
        Ok::<_, anyhow::Error>(())
    })
    .await;
    ended.context("the command outlived its signal")??;
    assert_eq!(exit.as_deref(), Some("signal INT"));
    Ok(())
}

#[tokio::test]
async fn a_tunnel_to_a_jetbrains_backend_counts_as_a_jetbrains_session() -> anyhow::Result<()> {
    let ws = Workspace::start().await?;
    // A stand-in IDE backend: a listener whose command line names JetBrains, as theirs do.
    let mut backend = Command::new("perl")
        .args([
            "-MIO::Socket::INET",
            "-e",
            "$| = 1; my $s = IO::Socket::INET->new(Listen => 5, LocalAddr => '127.0.0.1:0') \
             or die $!; print $s->sockport, \"\\n\"; while (my $c = $s->accept) { sleep 60 }",
            "--",
            "-Didea.vendor.name=JetBrains",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut line = String::new();
    let stdout = backend.stdout.take().context("piped")?;
    tokio::time::timeout(
        PATIENCE,
        tokio::io::AsyncBufReadExt::read_line(&mut tokio::io::BufReader::new(stdout), &mut line),
    )
    .await??;
    let backend_port: u16 = line.trim().parse().context(line.clone())?;

    let local = free_port()?;
    let _tunnel = ws
        .ssh(
            &["-N", "-L", &format!("{local}:127.0.0.1:{backend_port}")],
            &[],
        )
        .spawn()?;
    let _connection = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(conn) = tokio::net::TcpStream::connect(("127.0.0.1", local)).await {
                return conn;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    ws.peer
        .wait_for("a JetBrains session in the stats", |p| {
            p.stats().iter().any(|s| s.session_count_jetbrains >= 1)
        })
        .await
}
