//! One SSH session channel, from its setup requests (env, pty-req, auth-agent-req) through
//! what it runs (shell, exec, the sftp subsystem) to its end: exit-status or exit-signal, end of
//! file, close. The client's data, end of file, window changes and signals reach the command
//! while it runs; when the client goes away first, the command's process group is hung up.
//!
//! As with sshd, what the command leaves running in the background outlives the session: IDE
//! installers start their servers with `nohup … &` over SSH and expect them to stay. Only a
//! client that leaves while the command still runs ends it (a hang-up to its group, then a
//! kill to the command alone).

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use russh::server::{Handle, Msg};
use russh::{Channel, ChannelId, ChannelMsg, ChannelReadHalf, Sig};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::forward::AgentSocket;
use super::process::{Input, PtyRequest, Reader, Running};
use crate::login::SESSION_TYPE_VARIABLE;
use crate::stats::SessionKind;
use crate::streams::Services;

/// The one subsystem the server has.
pub(super) const SFTP: &str = "sftp";
/// Coder's exit status for "the session failed" as opposed to "the command failed".
const SESSION_ERROR_STATUS: u32 = 229;
/// After a terminal's command exited, its output is read until it has been quiet this long:
/// a background job may hold the terminal open forever, and sshd does not wait for it either.
const TERMINAL_DRAIN: Duration = Duration::from_millis(100);
/// How long a command hung up by a departed client has to exit before it is killed.
const HANGUP_GRACE: Duration = Duration::from_secs(2);
const BUFFER: usize = 32 << 10;
/// How much of the client's input may wait for a command that is slow to read it. Past it,
/// russh's session loop waits too (and with it the whole connection): see [`feed`].
const INPUT_BUDGET: usize = 16 << 20;

/// What the client asked for before starting something.
#[derive(Default)]
struct Setup {
    env: BTreeMap<String, String>,
    pty: Option<PtyRequest>,
    agent_forwarding: bool,
    x11: Option<super::x11::Request>,
}

enum Start {
    Shell,
    Command(String),
    Sftp,
}

