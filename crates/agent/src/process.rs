//! Commands run through the user's shell, each in a process group of its own so that an
//! interrupt or a kill reaches everything a script started, not only the shell.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

/// How the agent runs a piece of shell: `<program> -c <script>` with `env` (and nothing
/// else) in `dir`.
#[derive(Debug, Clone)]
pub(crate) struct ShellCommand {
    pub(crate) program: PathBuf,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) dir: PathBuf,
}

impl ShellCommand {
    /// Starts `script` with stdout and stderr piped separately and no input, leading a new
    /// process group.
    pub(crate) fn spawn(&self, script: &str, extra_env: &[(&str, String)]) -> io::Result<Child> {
        self.command(script, extra_env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    }

    /// Starts `script` with stdout and stderr on one pipe, interleaved as a terminal would
    /// show them.
    pub(crate) fn spawn_combined(&self, script: &str) -> io::Result<(Child, pipe::Receiver)> {
        let (reader, writer) = io::pipe()?;
        // The command holds the only writing ends; it is dropped on return, so the pipe ends
        // when the script and whatever inherited its output are gone.
        let child = self
            .command(script, &[])
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .spawn()?;
        let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
        Ok((child, reader))
    }

    fn command(&self, script: &str, extra_env: &[(&str, String)]) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg("-c")
            .arg(script)
            .env_clear()
            .envs(&self.env)
            .envs(extra_env.iter().map(|(k, v)| (*k, v)))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .process_group(0);
        command
    }
}

/// Signals the process group `child` leads. Best effort: the group may be gone already.
pub(crate) fn signal_group(child: Option<u32>, signal: Signal) {
    send(child, signal, nix::sys::signal::killpg, "process group");
}

/// Signals the process `child` alone, not its group. Best effort: it may be gone already.
pub(crate) fn signal_process(child: Option<u32>, signal: Signal) {
    send(child, signal, nix::sys::signal::kill, "process");
}

fn send(
    child: Option<u32>,
    signal: Signal,
    deliver: fn(Pid, Signal) -> nix::Result<()>,
    what: &str,
) {
    let Some(pid) = child.and_then(|pid| i32::try_from(pid).ok()) else {
        return;
    };
    if let Err(error) = deliver(Pid::from_raw(pid), signal)
        && error != nix::errno::Errno::ESRCH
    {
        tracing::debug!(pid, %signal, %error, "cannot signal a {what}");
    }
}

/// Kills a process group when dropped, unless disarmed, so that a run abandoned midway (its
/// future dropped) leaves no processes behind.
pub(crate) struct GroupGuard(Option<u32>);

impl GroupGuard {
    pub(crate) fn new(child: Option<u32>) -> Self {
        Self(child)
    }

    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        signal_group(self.0, Signal::SIGKILL);
    }
}

/// `exit status 3` / `killed by signal 9`, for logs and metadata errors.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(number)) => {
            let name =
                Signal::try_from(number).map_or_else(|_| number.to_string(), |s| s.to_string());
            format!("killed by signal {name}")
        }
        (None, None) => "ended without an exit status".into(),
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    fn sh() -> ShellCommand {
        ShellCommand {
            program: "/bin/sh".into(),
            env: [("ONLY", "this")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dir: std::env::temp_dir(),
        }
    }

    #[tokio::test]
    async fn runs_with_exactly_the_given_environment() -> anyhow::Result<()> {
        let child = sh().spawn(
            "echo \"$ONLY $EXTRA ${HOME:-nohome}\"; pwd",
            &[("EXTRA", "too".into())],
        )?;
        let out = child.wait_with_output().await?;
        let text = String::from_utf8(out.stdout)?;
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("this too nohome"));
        assert_eq!(
            lines
                .next()
                .map(PathBuf::from)
                .map(std::fs::canonicalize)
                .transpose()?,
            Some(std::fs::canonicalize(std::env::temp_dir())?)
        );
        Ok(())
    }

    #[tokio::test]
    async fn group_signals_reach_grandchildren() -> anyhow::Result<()> {
        let mut child = sh().spawn("sleep 30 & sleep 30; echo not reached", &[])?;
        let pid = child.id();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        signal_group(pid, Signal::SIGKILL);
        let status = child.wait().await?;
        assert_eq!(describe_exit(status), "killed by signal SIGKILL");
        // The backgrounded sleep held stdout; it died with the group, so the pipe closes.
        let mut stdout = child.stdout.take().context("stdout is piped")?;
        let mut rest = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut rest),
        )
        .await??;
        assert_eq!(rest, "");
        signal_group(pid, Signal::SIGKILL);
        signal_group(None, Signal::SIGKILL);
        Ok(())
    }
}
