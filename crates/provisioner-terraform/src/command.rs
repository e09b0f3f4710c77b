//! Running one terraform command for a job: its output becomes log lines (or is captured, for
//! `show` and `graph`), its duration a [`Timing`], and a cancelled job interrupts it the way a
//! person at a terminal would — SIGINT, so terraform stops its providers and provisioners and
//! saves its state — and kills it if it has not stopped after a grace period.
//!
//! Terraform runs in a process group of its own: a Ctrl-C meant for the daemon does not reach
//! it, and the kill after the grace period takes its providers and provisioner commands with it.
//! (Processes a template deliberately detaches into a session of their own survive, which is
//! how a template leaves a workspace process running.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use chrono::Utc;
use codersdk::provisionerd::{LogLevel, Timing};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::executor::JobLogs;
use crate::ui::{self, InitFilter, Rendered};

/// How long output still arriving after terraform exited is read: a process the template
/// started in the background may hold terraform's pipes open for ever.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(5);
/// Error diagnostics (or stderr lines) kept for a failed command's message.
const KEPT_ERRORS: usize = 10;
/// The longest error message a failed command produces.
const MAX_MESSAGE_BYTES: usize = 4096;

/// What happens to a command's standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// `-json` UI messages, logged.
    Json,
    /// `apply -json` of a saved plan: logged, with the plan's repeated changes at debug level.
    ApplyJson,
    /// Text, logged (`init`).
    Text,
    /// Kept and returned (`show -json`, `graph`, `version -json`).
    Capture,
}

/// One terraform invocation.
#[derive(Debug)]
pub(crate) struct Command<'a> {
    pub args: Vec<String>,
    /// The command line as it may be shown: sensitive values replaced.
    pub shown: String,
    /// Where its log lines go.
    pub log_stage: &'a str,
    /// Its timing's stage (`init`, `plan`, `graph`, `apply`).
    pub timing_stage: &'static str,
    pub output: Output,
}

/// Runs a job's commands in its work directory and collects their timings.
pub(crate) struct Runner<'a> {
    pub binary: PathBuf,
    pub workdir: &'a Path,
    pub logs: &'a dyn JobLogs,
    pub cancel: &'a CancellationToken,
    /// How long terraform may take to stop after SIGINT before it is killed.
    pub grace: Duration,
    pub timings: Vec<Timing>,
}

/// A stream of lines that tolerates invalid UTF-8 and whose `next` may be cancelled (a partial
/// line stays in the buffer).
struct Lines<R> {
    reader: BufReader<R>,
    buf: Vec<u8>,
    done: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(reader: Option<R>) -> Option<Self> {
        reader.map(|r| Self {
            reader: BufReader::new(r),
            buf: Vec::new(),
            done: false,
        })
    }

    async fn next(&mut self) -> Option<String> {
        let read = self.reader.read_until(b'\n', &mut self.buf).await;
        if !matches!(read, Ok(n) if n > 0) {
            self.done = true;
        }
        if self.buf.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.buf)
            .trim_end_matches(['\n', '\r'])
            .to_owned();
        self.buf.clear();
        Some(line)
    }
}

/// What a finished command printed besides its logs.
struct Collected {
    captured: Vec<u8>,
    errors: Vec<String>,
    stderr_tail: Vec<String>,
    init: InitFilter,
}

impl Collected {
    fn stdout(&mut self, line: &str, command: &Command<'_>, logs: &dyn JobLogs) {
        let rendered = match command.output {
            Output::Capture => {
                self.captured.extend_from_slice(line.as_bytes());
                self.captured.push(b'\n');
                return;
            }
            Output::Json => ui::json_line(line, false),
            Output::ApplyJson => ui::json_line(line, true),
            Output::Text => match self.init.level(line) {
                Some(level) => ui::text_line(line, level),
                None => return,
            },
        };
        self.log(rendered, command.log_stage, logs);
    }

    fn stderr(&mut self, line: &str, stage: &str, logs: &dyn JobLogs) {
        if line.trim().is_empty() {
            return;
        }
        if self.stderr_tail.len() == KEPT_ERRORS {
            self.stderr_tail.remove(0);
        }
        self.stderr_tail.push(line.trim().to_owned());
        self.log(ui::text_line(line, LogLevel::Error), stage, logs);
    }

    fn log(&mut self, rendered: Rendered, stage: &str, logs: &dyn JobLogs) {
        for line in &rendered.lines {
            logs.log(rendered.level, stage, line);
        }
        if let Some(error) = rendered.error
            && !self.errors.contains(&error)
            && self.errors.len() < KEPT_ERRORS
        {
            self.errors.push(error);
        }
    }

