//! SSH into a workspace end to end: `coder config-ssh` in a temporary HOME, then the system's
//! OpenSSH client (`ssh`, `scp`, `sftp`, `-L`, `-R`, an interactive terminal in tmux)
//! through `coder ssh --stdio`, coderd's relay and the real agent's SSH server; and `coder ssh`
//! itself, including what happens when the agent or coderd goes away mid-session.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testutil::eventually;

use crate::agent::local_process;
use crate::harness::{Deployment, free_port};
use crate::relay::{Killed, openssh, output, running_workspace, tool};
use crate::terraform::pid_in;

fn config_ssh(d: &Deployment, home: &Path, extra: &[&str]) -> anyhow::Result<String> {
    let out = d
        .coder(&d.token)
        .env("HOME", home)
        .arg("config-ssh")
        .args(extra)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "config-ssh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Reads a tmux pane until `wanted` shows up.
fn pane_shows(socket: &Path, wanted: &str) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(socket)
            .args(["capture-pane", "-p", "-t", "ssh"])
            .output()?;
        let screen = String::from_utf8_lossy(&out.stdout).into_owned();
        if screen.contains(wanted) {
            return Ok(screen);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the terminal never showed {wanted:?}:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tmux(socket: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .status()?;
    anyhow::ensure!(status.success(), "tmux {args:?} failed");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn openssh_reaches_the_workspace_through_config_ssh() -> anyhow::Result<()> {
    for t in ["ssh", "scp", "sftp", "tmux", "python3"] {
        tool(t)?;
    }
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (ws, _, _reaper) = running_workspace(&d, &workspaces, "dev").await?;
    let ws_home = workspaces.join(ws.id.to_string());

    // Logged in (the session in the CLI's config directory, where the ProxyCommand finds it);
    // config-ssh in a HOME with a config of the user's own, kept byte for byte.
    d.ok(&["login", &d.url()])?;
    let home = tempfile::Builder::new()
        .prefix("coder-home-")
        .tempdir_in("/tmp")?;
    std::fs::create_dir_all(home.path().join(".ssh"))?;
    let mine = "Host elsewhere\n\tUser   me # tabs and spaces stay\n";
    std::fs::write(home.path().join(".ssh/config"), mine)?;
    let dry = config_ssh(&d, home.path(), &["--dry-run"])?;
    assert!(dry.contains("+Host coder.*"), "{dry}");
    assert_eq!(
        std::fs::read_to_string(home.path().join(".ssh/config"))?,
        mine
    );
    config_ssh(&d, home.path(), &["--yes"])?;
    let written = std::fs::read_to_string(home.path().join(".ssh/config"))?;
    assert!(written.starts_with(mine), "{written}");
    assert!(written.contains("Host coder.*"), "{written}");
    assert!(!written.contains(&d.token), "no token in the SSH config");
    let again = config_ssh(&d, home.path(), &["--yes"])?;
    assert!(again.contains("No changes"), "{again}");

    // A command, by workspace and by workspace.agent.
    for host in ["coder.dev", "coder.dev.main"] {
        let (code, out, err) = output(openssh("ssh", home.path()).args([host, "echo", "hi"]))?;
        assert_eq!((code, out.as_str()), (0, "hi\n"), "{host}: {err}");
    }
    // The workspace's environment.
    let (_, out, _) = output(
        openssh("ssh", home.path()).args(["coder.dev", "echo $CODER_WORKSPACE_NAME $GREETING"]),
    )?;
    assert_eq!(out, "dev hello\n");
    // Exit codes.
    let (code, _, _) = output(openssh("ssh", home.path()).args(["coder.dev", "false"]))?;
    assert_eq!(code, 1);
    let (code, _, _) = output(d.coder(&d.token).args(["ssh", "dev", "--", "false"]))?;
    assert_eq!(code, 1);
    let (code, out, _) = output(d.coder(&d.token).args([
        "ssh",
        "dev",
        "-e",
        "FOO=bar",
        "--",
        "sh",
        "-c",
        "'echo $FOO; exit 7'",
    ]))?;
    assert_eq!((code, out.as_str()), (7, "bar\n"));

    // scp both ways, sftp.
    let data: Vec<u8> = (0..2u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let local = home.path().join("up.bin");
    std::fs::write(&local, &data)?;
    let (code, _, err) = output(
        openssh("scp", home.path())
            .arg(&local)
            .arg("coder.dev:uploaded.bin"),
    )?;
    assert_eq!(code, 0, "scp up: {err}");
    assert!(std::fs::read(ws_home.join("uploaded.bin"))? == data);
    let back = home.path().join("down.bin");
    let (code, _, err) = output(
        openssh("scp", home.path())
            .arg("coder.dev:uploaded.bin")
            .arg(&back),
    )?;
    assert_eq!(code, 0, "scp down: {err}");
    assert!(std::fs::read(&back)? == data);
    let batch = home.path().join("sftp.batch");
    let fetched = home.path().join("fetched.bin");
    std::fs::write(
        &batch,
        format!(
            "put {} via-sftp.bin\nls\nget via-sftp.bin {}\n",
            local.display(),
            fetched.display()
        ),
    )?;
    let (code, out, err) = output(
        openssh("sftp", home.path())
            .arg("-b")
            .arg(&batch)
            .arg("coder.dev"),
    )?;
    assert_eq!(code, 0, "sftp: {out}{err}");
    assert!(out.contains("via-sftp.bin"), "{out}");
    assert!(std::fs::read(&fetched)? == data);

    // -L: a local port to a server inside the workspace.
    let http_port = free_port()?;
    let _http = Killed(
        Command::new("python3")
            .args([
                "-m",
                "http.server",
                &http_port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .current_dir(&ws_home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let local_port = free_port()?;
    let _tunnel = Killed(
        openssh("ssh", home.path())
            .args([
                "-N",
                "-L",
                &format!("{local_port}:127.0.0.1:{http_port}"),
                "coder.dev",
            ])
            .spawn()?,
    );
    let url = format!("http://127.0.0.1:{local_port}/uploaded.bin");
    eventually(Duration::from_secs(20), "HTTP through ssh -L", || async {
        Ok(reqwest::get(&url)
            .await
            .is_ok_and(|r| r.status().is_success()))
    })
    .await?;
    assert!(reqwest::get(&url).await?.bytes().await?.as_ref() == data.as_slice());

    // -R: a port inside the workspace to a server on this side.
    let remote_port = free_port()?;
    let fetch = format!(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{remote_port}/uploaded.bin').status)\""
    );
    let (code, out, err) = output(openssh("ssh", home.path()).args([
        "-o",
        "ExitOnForwardFailure=yes",
        "-R",
        &format!("{remote_port}:127.0.0.1:{http_port}"),
        "coder.dev",
        &fetch,
    ]))?;
    assert_eq!((code, out.trim()), (0, "200"), "{err}");

    // -A: this side's ssh-agent answers inside the workspace, through a socket of the session.
    let auth_sock = home.path().join("agent.sock");
    let _ssh_agent = Killed(
        Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&auth_sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    eventually(Duration::from_secs(10), "ssh-agent's socket", || async {
        Ok(auth_sock.exists())
    })
    .await?;
    let key = home.path().join("id_forwarded");
    let (code, _, err) = output(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "forwarded-key", "-f"])
            .arg(&key),
    )?;
    assert_eq!(code, 0, "ssh-keygen: {err}");
    let (code, _, err) = output(
        Command::new("ssh-add")
            .env("SSH_AUTH_SOCK", &auth_sock)
            .arg(&key),
    )?;
    assert_eq!(code, 0, "ssh-add: {err}");
    let (code, out, err) = output(
        openssh("ssh", home.path())
            .env("SSH_AUTH_SOCK", &auth_sock)
            .args(["-A", "coder.dev", "echo $SSH_AUTH_SOCK; ssh-add -L"]),
    )?;
    assert_eq!(code, 0, "ssh -A: {out}{err}");
    let (remote_sock, keys) = out.split_once('\n').context("two lines")?;
    assert!(keys.contains("forwarded-key"), "{out}");
    assert!(
        !remote_sock.is_empty() && Path::new(remote_sock) != auth_sock,
        "the session has its own socket: {out}"
    );
    // Without -A the workspace sees no agent of this side.
    let (_, out, _) = output(
        openssh("ssh", home.path())
            .env("SSH_AUTH_SOCK", &auth_sock)
            .args(["-a", "coder.dev", "ssh-add -L || true"]),
    )?;
    assert!(!out.contains("forwarded-key"), "{out}");

    // An interactive terminal: a prompt, a command, and resizes seen by the shell.
    let tmux_socket = home.path().join("tmux.sock");
    let ssh_command = format!(
        "HOME={} ssh -F {}/.ssh/config coder.dev",
        home.path().display(),
        home.path().display()
    );
    tmux(
        &tmux_socket,
        &[
            "new-session",
            "-d",
            "-s",
            "ssh",
            "-x",
            "100",
            "-y",
            "30",
            &ssh_command,
        ],
    )?;
    let _tmux = scopeguard(&tmux_socket);
    tmux(
        &tmux_socket,
        &["send-keys", "-t", "ssh", "echo marker-$((6*7))", "Enter"],
    )?;
    pane_shows(&tmux_socket, "marker-42")?;
    tmux(
        &tmux_socket,
        &["send-keys", "-t", "ssh", "stty size", "Enter"],
    )?;
    pane_shows(&tmux_socket, "30 100")?;
    tmux(
        &tmux_socket,
        &["resize-window", "-t", "ssh", "-x", "120", "-y", "40"],
    )?;
    tmux(
        &tmux_socket,
        &["send-keys", "-t", "ssh", "stty size", "Enter"],
    )?;
    pane_shows(&tmux_socket, "40 120")?;
    tmux(&tmux_socket, &["send-keys", "-t", "ssh", "exit", "Enter"])?;

    // No SSH (or other) port open by the agent on the workspace's host.
    let pid = pid_in(&ws_home.join(".coder-workspace.pid"))?;
    let listening = listening_sockets(pid)?;
    assert!(listening.is_empty(), "the agent listens on {listening:?}");
    // The session token is in no process's arguments while sessions run, nor in the logs.
    let mut session = Killed(
        openssh("ssh", home.path())
            .args(["coder.dev", "sleep 30"])
            .spawn()?,
    );
    std::thread::sleep(Duration::from_secs(2));
    for entry in std::fs::read_dir("/proc")? {
        let Ok(cmdline) = std::fs::read(entry?.path().join("cmdline")) else {
            continue;
        };
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(&d.token),
            "a process has the token in its arguments"
        );
    }
    let _ = session.0.kill();
    for entry in std::fs::read_dir(d.dir.path())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            let log = std::fs::read_to_string(&path)?;
            assert!(!log.contains(&d.token), "{} has the token", path.display());
        }
    }
    Ok(())
}

/// The TCP ports process `pid` listens on, from the kernel's tables (`/proc/net/tcp{,6}` rows
/// in state LISTEN whose socket is one of the process's descriptors).
fn listening_sockets(pid: i32) -> anyhow::Result<Vec<u16>> {
    let mut inodes = std::collections::HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        if let Ok(target) = std::fs::read_link(fd?.path())
            && let Some(inode) = target
                .to_string_lossy()
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
        {
            inodes.insert(inode.to_string());
        }
    }
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table)?.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if *state == "0A" && inodes.contains(*inode) {
                let port = local.rsplit(':').next().unwrap_or("0");
                ports.push(u16::from_str_radix(port, 16)?);
            }
        }
    }
    Ok(ports)
}

