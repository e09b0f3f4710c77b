//! The SSH half of the relay scenario, all of it driving real processes (blocking; the caller
//! runs it off the async runtime): OpenSSH's `sshd` on loopback as the baseline, bulk
//! transfers through `coder ssh`, OpenSSH via `config-ssh` and that `sshd`, connect times, and
//! keystroke echo through a remote terminal against a local one.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use super::{Figures, block};

/// Kills a child process when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `coder` command that inherits none of the bench's own `CODER_*` settings.
pub fn coder(bin: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(bin);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CODER_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CODER_CONFIG_DIR", config);
    cmd
}

/// What the SSH half needs: the CLI's config directory (logged in), the workspace, and sizes.
pub struct Plan {
    pub coder_bin: PathBuf,
    pub cli_config: PathBuf,
    pub dir: PathBuf,
    pub workspace: String,
    pub bytes: u64,
    pub runs: usize,
    pub warmup: bool,
    pub connects: usize,
    pub keystrokes: usize,
}

/// What it measured: throughputs in MB/s (10^6 bytes), times in ms; an error says why a
/// figure is missing.
pub struct SshRun {
    pub sshd: Figures,
    pub coder_ssh: Figures,
    pub openssh_via_coder: Figures,
    pub connect_via_coder: Figures,
    pub connect_coder_ssh: Figures,
    pub connect_sshd: Figures,
    /// `coder ssh --stdio` from its start to the SSH server's first byte (its banner).
    pub first_byte_stdio: Figures,
    /// The same with the flags Coder's VS Code extension adds (network info, log file, usage).
    pub first_byte_stdio_ide: Figures,
    pub keystroke_local: Figures,
    pub keystroke_via_coder: Figures,
}

pub fn run(plan: &Plan) -> anyhow::Result<SshRun> {
    std::fs::create_dir_all(&plan.dir)?;
    let ssh_config = plan.dir.join("ssh_config");
    let status = coder(&plan.coder_bin, &plan.cli_config)
        .args(["config-ssh", "--yes", "--ssh-config-file"])
        .arg(&ssh_config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    ensure!(status.success(), "coder config-ssh failed");
    // OpenSSH reads only the file config-ssh wrote, so nothing of this machine's own config
    // takes part.
    let via = |args: &[&str]| {
        let mut cmd = Command::new("ssh");
        cmd.arg("-F")
            .arg(&ssh_config)
            .arg(format!("coder.{}", plan.workspace))
            .args(args);
        cmd
    };
    let coder_ssh = |args: &[&str]| {
        let mut cmd = coder(&plan.coder_bin, &plan.cli_config);
        cmd.args(["ssh", &plan.workspace, "--"]).args(args);
        cmd
    };
    let sshd = Sshd::start(&plan.dir.join("sshd")).map_err(|e| format!("{e:#}"));
    let from_sshd = |f: &dyn Fn(&Sshd) -> Figures| match &sshd {
        Ok(sshd) => f(sshd),
        Err(e) => Err(e.clone()),
    };
    let sink = "cat > /dev/null";
    let transfers = |cmd: &dyn Fn() -> Command| {
        repeat(plan.runs, plan.warmup, || {
            pipe_through(&mut cmd(), plan.bytes)
        })
    };
    let connects = |cmd: &dyn Fn() -> Command| repeat(plan.connects, true, || time_ms(&mut cmd()));
    let stdio = |extra: &[&str]| {
        let mut cmd = coder(&plan.coder_bin, &plan.cli_config);
        cmd.args(["ssh", "--stdio"])
            .args(extra)
            .arg(&plan.workspace);
        cmd
    };
    let ide_dir = plan.dir.join("ide");
    let (net, logs) = (ide_dir.join("net"), ide_dir.join("log"));
    std::fs::create_dir_all(&logs)?;
    let ide_flags = [
        "--usage-app=vscode",
        "--network-info-dir",
        net.to_str().context("utf-8 path")?,
        "--log-dir",
        logs.to_str().context("utf-8 path")?,
        "-v",
    ];
    Ok(SshRun {
        sshd: from_sshd(&|s| transfers(&|| s.ssh(&[sink]))),
        coder_ssh: transfers(&|| coder_ssh(&[sink])),
        openssh_via_coder: transfers(&|| via(&[sink])),
        connect_via_coder: connects(&|| via(&["true"])),
        connect_coder_ssh: connects(&|| coder_ssh(&["true"])),
        connect_sshd: from_sshd(&|s| connects(&|| s.ssh(&["true"]))),
        first_byte_stdio: repeat(plan.connects, true, || first_byte_ms(&mut stdio(&[]))),
        first_byte_stdio_ide: repeat(plan.connects, true, || {
            first_byte_ms(&mut stdio(&ide_flags))
        }),
        keystroke_local: keystrokes(
            Command::new("script").args(["-q", "-c", "cat", "/dev/null"]),
            plan.keystrokes,
        )
        .map_err(|e| format!("{e:#}")),
        keystroke_via_coder: keystrokes(&mut via(&["-tt", "cat"]), plan.keystrokes)
            .map_err(|e| format!("{e:#}")),
    })
}

/// `runs` figures of `f`, after one unrecorded run when `warmup`.
fn repeat(runs: usize, warmup: bool, mut f: impl FnMut() -> anyhow::Result<f64>) -> Figures {
    let mut values = Vec::with_capacity(runs);
    for run in 0..runs + usize::from(warmup) {
        let v = f().map_err(|e| format!("{e:#}"))?;
        if run >= usize::from(warmup) {
            values.push(v);
        }
    }
    Ok(values)
}

/// Runs `cmd` with `bytes` on its stdin; MB/s from its start to its exit (which waits for the
/// far end to have read everything).
fn pipe_through(cmd: &mut Command, bytes: u64) -> anyhow::Result<f64> {
    let data = block();
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(data.len() as u64) as usize;
        stdin.write_all(&data[..n])?;
        left -= n as u64;
    }
    drop(stdin);
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e6)
}