    /// Why the command failed: its error diagnostics, else the end of its stderr.
    fn message(&self, status: ExitStatus) -> String {
        let mut message = if !self.errors.is_empty() {
            self.errors.join("; ")
        } else if !self.stderr_tail.is_empty() {
            self.stderr_tail.join("\n")
        } else {
            format!("terraform exited with {status}")
        };
        if message.len() > MAX_MESSAGE_BYTES {
            let mut end = MAX_MESSAGE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        message
    }
}

impl<'a> Runner<'a> {
    /// A runner for a command that runs alongside this runner's: the same binary, directory,
    /// logs and cancellation, its own timings (for [`Self::absorb`]).
    pub(crate) fn sibling(&self) -> Runner<'a> {
        Runner {
            binary: self.binary.clone(),
            workdir: self.workdir,
            logs: self.logs,
            cancel: self.cancel,
            grace: self.grace,
            timings: Vec::new(),
        }
    }

    /// Takes over the timings of a [`Self::sibling`], in the order the commands started.
    pub(crate) fn absorb(&mut self, sibling: Runner<'_>) {
        self.timings.extend(sibling.timings);
        self.timings.sort_by_key(|t| t.started_at);
    }

    /// Runs `command` with exactly `env`; returns its captured output.
    pub(crate) async fn run(
        &mut self,
        command: &Command<'_>,
        env: &[(OsString, OsString)],
    ) -> Result<Vec<u8>, Error> {
        if self.cancel.is_cancelled() {
            return Err(Error::Canceled);
        }
        self.logs.log(
            LogLevel::Debug,
            command.log_stage,
            &format!("Running {}", command.shown),
        );
        tracing::debug!(command = %command.shown, "running terraform");
        let started = Utc::now();
        let result = self.execute(command, env).await;
        self.timings.push(Timing {
            stage: command.timing_stage.to_owned(),
            started_at: started,
            ended_at: Utc::now(),
            source: "terraform".to_owned(),
            action: command.args.first().cloned().unwrap_or_default(),
            resource: String::new(),
        });
        result
    }

    async fn execute(
        &self,
        command: &Command<'_>,
        env: &[(OsString, OsString)],
    ) -> Result<Vec<u8>, Error> {
        let mut child = tokio::process::Command::new(&self.binary)
            .args(&command.args)
            .current_dir(self.workdir)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                command: command.shown.clone(),
                source,
            })?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let mut stdout = Lines::new(child.stdout.take());
        let mut stderr = Lines::new(child.stderr.take());
        let mut collected = Collected {
            captured: Vec::new(),
            errors: Vec::new(),
            stderr_tail: Vec::new(),
            init: InitFilter::default(),
        };

        let mut exit: Option<ExitStatus> = None;
        let mut interrupted = false;
        let mut kill_at: Option<Instant> = None;
        let mut drain_until: Option<Instant> = None;
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let status = loop {
            let out_open = stdout.as_ref().is_some_and(|s| !s.done);
            let err_open = stderr.as_ref().is_some_and(|s| !s.done);
            if let Some(status) = exit
                && !out_open
                && !err_open
            {
                break status;
            }
            tokio::select! {
                line = next_line(&mut stdout), if out_open => {
                    if let Some(line) = line {
                        collected.stdout(&line, command, self.logs);
                    }
                }
                line = next_line(&mut stderr), if err_open => {
                    if let Some(line) = line {
                        collected.stderr(&line, command.log_stage, self.logs);
                    }
                }
                exited = child.wait(), if exit.is_none() => {
                    exit = Some(exited.map_err(|source| Error::Spawn {
                        command: command.shown.clone(),
                        source,
                    })?);
                    drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
                }
                () = self.cancel.cancelled(), if !interrupted && exit.is_none() => {
                    interrupted = true;
                    kill_at = Some(Instant::now() + self.grace);
                    self.logs.log(
                        LogLevel::Warn,
                        command.log_stage,
                        "Interrupting terraform: the job was canceled",
                    );
                    if let Some(pid) = pid {
                        let _ = kill(pid, Signal::SIGINT);
                    }
                }
                () = tokio::time::sleep_until(kill_at.unwrap_or(far)), if kill_at.is_some() && exit.is_none() => {
                    kill_at = None;
                    self.logs.log(
                        LogLevel::Warn,
                        command.log_stage,
                        &format!(
                            "Killing terraform: it did not stop within {}s of the interrupt",
                            self.grace.as_secs_f64()
                        ),
                    );
                    if let Some(pid) = pid {
                        let _ = killpg(pid, Signal::SIGKILL);
                    }
                }
                () = tokio::time::sleep_until(drain_until.unwrap_or(far)), if drain_until.is_some() => {
                    if let Some(status) = exit {
                        tracing::warn!(
                            command = %command.shown,
                            "terraform exited but something kept its output open; stopped reading it"
                        );
                        break status;
                    }
                }
            }
        };

        if status.success() {
            return Ok(collected.captured);
        }
        if interrupted {
            return Err(Error::Canceled);
        }
        Err(Error::Failed {
            command: command.shown.clone(),
            message: collected.message(status),
        })
    }
}

async fn next_line<R: AsyncRead + Unpin>(lines: &mut Option<Lines<R>>) -> Option<String> {
    match lines {
        Some(lines) => lines.next().await,
        None => None,
    }
}
