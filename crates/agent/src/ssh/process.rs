//! What an SSH session runs, as one shape whatever it is: a command on a terminal, a command
//! on pipes, or the built-in sftp server. Each has an input, an output (and maybe an error
//! output) and an exit.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use futures::future::BoxFuture;
use pty_process::OwnedWritePty;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};

use crate::login::Login;
use crate::process::GroupGuard;
use crate::terminal;

/// How much sftp traffic is buffered between the channel and the sftp server.
const SFTP_BUFFER: usize = 256 << 10;

/// A terminal the client asked for (`pty-req`).
#[derive(Debug, Clone)]
pub(super) struct PtyRequest {
    pub(super) term: String,
    pub(super) cols: u16,
    pub(super) rows: u16,
}

pub(super) enum Input {
    Terminal(OwnedWritePty),
    Pipe(Option<ChildStdin>),
    Sftp(Option<tokio::io::WriteHalf<tokio::io::DuplexStream>>),
}

pub(super) type Reader = Box<dyn AsyncRead + Send + Unpin>;

pub(super) struct Running {
    pub(super) input: Input,
    pub(super) output: Reader,
    pub(super) errors: Option<Reader>,
    pub(super) exit: BoxFuture<'static, io::Result<ExitStatus>>,
    /// The process group (the command leads it), for signals.
    pub(super) group: Option<u32>,
    /// Kills what is left of the group if the session is dropped midway (the agent shutting
    /// down); disarmed when the session ends in order.
    pub(super) guard: GroupGuard,
}

impl Running {
    /// `command` (a login shell when `None`) on a terminal.
    pub(super) fn terminal(
        login: &Login,
        command: Option<&str>,
        pty: &PtyRequest,
    ) -> io::Result<Self> {
        let mut env = login.shell.env.clone();
        env.insert("TERM".into(), pty.term.clone());
        let opened = terminal::open(pty.cols, pty.rows)?;
        if let Some(path) = &opened.path {
            env.insert("SSH_TTY".into(), path.to_string_lossy().into_owned());
        }
        let term = opened.start(
            &login.shell.program,
            &Login::args(command),
            &env,
            &login.shell.dir,
        )?;
        let group = term.child.id();
        let mut child = term.child;
        Ok(Self {
            input: Input::Terminal(term.input),
            output: Box::new(term.output),
            errors: None,
            exit: Box::pin(async move { child.wait().await }),
            group,
            guard: GroupGuard::new(group),
        })
    }

    /// `command` (a login shell when `None`) with its standard streams on pipes.
    pub(super) fn pipes(login: &Login, command: Option<&str>) -> io::Result<Self> {
        let mut child = Command::new(&login.shell.program)
            .args(Login::args(command))
            .env_clear()
            .envs(&login.shell.env)
            .current_dir(&login.shell.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let group = child.id();
        let missing = || io::Error::other("a piped stream of the command is missing");
        let input = child.stdin.take().ok_or_else(missing)?;
        let output = child.stdout.take().ok_or_else(missing)?;
        let errors = child.stderr.take().ok_or_else(missing)?;
        Ok(Self {
            input: Input::Pipe(Some(input)),
            output: Box::new(output),
            errors: Some(Box::new(errors)),
            exit: Box::pin(async move { child.wait().await }),
            group,
            guard: GroupGuard::new(group),
        })
    }

    /// The built-in sftp server, rooted at the user's home directory; it "exits" with 0 once
    /// the client has ended the conversation.
    pub(super) async fn sftp(login: &Login) -> Self {
        let (ours, theirs) = tokio::io::duplex(SFTP_BUFFER);
        let home = login
            .home
            .clone()
            .unwrap_or_else(|| login.shell.dir.clone());
        russh_sftp::server::run(theirs, super::sftp::Files::new(home)).await;
        let (output, input) = tokio::io::split(ours);
        Self {
            input: Input::Sftp(Some(input)),
            output: Box::new(output),
            errors: None,
            exit: Box::pin(async { Ok(ExitStatus::from_raw(0)) }),
            group: None,
            guard: GroupGuard::new(None),
        }
    }

    pub(super) fn is_terminal(&self) -> bool {
        matches!(self.input, Input::Terminal(_))
    }
}

impl Input {
    pub(super) async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Self::Terminal(w) => w.write_all(data).await,
            Self::Pipe(Some(w)) => w.write_all(data).await,
            Self::Sftp(Some(w)) => w.write_all(data).await,
            // The client sent data after its end of file: nobody reads it.
            Self::Pipe(None) | Self::Sftp(None) => Ok(()),
        }
    }

    /// The client's end of file: the command's input closes. A terminal has no end of
    /// input (sshd ignores it too); the user types `^D`.
    pub(super) async fn close(&mut self) {
        match self {
            Self::Terminal(_) => {}
            Self::Pipe(w) => {
                if let Some(mut w) = w.take() {
                    let _ = w.shutdown().await;
                }
            }
            Self::Sftp(w) => {
                if let Some(mut w) = w.take() {
                    let _ = w.shutdown().await;
                }
            }
        }
    }

    pub(super) fn resize(&self, cols: u16, rows: u16) {
        if let Self::Terminal(w) = self
            && let Err(error) = terminal::resize(w, cols, rows)
        {
            tracing::debug!(%error, "cannot resize an SSH session's terminal");
        }
    }
}