/// Kills the tmux server when the test ends.
fn scopeguard(socket: &Path) -> impl Drop + '_ {
    struct Guard<'a>(&'a Path);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .arg("-S")
                .arg(self.0)
                .arg("kill-server")
                .status();
        }
    }
    Guard(socket)
}

/// A display number no local X server uses.
fn free_display() -> anyhow::Result<u16> {
    (50..200)
        .find(|n| {
            !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
        })
        .context("no free X display between 50 and 199")
}

#[tokio::test(flavor = "multi_thread")]
async fn ssh_x_shows_the_workspaces_x_clients_on_the_local_display() -> anyhow::Result<()> {
    for t in ["ssh", "Xvfb", "xauth", "xdpyinfo"] {
        tool(t)?;
    }
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (_ws, _, _reaper) = running_workspace(&d, &workspaces, "dev").await?;
    d.ok(&["login", &d.url()])?;
    let home = tempfile::Builder::new()
        .prefix("coder-home-")
        .tempdir_in("/tmp")?;
    std::fs::create_dir_all(home.path().join(".ssh"))?;
    config_ssh(&d, home.path(), &["--yes"])?;

    // The client's display: a virtual X server of the test's own.
    let number = free_display()?;
    let _xvfb = Killed(
        Command::new("Xvfb")
            .arg(format!(":{number}"))
            .args(["-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let socket = format!("/tmp/.X11-unix/X{number}");
    testutil::eventually(Duration::from_secs(10), "Xvfb listening", || async {
        Ok(Path::new(&socket).exists())
    })
    .await?;

    // An X client in the workspace draws on it through the SSH connection.
    let script = "echo \"DISPLAY=$DISPLAY\"; xdpyinfo | grep -E 'name of display|vendor string'";
    let (code, out, err) = output(
        openssh("ssh", home.path())
            .env("DISPLAY", format!(":{number}"))
            .args(["-Y", "coder.dev", script]),
    )?;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("DISPLAY=localhost:"), "{out}");
    assert!(out.contains("The X.Org Foundation"), "Xvfb answered: {out}");
    // Without -X there is no display.
    let (_, out, _) = output(
        openssh("ssh", home.path())
            .env("DISPLAY", format!(":{number}"))
            .args(["coder.dev", "echo \"DISPLAY=$DISPLAY\""]),
    )?;
    assert_eq!(out, "DISPLAY=\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn coder_ssh_fails_clearly_when_the_agent_or_coderd_goes_away_and_works_again()
-> anyhow::Result<()> {
    let Some((mut d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (ws, _, _reaper) = running_workspace(&d, &workspaces, "dev").await?;
    let pid_file = workspaces
        .join(ws.id.to_string())
        .join(".coder-workspace.pid");

    // Another member cannot reach it: the CLI shows coderd's 404.
    d.ok(&[
        "users",
        "create",
        "--username",
        "bob",
        "--email",
        "bob@example.com",
        "--password",
        testutil::PASSWORD,
    ])?;
    let bob = d
        .owner
        .clone()
        .with_token("")
        .login_with_password(&codersdk::users::LoginWithPasswordRequest {
            email: "bob@example.com".into(),
            password: testutil::PASSWORD.into(),
        })
        .await?
        .session_token;
    let (code, _, err) = output(d.coder(&bob).args(["ssh", "admin/dev", "--", "true"]))?;
    assert_ne!(code, 0);
    assert!(err.contains("404") || err.contains("not found"), "{err}");

    // The agent killed -9 mid-session: the client says so within seconds.
    let mut session = d
        .coder(&d.token)
        .args(["ssh", "dev", "--", "sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_secs(2));
    let agent_pid = pid_in(&pid_file)?;
    kill(Pid::from_raw(agent_pid), Signal::SIGKILL)?;
    let killed = Instant::now();
    let status = wait_exit(&mut session, Duration::from_secs(10))?;
    assert!(killed.elapsed() < Duration::from_secs(10));
    let mut err = String::new();
    std::io::Read::read_to_string(session.stderr.as_mut().context("stderr")?, &mut err)?;
    assert!(!status.success());
    assert!(err.contains("agent"), "{err}");

    // A new agent (the workspace restarted): sessions work again.
    d.ok(&["restart", "dev", "--yes"])?;
    let (code, out, err) = output(d.coder(&d.token).args(["ssh", "dev", "--", "echo", "back"]))?;
    assert_eq!((code, out.as_str()), (0, "back\n"), "{err}");

    // coderd restarted mid-session: a clear error, then it works once coderd is back.
    let mut session = d
        .coder(&d.token)
        .args(["ssh", "dev", "--", "sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_secs(2));
    d.server.take().context("the server")?.stop()?;
    let status = wait_exit(&mut session, Duration::from_secs(10))?;
    let mut err = String::new();
    std::io::Read::read_to_string(session.stderr.as_mut().context("stderr")?, &mut err)?;
    assert!(!status.success());
    assert!(err.contains("coderd"), "{err}");
    d.start_server_again(&["--provisioner-daemons=1"]).await?;
    let (code, out, err) = output(
        d.coder(&d.token)
            .args(["ssh", "dev", "--", "echo", "again"]),
    )?;
    assert_eq!((code, out.as_str()), (0, "again\n"), "{err}");
    Ok(())
}

fn wait_exit(
    child: &mut std::process::Child,
    within: Duration,
) -> anyhow::Result<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            anyhow::bail!("the client did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
