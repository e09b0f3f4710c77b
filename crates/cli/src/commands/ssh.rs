//! `coder ssh`: a shell or a command in a workspace over the relay, with russh as the client
//! (or, with `--stdio`, the raw stream for OpenSSH's `ProxyCommand`). The remote command's exit
//! status becomes ours.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use codersdk::relay::{RelayStream, Target};
use codersdk::{Client, ClientError};
use russh::ChannelMsg;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::reach::{self, Wait};
use crate::sshclient::{Handler, Reverse};
use crate::{Exit, GlobalArgs};

/// How long opening the stream may be retried while coderd says the agent is not connected
/// (it may be reconnecting right now).
const OPEN_RETRY: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct SshArgs {
    /// The workspace: `[owner/]workspace[.agent]`.
    pub workspace: String,
    /// A command to run instead of a login shell.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
    /// Connect stdin and stdout to the SSH stream itself, for OpenSSH's `ProxyCommand`.
    #[arg(long, env = "CODER_SSH_STDIO")]
    pub stdio: bool,
    /// Strip this prefix from the host name, then read Coder's host forms (`owner--workspace`,
    /// `owner--workspace--agent`, `workspace.agent`): what IDEs' ProxyCommands pass as `%h`.
    #[arg(long, env = "CODER_SSH_SSH_HOST_PREFIX")]
    pub ssh_host_prefix: Option<String>,
    /// Strip this suffix (without its leading dot) from the host name.
    #[arg(long, env = "CODER_SSH_HOSTNAME_SUFFIX")]
    pub hostname_suffix: Option<String>,
    /// Forward the local SSH agent (`SSH_AUTH_SOCK`) into the workspace.
    #[arg(short = 'A', long, env = "CODER_SSH_FORWARD_AGENT")]
    pub forward_agent: bool,
    /// The SSH agent socket to forward with -A, instead of `SSH_AUTH_SOCK`.
    #[arg(long, env = "CODER_SSH_IDENTITY_AGENT")]
    pub identity_agent: Option<std::path::PathBuf>,
    /// Forward a port of the workspace to a local address: `remote_port:local_host:local_port`.
    #[arg(short = 'R', long = "remote-forward", env = "CODER_SSH_REMOTE_FORWARD")]
    pub remote_forward: Vec<String>,
    /// Set an environment variable in the session (`KEY=VALUE`, repeatable).
    #[arg(
        short = 'e',
        long = "env",
        env = "CODER_SSH_ENV",
        value_delimiter = ','
    )]
    pub env: Vec<String>,
    /// Whether to wait for the agent's startup scripts before connecting.
    #[arg(long, env = "CODER_SSH_WAIT", value_enum, default_value = "auto")]
    pub wait: Wait,
    /// Connect without waiting for startup scripts. DEPRECATED: use --wait=no.
    #[arg(long, env = "CODER_SSH_NO_WAIT", hide = true)]
    pub no_wait: bool,
    /// Do not start the workspace when it is stopped.
    #[arg(long, env = "CODER_SSH_DISABLE_AUTOSTART")]
    pub disable_autostart: bool,
    /// Which app this connection is for, reported as the workspace's usage every minute
    /// (`vscode`, `jetbrains`, `ssh`; `disable` reports nothing; anything else counts as ssh).
    #[arg(long, env = "CODER_SSH_USAGE_APP", default_value = "ssh", hide = true)]
    pub usage_app: String,
    /// Write the connection's network info (latency, byte rates) as JSON to
    /// `<dir>/<parent pid>.json`, refreshed every --network-info-interval.
    #[arg(long, value_name = "DIR")]
    pub network_info_dir: Option<std::path::PathBuf>,
    /// How often the network info file is refreshed.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub network_info_interval: Duration,
    /// Write this connection's logs to a file of its own in this directory.
    #[arg(short = 'l', long, env = "CODER_SSH_LOG_DIR", value_name = "DIR")]
    pub log_dir: Option<std::path::PathBuf>,
}

