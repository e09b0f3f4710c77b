//! One run of one script: start it in its own process group, copy its output, enforce its
//! timeout (hang up, then kill after a grace), and judge how it ended.

use std::future::pending;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio_util::sync::CancellationToken;

use super::Outcome;
use super::output::ScriptOutput;
use crate::process::{GroupGuard, ShellCommand, describe_exit, signal_group};

/// How long the runner waits at each step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Graces {
    /// From the hang-up to the kill.
    pub(crate) kill: Duration,
    /// From the exit to giving up on the output pipes.
    pub(crate) pipes: Duration,
}

/// The tasks copying a script's output; done once both pipes reached end of file.
struct Pumps(Option<tokio::task::JoinHandle<()>>);

impl Pumps {
    /// Whether the output ended (now or before) by `deadline`.
    async fn wait_until(&mut self, deadline: tokio::time::Instant) -> bool {
        let Some(handle) = &mut self.0 else {
            return true;
        };
        let ended = tokio::time::timeout_at(deadline, handle).await.is_ok();
        if ended {
            self.0 = None;
        }
        ended
    }

    fn abandon(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

/// Why the runner stopped a script before it ended.
enum Stop {
    TimedOut(Duration),
    Interrupted,
}

pub(crate) async fn run(
    shell: &ShellCommand,
    script: &str,
    extra_env: &[(&str, String)],
    timeout: Option<Duration>,
    output: &ScriptOutput,
    graces: Graces,
    cancel: &CancellationToken,
) -> (Outcome, i32) {
    let mut child = match shell.spawn(script, extra_env) {
        Ok(child) => child,
        Err(error) => {
            let message = format!(
                "cannot start the script with {} in {}: {error}",
                shell.program.display(),
                shell.dir.display()
            );
            output.note("error", &message).await;
            return (Outcome::Failed, -1);
        }
    };
    let pid = child.id();
    let mut guard = GroupGuard::new(pid);
    let mut pumps = {
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let output = output.clone();
        Pumps(Some(tokio::spawn(async move {
            let out = async {
                if let Some(stdout) = stdout {
                    output.pump(stdout, "info").await;
                }
            };
            let err = async {
                if let Some(stderr) = stderr {
                    output.pump(stderr, "error").await;
                }
            };
            tokio::join!(out, err);
        })))
    };

    let deadline = async {
        match timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => pending().await,
        }
    };
    let stop = tokio::select! {
        status = child.wait() => Ok(status),
        () = deadline => Err(Stop::TimedOut(timeout.unwrap_or_default())),
        () = cancel.cancelled() => Err(Stop::Interrupted),
    };

    let status = match stop {
        Ok(status) => {
            // It ended by itself; what it left running in the background is the user's.
            guard.disarm();
            status
        }
        Err(reason) => {
            // Hang up on the whole group, as a closing terminal would; if anything is still
            // running (or holding the output) after the grace, the group is killed.
            signal_group(pid, Signal::SIGHUP);
            let grace_ends = tokio::time::Instant::now() + graces.kill;
            let exited = tokio::time::timeout_at(grace_ends, child.wait())
                .await
                .is_ok();
            if !(exited && pumps.wait_until(grace_ends).await) {
                signal_group(pid, Signal::SIGKILL);
            }
            let _ = child.wait().await;
            pumps
                .wait_until(tokio::time::Instant::now() + graces.pipes)
                .await;
            pumps.abandon();
            let outcome = match reason {
                Stop::TimedOut(limit) => {
                    let message = format!(
                        "the script timed out after {}s and was stopped",
                        limit.as_secs_f64()
                    );
                    output.note("error", &message).await;
                    Outcome::TimedOut
                }
                Stop::Interrupted => {
                    output
                        .note("warn", "the script was stopped: the agent is shutting down")
                        .await;
                    Outcome::Interrupted
                }
            };
            return (outcome, -1);
        }
    };

    let pipes_closed = pumps
        .wait_until(tokio::time::Instant::now() + graces.pipes)
        .await;
    // Dropping our ends makes the holder's next write fail instead of blocking forever.
    pumps.abandon();
    let code = status.as_ref().ok().and_then(|s| s.code()).unwrap_or(-1);
    let outcome = match status {
        Ok(status) if !status.success() => {
            output
                .note(
                    "error",
                    &format!("the script failed: {}", describe_exit(status)),
                )
                .await;
            Outcome::Failed
        }
        Ok(_) if !pipes_closed => {
            let message = format!(
                "the script exited, but its output was still held open {}s later, usually by a \
                 background process it started; redirect that process's output (for example \
                 `cmd >/tmp/cmd.log 2>&1 &`) or run it as a separate script",
                graces.pipes.as_secs_f64()
            );
            output.note("error", &message).await;
            Outcome::PipesHeldOpen
        }
        Ok(_) => Outcome::Succeeded,
        Err(error) => {
            output
                .note("error", &format!("cannot wait for the script: {error}"))
                .await;
            Outcome::Failed
        }
    };
    (outcome, code)
}