pub(super) async fn run(channel: Channel<Msg>, handle: Handle, services: Arc<Services>) {
    let id = channel.id();
    let (mut read, write) = channel.split();
    let mut setup = Setup::default();
    let start = loop {
        match read.wait().await {
            None | Some(ChannelMsg::Close) => return,
            Some(ChannelMsg::SetEnv {
                variable_name,
                variable_value,
                ..
            }) => {
                setup.env.insert(variable_name, variable_value);
            }
            Some(ChannelMsg::RequestPty {
                term,
                col_width,
                row_height,
                ..
            }) => {
                setup.pty = Some(PtyRequest {
                    term,
                    cols: clamp(col_width),
                    rows: clamp(row_height),
                });
            }
            Some(ChannelMsg::WindowChange {
                col_width,
                row_height,
                ..
            }) => {
                if let Some(pty) = setup.pty.as_mut() {
                    (pty.cols, pty.rows) = (clamp(col_width), clamp(row_height));
                }
            }
            Some(ChannelMsg::AgentForward { .. }) => setup.agent_forwarding = true,
            Some(ChannelMsg::RequestX11 {
                x11_authentication_protocol,
                x11_authentication_cookie,
                x11_screen_number,
                ..
            }) => {
                setup.x11 = Some(super::x11::Request {
                    protocol: x11_authentication_protocol,
                    cookie: x11_authentication_cookie,
                    screen: x11_screen_number,
                });
            }
            Some(ChannelMsg::RequestShell { .. }) => break Start::Shell,
            Some(ChannelMsg::Exec { command, .. }) => {
                break Start::Command(String::from_utf8_lossy(&command).into_owned());
            }
            Some(ChannelMsg::RequestSubsystem { name, .. }) if name == SFTP => break Start::Sftp,
            Some(ChannelMsg::RequestSubsystem { .. }) => {
                // Refused in the reply already; the client closes the channel.
            }
            Some(_) => {}
        }
    };
    let _counted = session_kind(&setup.env).map(|kind| services.stats.session(kind));

    let Some(mut login) = services.logins.login(&setup.env) else {
        return fail(&write, "the workspace agent has no manifest yet").await;
    };
    let _agent_socket = if setup.agent_forwarding {
        match AgentSocket::create(handle.clone()) {
            Ok(socket) => {
                login.shell.env.insert(
                    "SSH_AUTH_SOCK".into(),
                    socket.path().to_string_lossy().into_owned(),
                );
                Some(socket)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot create the socket for SSH agent forwarding");
                None
            }
        }
    } else {
        None
    };
    let _display = match &setup.x11 {
        Some(request) => {
            match super::x11::Display::create(handle.clone(), request, &login.shell).await {
                Ok(display) => {
                    login.shell.env.insert("DISPLAY".into(), display.variable());
                    Some(display)
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot set up X11 forwarding");
                    let _ = write
                        .extended_data_bytes(
                            1,
                            format!("X11 forwarding failed: {error}\r\n").into_bytes(),
                        )
                        .await;
                    None
                }
            }
        }
        None => None,
    };
    let started = match (&start, &setup.pty) {
        (Start::Sftp, _) => Ok(Running::sftp(&login).await),
        (Start::Shell, Some(pty)) => {
            let motd = login.motd();
            if !motd.is_empty() {
                let _ = write.data_bytes(motd).await;
            }
            Running::terminal(&login, None, pty)
        }
        (Start::Command(command), Some(pty)) => Running::terminal(&login, Some(command), pty),
        (Start::Shell, None) => Running::pipes(&login, None),
        (Start::Command(command), None) => Running::pipes(&login, Some(command)),
    };
    let running = match started {
        Ok(running) => running,
        Err(error) => {
            let message = format!("cannot start {}: {error}", login.shell.program.display());
            return fail(&write, &message).await;
        }
    };
    let status = pump(&mut read, &write, running).await;
    if let Some(status) = status {
        report_exit(&write, &handle, id, status).await;
    }
    let _ = write.close().await;
}

/// Runs the session until its command is done (its exit status) or the client goes (None).
async fn pump(
    read: &mut ChannelReadHalf,
    write: &russh::ChannelWriteHalf<Msg>,
    running: Running,
) -> Option<ExitStatus> {
    let terminal = running.is_terminal();
    let Running {
        mut input,
        output,
        errors,
        mut exit,
        group,
        mut guard,
    } = running;
    let (exited_tx, exited) = watch::channel(false);
    let outputs = async {
        let stdout = send_output(
            output,
            write.make_writer(),
            terminal.then(|| exited.clone()),
        );
        let stderr = async {
            if let Some(errors) = errors {
                send_output(errors, write.make_writer_ext(Some(1)), None).await;
            }
        };
        tokio::join!(stdout, stderr);
        let _ = write.eof().await;
    };
    let finished = async {
        let status = (&mut exit).await;
        let _ = exited_tx.send(true);
        status
    };
    let budget = Arc::new(Semaphore::new(INPUT_BUDGET));
    let (queue, queued) = mpsc::unbounded_channel();
    let client = async {
        loop {
            let event = match read.wait().await {
                Some(ChannelMsg::Data { data }) => {
                    // At most INPUT_BUDGET bytes wait for the command; a chunk larger than
                    // that (never, with OpenSSH's 32 KiB packets) waits for all of it.
                    let wanted = u32::try_from(data.len()).unwrap_or(u32::MAX);
                    let wanted = wanted.min(INPUT_BUDGET as u32);
                    let Ok(permit) = budget.clone().acquire_many_owned(wanted).await else {
                        return;
                    };
                    InputEvent::Data(data, permit)
                }
                Some(ChannelMsg::Eof) => InputEvent::Eof,
                Some(ChannelMsg::WindowChange {
                    col_width,
                    row_height,
                    ..
                }) => InputEvent::Resize(clamp(col_width), clamp(row_height)),
                Some(ChannelMsg::Signal { signal }) => {
                    match to_signal(&signal) {
                        Some(signal) => crate::process::signal_group(group, signal),
                        None => tracing::debug!(?signal, "ignoring an unknown signal"),
                    }
                    continue;
                }
                None | Some(ChannelMsg::Close) => return,
                Some(_) => continue,
            };
            if queue.send(event).is_err() {
                return;
            }
        }
    };
    let feeder = async {
        feed(queued, &mut input).await;
        std::future::pending::<()>().await;
    };
    let done = async { tokio::join!(finished, outputs).0 };
    tokio::select! {
        status = done => match status {
            Ok(status) => {
                // The command is done; its background children are not ours to end.
                guard.disarm();
                Some(status)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot wait for an SSH session's command");
                None
            }
        },
        () = feeder => None,
        () = client => {
            // The client is gone: hang the command up as a closed terminal would, and give it
            // a moment to save its state before the command itself is killed. What ignores
            // the hang-up (`nohup`) stays, as under sshd.
            crate::process::signal_group(group, Signal::SIGHUP);
            if tokio::time::timeout(HANGUP_GRACE, &mut exit).await.is_err() {
                crate::process::signal_process(group, Signal::SIGKILL);
            }
            guard.disarm();
            None
        }
    }
}

