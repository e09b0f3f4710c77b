//! Reconnecting PTYs, the web terminal's backend. A PTY is keyed by the id its client chose:
//! the first attachment creates it (running its command, or the login shell), later ones with
//! the same id join it. Every attachment first gets the last [`RING`] bytes the terminal showed,
//! then the live output; all attachments see the same output and may all type. When the last
//! one goes, the PTY lives on for the agent's `pty_timeout` (Coder's five minutes) so that a
//! dropped browser can come back to it; after that, or when its command exits, it is gone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use codersdk::agentsdk::{PtyInput, read_frame};
use nix::sys::signal::Signal;
use pty_process::OwnedWritePty;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_yamux::StreamHandle;
use uuid::Uuid;

use crate::login::{Login, Logins};
use crate::process::{GroupGuard, signal_group};
use crate::stats::{SessionKind, Stats};
use crate::streams::{Counted, accept, refuse};
use crate::terminal;

/// Output kept for replay, as Coder's agent keeps it.
const RING: usize = 64 << 10;
/// Chunks of output an attachment may fall behind by before it is dropped (its client
/// reconnects and gets the replay).
const BACKLOG: usize = 256;
/// How long an abandoned PTY's command has between the hangup and the kill.
const HANGUP_GRACE: Duration = Duration::from_secs(2);
/// Coder's terminal type for the web terminal.
const TERM: &str = "xterm-256color";

/// The agent's reconnecting PTYs.
pub(crate) struct Terminals {
    ptys: Mutex<HashMap<Uuid, Arc<Pty>>>,
    timeout: Duration,
}

struct Pty {
    id: Uuid,
    input: tokio::sync::Mutex<OwnedWritePty>,
    state: Mutex<State>,
    group: Option<u32>,
    /// Kills what is left of the command's process group when the PTY goes.
    _guard: GroupGuard,
}

#[derive(Default)]
struct State {
    ring: VecDeque<u8>,
    clients: HashMap<u64, mpsc::Sender<Bytes>>,
    next_client: u64,
    /// Bumped whenever the last client leaves, so that an older expiry finds itself stale.
    detached: u64,
    closed: bool,
}

/// What a new attachment starts from.
struct Subscription {
    client: u64,
    replay: Vec<u8>,
    live: mpsc::Receiver<Bytes>,
}

