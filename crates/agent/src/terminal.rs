//! Pseudo-terminals for user sessions (SSH sessions that ask for one, and the web terminal's
//! reconnecting PTYs): the command runs as the leader of a new session with the terminal as
//! its controlling terminal, so job control, `^C` and window sizes work as in a local
//! terminal, and closing the terminal hangs the session up.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use pty_process::{OwnedReadPty, OwnedWritePty, Size};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::Child;

/// A command running on a terminal of its own.
pub(crate) struct Terminal {
    pub(crate) output: Output,
    /// Keystrokes in; also where the size is set.
    pub(crate) input: OwnedWritePty,
    pub(crate) child: Child,
}

/// A terminal not yet running anything.
pub(crate) struct Opened {
    pty: pty_process::Pty,
    pts: pty_process::Pts,
    /// The terminal device (`/dev/pts/N`), for `SSH_TTY`.
    pub(crate) path: Option<PathBuf>,
}

/// A new terminal of `cols`×`rows`.
pub(crate) fn open(cols: u16, rows: u16) -> io::Result<Opened> {
    let (pty, pts) = pty_process::open().map_err(into_io)?;
    pty.resize(size(cols, rows)).map_err(into_io)?;
    let path = std::fs::read_link(format!("/proc/self/fd/{}", pts.as_raw_fd())).ok();
    Ok(Opened { pty, pts, path })
}

impl Opened {
    /// Starts `program args…` on the terminal with exactly `env` in `dir`.
    pub(crate) fn start(
        self,
        program: &Path,
        args: &[String],
        env: &BTreeMap<String, String>,
        dir: &Path,
    ) -> io::Result<Terminal> {
        let child = pty_process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(env)
            .current_dir(dir)
            .spawn(self.pts)
            .map_err(into_io)?;
        let (output, input) = self.pty.into_split();
        Ok(Terminal {
            output: Output(output),
            input,
            child,
        })
    }
}

/// Starts `program args…` with exactly `env` in `dir` on a new terminal of `cols`×`rows`.
pub(crate) fn spawn(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    dir: &Path,
    cols: u16,
    rows: u16,
) -> io::Result<Terminal> {
    open(cols, rows)?.start(program, args, env, dir)
}

/// Sets the terminal's size; a zero dimension keeps the terminal usable (one cell).
pub(crate) fn resize(input: &OwnedWritePty, cols: u16, rows: u16) -> io::Result<()> {
    input.resize(size(cols, rows)).map_err(into_io)
}

fn size(cols: u16, rows: u16) -> Size {
    Size::new(rows.max(1), cols.max(1))
}

fn into_io(error: pty_process::Error) -> io::Error {
    match error {
        pty_process::Error::Io(error) => error,
        other => io::Error::other(other.to_string()),
    }
}

/// What the terminal shows. Linux reports the end of a terminal (every process holding it
/// gone) as EIO; this reads it as the end of the stream.
pub(crate) struct Output(OwnedReadPty);

impl AsyncRead for Output {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if e.raw_os_error() == Some(nix::libc::EIO) => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn commands_see_a_terminal_of_the_given_size() -> anyhow::Result<()> {
        let env: BTreeMap<String, String> =
            [("PATH".to_string(), "/usr/bin:/bin".to_string())].into();
        let mut term = spawn(
            Path::new("/bin/sh"),
            &["-c".into(), "read line; stty size; echo got $line".into()],
            &env,
            Path::new("/"),
            120,
            40,
        )?;
        term.input.write_all(b"hello\n").await?;
        let mut seen = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            term.output.read_to_end(&mut seen),
        )
        .await??;
        let seen = String::from_utf8_lossy(&seen);
        assert!(seen.contains("40 120"), "{seen}");
        assert!(
            open(80, 24)?
                .path
                .is_some_and(|p| p.starts_with("/dev/pts"))
        );
        assert!(seen.contains("got hello"), "{seen}");
        assert!(term.child.wait().await?.success());
        Ok(())
    }
}