/// What the client sent, in order, for the command.
enum InputEvent {
    /// Holds its share of the input budget until written.
    Data(bytes::Bytes, OwnedSemaphorePermit),
    Eof,
    Resize(u16, u16),
}

/// Writes the client's input to the command. It runs apart from the reading of the channel
/// so that a command slow to read never stops russh's session loop, which also carries the
/// client's window adjustments for the command's output: a `cat` of a large file both ways
/// would otherwise stall for good (russh grants window as data arrives, not as it is used).
async fn feed(mut queued: mpsc::UnboundedReceiver<InputEvent>, input: &mut Input) {
    let mut reading = true;
    while let Some(event) = queued.recv().await {
        match event {
            InputEvent::Data(data, _permit) => {
                if reading && let Err(error) = input.write_all(&data).await {
                    // The command stopped reading; what the client sends is dropped from
                    // now on, as a closed pipe would.
                    tracing::trace!(%error, "an SSH session's command stopped reading");
                    reading = false;
                }
            }
            InputEvent::Eof => input.close().await,
            InputEvent::Resize(cols, rows) => input.resize(cols, rows),
        }
    }
}

/// Copies a command's output to the channel. With `exited` (a terminal's output), once the
/// command has exited the output is read only until it goes quiet.
async fn send_output(
    mut from: Reader,
    mut to: impl AsyncWrite + Unpin,
    exited: Option<watch::Receiver<bool>>,
) {
    let mut buf = vec![0u8; BUFFER];
    let mut exited = exited;
    loop {
        let read = match exited.as_mut() {
            Some(flag) if *flag.borrow() => {
                match tokio::time::timeout(TERMINAL_DRAIN, from.read(&mut buf)).await {
                    Ok(read) => read,
                    Err(_) => return,
                }
            }
            Some(flag) => {
                tokio::select! {
                    read = from.read(&mut buf) => read,
                    // `read` is cancel-safe: nothing is lost by starting over.
                    _ = flag.changed() => continue,
                }
            }
            None => from.read(&mut buf).await,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// exit-status for an exit code, exit-signal for a signal, as sshd reports them.
async fn report_exit(
    write: &russh::ChannelWriteHalf<Msg>,
    handle: &Handle,
    id: ChannelId,
    status: ExitStatus,
) {
    if let Some(code) = status.code() {
        let _ = write.exit_status(u32::try_from(code).unwrap_or(255)).await;
    } else if let Some(number) = status.signal() {
        let signal = Signal::try_from(number)
            .map(to_sig)
            .unwrap_or_else(|_| Sig::Custom(number.to_string()));
        let _ = handle
            .exit_signal_request(
                id,
                signal,
                status.core_dumped(),
                String::new(),
                String::new(),
            )
            .await;
    } else {
        let _ = write.exit_status(255).await;
    }
}

/// Tells the client why its session could not run, and ends it with Coder's session error
/// status.
async fn fail(write: &russh::ChannelWriteHalf<Msg>, message: &str) {
    tracing::warn!(message, "an SSH session could not start");
    let _ = write
        .extended_data_bytes(1, format!("{message}\r\n").into_bytes())
        .await;
    let _ = write.eof().await;
    let _ = write.exit_status(SESSION_ERROR_STATUS).await;
    let _ = write.close().await;
}

/// How stats count a session: as Coder's editor plugins declare it, else `ssh`. JetBrains
/// sessions are not counted one by one (Gateway opens hundreds); its IDE tunnel counts once.
fn session_kind(env: &BTreeMap<String, String>) -> Option<SessionKind> {
    match env
        .get(SESSION_TYPE_VARIABLE)
        .map(|t| t.to_ascii_lowercase())
        .as_deref()
    {
        Some("vscode") => Some(SessionKind::Vscode),
        Some("jetbrains") => None,
        _ => Some(SessionKind::Ssh),
    }
}

fn clamp(cells: u32) -> u16 {
    u16::try_from(cells).unwrap_or(u16::MAX)
}

fn to_signal(signal: &Sig) -> Option<Signal> {
    Some(match signal {
        Sig::ABRT => Signal::SIGABRT,
        Sig::ALRM => Signal::SIGALRM,
        Sig::FPE => Signal::SIGFPE,
        Sig::HUP => Signal::SIGHUP,
        Sig::ILL => Signal::SIGILL,
        Sig::INT => Signal::SIGINT,
        Sig::KILL => Signal::SIGKILL,
        Sig::PIPE => Signal::SIGPIPE,
        Sig::QUIT => Signal::SIGQUIT,
        Sig::SEGV => Signal::SIGSEGV,
        Sig::TERM => Signal::SIGTERM,
        Sig::USR1 => Signal::SIGUSR1,
        Sig::Custom(name) => return Signal::from_str(&format!("SIG{name}")).ok(),
    })
}

fn to_sig(signal: Signal) -> Sig {
    match signal {
        Signal::SIGABRT => Sig::ABRT,
        Signal::SIGALRM => Sig::ALRM,
        Signal::SIGFPE => Sig::FPE,
        Signal::SIGHUP => Sig::HUP,
        Signal::SIGILL => Sig::ILL,
        Signal::SIGINT => Sig::INT,
        Signal::SIGKILL => Sig::KILL,
        Signal::SIGPIPE => Sig::PIPE,
        Signal::SIGQUIT => Sig::QUIT,
        Signal::SIGSEGV => Sig::SEGV,
        Signal::SIGTERM => Sig::TERM,
        Signal::SIGUSR1 => Sig::USR1,
        other => Sig::Custom(other.as_str().trim_start_matches("SIG").to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_both_ways_by_name() {
        for signal in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGUSR2,
            Signal::SIGWINCH,
        ] {
            assert_eq!(to_signal(&to_sig(signal)), Some(signal));
        }
        assert_eq!(to_signal(&Sig::Custom("NOPE".into())), None);
    }

    #[test]
    fn editors_declare_their_sessions() {
        let env = |v: &str| BTreeMap::from([(SESSION_TYPE_VARIABLE.to_string(), v.to_string())]);
        assert_eq!(session_kind(&env("VSCode")), Some(SessionKind::Vscode));
        assert_eq!(session_kind(&env("jetbrains")), None);
        assert_eq!(session_kind(&BTreeMap::new()), Some(SessionKind::Ssh));
    }
}