impl Terminals {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            ptys: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    fn ptys(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Pty>>> {
        self.ptys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The PTY `id`, started with `command` (the login shell when empty) if there is none.
    fn get_or_start(
        self: &Arc<Self>,
        id: Uuid,
        command: &str,
        size: (u16, u16),
        logins: &Logins,
    ) -> Result<Arc<Pty>, String> {
        let mut ptys = self.ptys();
        if let Some(pty) = ptys.get(&id) {
            return Ok(pty.clone());
        }
        let login = logins.login(&Default::default()).ok_or(
            "the workspace agent has not received its manifest yet; try again in a moment",
        )?;
        let mut env = login.shell.env.clone();
        env.insert("TERM".into(), TERM.into());
        let command = Some(command).filter(|c| !c.trim().is_empty());
        let (cols, rows) = (size.0.max(1), size.1.max(1));
        let term = terminal::spawn(
            &login.shell.program,
            &Login::args(command),
            &env,
            &login.shell.dir,
            cols,
            rows,
        )
        .map_err(|e| format!("cannot start {}: {e}", login.shell.program.display()))?;
        let group = term.child.id();
        let pty = Arc::new(Pty {
            id,
            input: tokio::sync::Mutex::new(term.input),
            state: Mutex::new(State::default()),
            group,
            _guard: GroupGuard::new(group),
        });
        ptys.insert(id, pty.clone());
        tokio::spawn(self.clone().broadcast(pty.clone(), term.output, term.child));
        tracing::debug!(%id, "started a reconnecting PTY");
        Ok(pty)
    }

    /// Spreads the terminal's output to the ring and every attachment until the terminal
    /// ends, then forgets the PTY.
    async fn broadcast(
        self: Arc<Self>,
        pty: Arc<Pty>,
        mut output: terminal::Output,
        mut child: tokio::process::Child,
    ) {
        let mut buf = vec![0u8; 32 << 10];
        loop {
            let n = match output.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = Bytes::copy_from_slice(&buf[..n]);
            let mut state = pty.state();
            state.ring.extend(chunk.iter());
            let excess = state.ring.len().saturating_sub(RING);
            state.ring.drain(..excess);
            // A client too far behind is let go: it reconnects and gets the replay.
            state
                .clients
                .retain(|_, client| client.try_send(chunk.clone()).is_ok());
        }
        {
            let mut state = pty.state();
            state.closed = true;
            state.clients.clear();
        }
        self.forget(&pty);
        let _ = child.wait().await;
        tracing::debug!(id = %pty.id, "a reconnecting PTY ended");
    }

    fn forget(&self, pty: &Arc<Pty>) {
        let mut ptys = self.ptys();
        if ptys.get(&pty.id).is_some_and(|p| Arc::ptr_eq(p, pty)) {
            ptys.remove(&pty.id);
        }
    }

    /// Ends `pty` if no client came back within the timeout since the detach numbered
    /// `detached`.
    async fn expire(self: Arc<Self>, pty: Arc<Pty>, detached: u64) {
        tokio::time::sleep(self.timeout).await;
        {
            let state = pty.state();
            if state.closed || !state.clients.is_empty() || state.detached != detached {
                return;
            }
        }
        tracing::debug!(id = %pty.id, timeout = ?self.timeout, "closing an abandoned reconnecting PTY");
        self.forget(&pty);
        // A hangup first, as closing a terminal would, so that editors save their state.
        signal_group(pty.group, Signal::SIGHUP);
        tokio::time::sleep(HANGUP_GRACE).await;
        signal_group(pty.group, Signal::SIGKILL);
    }
}

impl Pty {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a client: what the terminal showed so far, and the live output from here on
    /// (taken under one lock, so nothing is lost or shown twice).
    fn subscribe(&self) -> Option<Subscription> {
        let mut state = self.state();
        if state.closed {
            return None;
        }
        let (tx, live) = mpsc::channel(BACKLOG);
        state.next_client += 1;
        let client = state.next_client;
        state.clients.insert(client, tx);
        Some(Subscription {
            client,
            replay: state.ring.iter().copied().collect(),
            live,
        })
    }

    /// Removes a client; the number of this detach when it was the last one.
    fn unsubscribe(&self, client: u64) -> Option<u64> {
        let mut state = self.state();
        state.clients.remove(&client);
        if state.clients.is_empty() && !state.closed {
            state.detached += 1;
            Some(state.detached)
        } else {
            None
        }
    }

    async fn resize(&self, cols: u16, rows: u16) {
        if cols == 0 || rows == 0 {
            return;
        }
        if let Err(error) = terminal::resize(&*self.input.lock().await, cols, rows) {
            tracing::debug!(id = %self.id, %error, "cannot resize a reconnecting PTY");
        }
    }
}

/// Serves one attachment (a `Pty` stream): output out, [`PtyInput`] frames in.
pub(crate) async fn attach(
    mut stream: StreamHandle,
    terminals: Arc<Terminals>,
    request: (Uuid, u16, u16, String),
    logins: Logins,
    stats: Arc<Stats>,
) {
    let (id, width, height, command) = request;
    let pty = match terminals.get_or_start(id, &command, (width, height), &logins) {
        Ok(pty) => pty,
        Err(reason) => return refuse(stream, reason).await,
    };
    pty.resize(width, height).await;
    let Some(subscription) = pty.subscribe() else {
        return refuse(stream, "the terminal has just ended".into()).await;
    };
    if accept(&mut stream).await.is_ok() {
        let _session = stats.session(SessionKind::ReconnectingPty);
        let _open = stats.connection("reconnecting_pty");
        let stream = Counted::client(stream, stats.clone());
        relay(stream, &pty, subscription.replay, subscription.live).await;
    }
    if let Some(detached) = pty.unsubscribe(subscription.client) {
        tokio::spawn(terminals.expire(pty, detached));
    }
}

/// Copies output to the client and its input to the terminal until either side ends.
async fn relay(
    stream: Counted<StreamHandle>,
    pty: &Pty,
    replay: Vec<u8>,
    mut live: mpsc::Receiver<Bytes>,
) {
    let (mut reader, mut writer) = tokio::io::split(stream);
    let output = async {
        writer.write_all(&replay).await?;
        while let Some(chunk) = live.recv().await {
            writer.write_all(&chunk).await?;
        }
        // The terminal ended (or left this client behind): so does the stream.
        writer.shutdown().await
    };
    let input = async {
        while let Some(message) = read_frame::<_, PtyInput>(&mut reader).await? {
            if !message.data.is_empty() {
                pty.input
                    .lock()
                    .await
                    .write_all(message.data.as_bytes())
                    .await?;
            }
            pty.resize(message.width, message.height).await;
        }
        Ok::<_, std::io::Error>(())
    };
    let ended = tokio::select! {
        result = output => result,
        result = input => result,
    };
    if let Err(error) = ended {
        tracing::debug!(id = %pty.id, %error, "a reconnecting PTY attachment ended with an error");
    }
}