pub async fn run(global: &GlobalArgs, args: SshArgs) -> anyhow::Result<()> {
    if args.stdio && !args.remote_forward.is_empty() {
        bail!("-R/--remote-forward cannot be used with --stdio: forward with the SSH client");
    }
    if let Some(dir) = &args.log_dir {
        let path = crate::sshlog::start(dir, args.stdio, global.verbose)?;
        tracing::info!(path = %path.display(), host = %args.workspace, "coder ssh starting");
    }
    let network_info = args
        .network_info_dir
        .as_deref()
        .map(crate::netinfo::prepare)
        .transpose()?;
    let client = global.client()?;
    let name = reach::from_host(
        &args.workspace,
        args.ssh_host_prefix.as_deref(),
        args.hostname_suffix.as_deref(),
    );
    let wait = if args.no_wait { Wait::No } else { args.wait };
    let reached = match reach::reach(&client, &name, !args.disable_autostart, wait).await {
        Ok(reached) => reached,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "cannot reach the workspace");
            return Err(error);
        }
    };
    tracing::info!(
        workspace = %reached.workspace.name,
        agent = %reached.agent.name,
        "connecting through coderd's relay"
    );
    let stream = open(&client, reached.agent.id).await?;
    if let Some(app) = usage_app(&args.usage_app) {
        tokio::spawn(report_usage(
            client.clone(),
            reached.workspace.id,
            reached.agent.id,
            app,
        ));
    }
    if args.stdio {
        let counters = Arc::new(crate::netinfo::Counters::default());
        if let Some(path) = network_info {
            tokio::spawn(crate::netinfo::report(
                client.clone(),
                reached.agent.id,
                path,
                args.network_info_interval,
                counters.clone(),
            ));
        }
        let result = stdio(stream, &counters).await;
        tracing::info!(
            sent = counters.up.load(std::sync::atomic::Ordering::Relaxed),
            received = counters.down.load(std::sync::atomic::Ordering::Relaxed),
            outcome = ?result.as_ref().map_err(|e| format!("{e:#}")),
            "the connection ended"
        );
        return result;
    }
    let code = session(stream, &reached.workspace.owner_name, &args).await?;
    if code != 0 {
        return Err(Exit(code).into());
    }
    Ok(())
}

/// Opens the SSH stream, retrying for a while when the agent is reconnecting.
async fn open(client: &Client, agent: Uuid) -> anyhow::Result<RelayStream> {
    let deadline = tokio::time::Instant::now() + OPEN_RETRY;
    loop {
        match client.connect_agent(agent, Target::Ssh).await {
            Ok(stream) => return Ok(stream),
            Err(ClientError::Api { status: 502, .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e).context("connecting to the workspace's SSH server"),
        }
    }
}

/// How much `--stdio` moves per read and write. tokio's stdin and stdout hand every call to a
/// blocking thread, and each write to the relay is a WebSocket message: `tokio::io::copy`'s
/// 8 KiB made OpenSSH through `config-ssh` a third as fast as `coder ssh` itself.
const STDIO_CHUNK: usize = 256 << 10;

/// `--stdio`: the stream on stdin/stdout until either side ends, counting the bytes.
async fn stdio(
    stream: RelayStream,
    counters: &Arc<crate::netinfo::Counters>,
) -> anyhow::Result<()> {
    let (from, to) = tokio::io::split(stream);
    let up = counters.clone();
    let upload = tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::with_capacity(STDIO_CHUNK, tokio::io::stdin());
        let mut to = Counted::new(to, &up.up);
        let copied = tokio::io::copy_buf(&mut stdin, &mut to).await;
        let _ = to.shutdown().await;
        copied
    });
    let mut stdout = Counted::new(tokio::io::stdout(), &counters.down);
    let mut from = tokio::io::BufReader::with_capacity(STDIO_CHUNK, from);
    let result = tokio::io::copy_buf(&mut from, &mut stdout).await;
    let _ = stdout.flush().await;
    upload.abort();
    result.context("the connection to the workspace ended")?;
    Ok(())
}

/// A writer that adds what it writes to a counter.
struct Counted<'a, W> {
    inner: W,
    count: &'a std::sync::atomic::AtomicU64,
}

impl<'a, W> Counted<'a, W> {
    fn new(inner: W, count: &'a std::sync::atomic::AtomicU64) -> Self {
        Self { inner, count }
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<'_, W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = &polled {
            self.count
                .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How often a connection reports its app's use of the workspace (as Coder's CLI does).
const USAGE_INTERVAL: Duration = Duration::from_secs(60);

/// The app `--usage-app` names for the usage report; `None` for `disable`.
fn usage_app(flag: &str) -> Option<&'static str> {
    match flag {
        "disable" => None,
        "vscode" => Some("vscode"),
        "jetbrains" => Some("jetbrains"),
        _ => Some("ssh"),
    }
}

/// Reports the connection's use of the workspace now and every minute while it lasts.
async fn report_usage(client: Client, workspace: Uuid, agent: Uuid, app: &'static str) {
    let mut tick = tokio::time::interval(USAGE_INTERVAL);
    loop {
        tick.tick().await;
        if let Err(error) = client.report_workspace_usage(workspace, agent, app).await {
            tracing::debug!(%error, "reporting the workspace's usage");
        }
    }
}