fn time_ms(cmd: &mut Command) -> anyhow::Result<f64> {
    let started = Instant::now();
    let out = cmd.stdin(Stdio::null()).output()?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// Milliseconds from starting `cmd` (an SSH stream on stdout) to its first byte.
fn first_byte_ms(cmd: &mut Command) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut child = Killed(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut stdout = child.0.stdout.take().context("stdout")?;
    let mut first = [0u8; 1];
    stdout
        .read_exact(&mut first)
        .context("the stream ended before its first byte")?;
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    ensure!(first[0] == b'S', "the first byte is not an SSH banner's");
    Ok(elapsed)
}

/// Waits for `byte` to come back on `rx`, skipping what else arrives.
fn await_byte(rx: &Receiver<u8>, byte: u8, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(b) if b == byte => return Ok(()),
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => bail!("no echo of {byte:#x} within {within:?}"),
            Err(RecvTimeoutError::Disconnected) => bail!("the terminal exited"),
        }
    }
}

/// Keystroke echo: `cmd` runs `cat` in a terminal (canonical mode, so the terminal's own echo
/// answers each byte at once); writes one byte at a time and times until it comes back.
fn keystrokes(cmd: &mut Command, count: usize) -> anyhow::Result<Vec<f64>> {
    let mut child = Killed(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let mut stdin = child.0.stdin.take().context("stdin")?;
    let mut stdout = child.0.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel::<u8>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || buf[..n].iter().any(|b| tx.send(*b).is_err()) {
                return;
            }
        }
    });
    let mut press = |byte: u8| -> anyhow::Result<()> {
        stdin.write_all(&[byte])?;
        Ok(stdin.flush()?)
    };
    // The terminal is up once the first keystroke comes back.
    press(b'a')?;
    await_byte(&rx, b'a', Duration::from_secs(30))?;
    let mut times = Vec::with_capacity(count);
    for i in 0..count {
        // Letters only: the line `cat` writes back holds letters, and a newline ends each.
        let byte = b'b' + (i % 20) as u8;
        let started = Instant::now();
        press(byte)?;
        await_byte(&rx, byte, Duration::from_secs(5))?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        if i % 50 == 49 {
            // Keeps the line short: the echoed newline, then `cat`'s copy of the line (whose
            // letters must not pass for the next keystrokes' echoes) and its newline.
            press(b'\n')?;
            await_byte(&rx, b'\n', Duration::from_secs(5))?;
            await_byte(&rx, b'\n', Duration::from_secs(5))?;
            while rx.try_recv().is_ok() {}
        }
    }
    Ok(times)
}

/// OpenSSH's sshd on a loopback port with throwaway keys: the baseline the relay's SSH is
/// held against.
struct Sshd {
    _child: Killed,
    port: u16,
    key: PathBuf,
}

impl Sshd {
    fn start(dir: &Path) -> anyhow::Result<Self> {
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .context(
                "sshd is not installed (Debian: openssh-server; scripts/bench.sh installs it)",
            )?;
        std::fs::create_dir_all(dir)?;
        let host_key = dir.join("host_key");
        let key = dir.join("client_key");
        for k in [&host_key, &key] {
            if !k.exists() {
                let status = Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(k)
                    .status()?;
                ensure!(status.success(), "ssh-keygen failed");
            }
        }
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))?;
        // sshd insists on its privilege-separation directory when it runs as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile {}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n",
                host_key.display(),
                dir.join("authorized_keys").display(),
                dir.join("sshd.pid").display()
            ),
        )?;
        let child = Killed(
            Command::new(&sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(Instant::now() < deadline, "sshd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self {
            _child: child,
            port,
            key,
        })
    }

    fn ssh(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(["-F", "/dev/null", "-p", &self.port.to_string(), "-i"])
            .arg(&self.key)
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "BatchMode=yes",
                "-o",
                "LogLevel=ERROR",
                "127.0.0.1",
            ])
            .args(args);
        cmd
    }
}