fn reverse_forwards(specs: &[String]) -> anyhow::Result<Reverse> {
    let mut map = Reverse::new();
    for spec in specs {
        let (port, local) = spec
            .split_once(':')
            .with_context(|| format!("-R {spec:?}: use remote_port:local_host:local_port"))?;
        let port: u32 = port
            .parse()
            .with_context(|| format!("-R {spec:?}: {port:?} is not a port"))?;
        if !local.contains(':') {
            bail!("-R {spec:?}: use remote_port:local_host:local_port");
        }
        map.insert(port, local.to_string());
    }
    Ok(map)
}

/// Restores the terminal when dropped, however the session ends.
struct RawMode;

impl RawMode {
    fn enable() -> anyhow::Result<Self> {
        crossterm::terminal::enable_raw_mode().context("putting the terminal in raw mode")?;
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Runs the shell or command; returns its exit status.
async fn session(stream: RelayStream, user: &str, args: &SshArgs) -> anyhow::Result<i32> {
    let reverse = Arc::new(reverse_forwards(&args.remote_forward)?);
    let auth_sock = if args.forward_agent {
        Some(match &args.identity_agent {
            Some(socket) => socket.clone(),
            None => std::env::var_os("SSH_AUTH_SOCK")
                .map(std::path::PathBuf::from)
                .context("-A: SSH_AUTH_SOCK is not set: no local SSH agent to forward")?,
        })
    } else {
        None
    };
    let config = Arc::new(russh::client::Config {
        // The stream ends when coderd or the agent goes away; keepalives catch a path that
        // dies silently.
        keepalive_interval: Some(Duration::from_secs(15)),
        keepalive_max: 3,
        ..Default::default()
    });
    let handler = Handler {
        reverse: reverse.clone(),
        auth_sock,
    };
    let mut handle = russh::client::connect_stream(config, stream, handler)
        .await
        .context("starting SSH with the workspace")?;
    let auth = handle.authenticate_none(user).await?;
    if !auth.success() {
        bail!("the workspace's SSH server refused the session");
    }
    for port in reverse.keys() {
        handle
            .tcpip_forward("127.0.0.1", *port)
            .await
            .with_context(|| format!("-R: the workspace refused to listen on port {port}"))?;
    }
    let mut channel = handle.channel_open_session().await?;
    if args.forward_agent {
        channel.agent_forward(false).await?;
    }
    for pair in &args.env {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--env {pair:?}: use KEY=VALUE"))?;
        channel.set_env(false, key, value).await?;
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let _raw = if interactive {
        let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
        let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into());
        channel
            .request_pty(false, &term, cols.into(), rows.into(), 0, 0, &[])
            .await?;
        Some(RawMode::enable()?)
    } else {
        None
    };
    if args.command.is_empty() {
        channel.request_shell(true).await?;
    } else {
        channel.exec(true, args.command.join(" ")).await?;
    }

    let writer = channel.make_writer();
    let input = tokio::spawn(async move {
        let mut writer = writer;
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; 32 << 10];
        loop {
            match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if writer.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    let _ = writer.flush().await;
                }
            }
        }
        // Shutting the writer down sends EOF, as the end of our stdin.
        let _ = writer.shutdown().await;
    });
    let mut resize = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    let mut status = None;
    loop {
        tokio::select! {
            msg = channel.wait() => match msg {
                Some(ChannelMsg::Data { data }) => {
                    stdout.write_all(&data).await?;
                    stdout.flush().await?;
                }
                Some(ChannelMsg::ExtendedData { data, .. }) => {
                    stderr.write_all(&data).await?;
                    stderr.flush().await?;
                }
                Some(ChannelMsg::ExitStatus { exit_status }) => {
                    status = Some(i32::try_from(exit_status).unwrap_or(255));
                }
                Some(ChannelMsg::ExitSignal { signal_name, .. }) => {
                    if status.is_none() {
                        eprintln!("\r\ncoder ssh: the remote command was killed by signal {signal_name:?}");
                        status = Some(255);
                    }
                }
                Some(ChannelMsg::Close) | None => break,
                Some(_) => {}
            },
            _ = resize.recv(), if interactive => {
                if let Ok((cols, rows)) = crossterm::terminal::size() {
                    let _ = channel.window_change(cols.into(), rows.into(), 0, 0).await;
                }
            }
        }
    }
    input.abort();
    drop(_raw);
    match status {
        Some(code) => {
            let _ = handle
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
            Ok(code)
        }
        None => {
            let why = match tokio::time::timeout(Duration::from_secs(2), &mut handle).await {
                Ok(Err(e)) => e.to_string(),
                _ => "the session closed without an exit status".into(),
            };
            bail!("the connection to the workspace was lost: {why}")
        }
    }
}
