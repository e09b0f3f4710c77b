//! Metadata: each description's script runs every `interval` seconds (once, for an interval of
//! 0) with its timeout; its output (stdout and stderr together, as in a terminal) becomes the
//! key's value. The latest value per key goes to the reporter, which sends what changed in one
//! batch per second.

use std::time::{Duration, Instant};

use chrono::Utc;
use codersdk::agentsdk::{MAX_METADATA_VALUE, MetadataDescription, MetadataValue};
use futures::future::join_all;
use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::process::{GroupGuard, ShellCommand, describe_exit, signal_group};
use crate::reporter::Reporter;

/// Output kept from one run, as Coder's agent keeps; the value sent is cut further.
const CAPTURE_LIMIT: usize = 10 * 1024;
/// The timeout of a description that names neither a timeout nor an interval.
const FALLBACK_TIMEOUT: Duration = Duration::from_secs(3);
/// After a kill, how long to wait for the rest of the output.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(1);

/// Collects every description on its interval until `cancel`.
pub(crate) async fn collect_all(
    shell: &ShellCommand,
    descriptions: &[MetadataDescription],
    reporter: &Reporter,
    cancel: &CancellationToken,
) {
    join_all(
        descriptions
            .iter()
            .map(|d| collect_on_interval(shell, d, reporter, cancel)),
    )
    .await;
}

async fn collect_on_interval(
    shell: &ShellCommand,
    description: &MetadataDescription,
    reporter: &Reporter,
    cancel: &CancellationToken,
) {
    let seconds = |s: i64| Duration::from_secs(u64::try_from(s).unwrap_or(0));
    let interval = seconds(description.interval_seconds);
    let timeout = [seconds(description.timeout_seconds), interval]
        .into_iter()
        .find(|d| !d.is_zero())
        .unwrap_or(FALLBACK_TIMEOUT);
    // A slow script delays the next run instead of piling runs up.
    let mut ticks = tokio::time::interval(interval.max(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let value = tokio::select! {
            () = cancel.cancelled() => return,
            value = collect(shell, &description.key, &description.script, timeout) => value,
        };
        if !value.error.is_empty() {
            tracing::debug!(key = %value.key, error = %value.error, "metadata script failed");
        }
        reporter.set_metadata(value);
        if interval.is_zero() {
            return;
        }
    }
}

/// Output read so far and how much there was in all.
#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    total: usize,
}

/// Runs one metadata script and turns its result into a value.
pub(crate) async fn collect(
    shell: &ShellCommand,
    key: &str,
    script: &str,
    timeout: Duration,
) -> MetadataValue {
    let collected_at = Utc::now();
    let started = Instant::now();
    let mut errors = Vec::new();
    let mut captured = Captured::default();
    match shell.spawn_combined(script) {
        Err(error) => errors.push(format!("cannot start {}: {error}", shell.program.display())),
        Ok((mut child, output)) => {
            let pid = child.id();
            let mut guard = GroupGuard::new(pid);
            let mut read = std::pin::pin!(capture(output, &mut captured));
            // Read while waiting: a script writing more than a pipe holds would otherwise
            // block until its timeout.
            let mut read_done = false;
            let finished = tokio::time::timeout(timeout, async {
                let read = async {
                    (&mut read).await;
                    read_done = true;
                };
                tokio::join!(child.wait(), read).0
            })
            .await;
            match finished {
                Ok(Ok(status)) if !status.success() => {
                    guard.disarm();
                    errors.push(describe_exit(status));
                }
                Ok(Ok(_)) => guard.disarm(),
                Ok(Err(error)) => errors.push(format!("cannot wait for the script: {error}")),
                Err(_) => {
                    signal_group(pid, Signal::SIGKILL);
                    let _ = child.wait().await;
                    if !read_done {
                        let _ = tokio::time::timeout(DRAIN_AFTER_KILL, read).await;
                    }
                    errors.push(format!("timed out after {}s", timeout.as_secs_f64()));
                }
            }
        }
    }
    if captured.total > captured.kept.len() {
        errors.push(format!(
            "output truncated from {} to {} bytes",
            captured.total,
            captured.kept.len()
        ));
    }
    let output = String::from_utf8_lossy(&captured.kept);
    let mut value = output.trim().to_string();
    if value.len() > MAX_METADATA_VALUE {
        errors.push(format!(
            "value of {} bytes exceeded {MAX_METADATA_VALUE} bytes",
            value.len()
        ));
        value.truncate(floor_char_boundary(&value, MAX_METADATA_VALUE));
    }
    let mut error = errors.join("; ");
    error.truncate(floor_char_boundary(&error, MAX_METADATA_VALUE));
    MetadataValue {
        key: key.to_string(),
        collected_at,
        age: i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX),
        value,
        error,
    }
}

async fn capture(mut reader: impl AsyncRead + Unpin, captured: &mut Captured) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = reader.read(&mut buf).await {
        captured.total += n;
        let room = CAPTURE_LIMIT.saturating_sub(captured.kept.len());
        captured.kept.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// The largest index ≤ `at` that starts a character, so a cut never splits one.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::tests::{FakePeer, cancel_after};

    fn sh() -> ShellCommand {
        ShellCommand {
            program: "/bin/sh".into(),
            env: [("PATH", "/usr/bin:/bin")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dir: std::env::temp_dir(),
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn output_is_the_trimmed_value() {
        let value = collect(&sh(), "k", "echo '  42 '; echo warn >&2", SECOND).await;
        assert_eq!(value.key, "k");
        assert!(value.value.starts_with("42"), "{value:?}");
        assert!(
            value.value.ends_with("warn"),
            "stderr is part of it: {value:?}"
        );
        assert_eq!(value.error, "");
    }

    #[tokio::test]
    async fn failures_keep_the_output_and_say_why() {
        let value = collect(&sh(), "k", "echo partial; exit 2", SECOND).await;
        assert_eq!(value.value, "partial");
        assert_eq!(value.error, "exit status 2");

        let value = collect(&sh(), "k", "true", SECOND).await;
        assert_eq!((value.value.as_str(), value.error.as_str()), ("", ""));
    }

    #[tokio::test]
    async fn a_slow_script_times_out() {
        let started = Instant::now();
        let value = collect(
            &sh(),
            "k",
            "echo early; sleep 30",
            Duration::from_millis(300),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(value.value, "early");
        assert_eq!(value.error, "timed out after 0.3s");
    }

    #[tokio::test]
    async fn long_values_are_cut_and_flagged() {
        let value = collect(&sh(), "k", "head -c 5000 /dev/zero | tr '\\0' x", SECOND).await;
        assert_eq!(value.value.len(), MAX_METADATA_VALUE);
        assert_eq!(value.error, "value of 5000 bytes exceeded 2048 bytes");

        let value = collect(&sh(), "k", "head -c 100000 /dev/zero | tr '\\0' y", SECOND).await;
        assert_eq!(value.value.len(), MAX_METADATA_VALUE);
        assert_eq!(
            value.error,
            "output truncated from 100000 to 10240 bytes; value of 10240 bytes exceeded 2048 bytes"
        );
    }

    #[test]
    fn cuts_respect_characters() {
        let s = "aé";
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(floor_char_boundary(s, 3), 3);
        assert_eq!(floor_char_boundary(s, 10), 3);
    }

    #[tokio::test]
    async fn descriptions_run_on_their_interval() -> anyhow::Result<()> {
        let reporter = Reporter::new(Duration::from_millis(10), Duration::ZERO);
        let dir = tempfile::tempdir()?;
        let counter = dir.path().join("count");
        let descriptions = [
            MetadataDescription {
                key: "every-second".into(),
                script: format!("echo x >> {0}; wc -l < {0}", counter.display()),
                interval_seconds: 1,
                ..MetadataDescription::default()
            },
            MetadataDescription {
                key: "once".into(),
                script: "echo once".into(),
                interval_seconds: 0,
                ..MetadataDescription::default()
            },
        ];
        let cancel = cancel_after(Duration::from_millis(2500));
        collect_all(&sh(), &descriptions, &reporter, &cancel).await;
        let runs = std::fs::read_to_string(&counter)?.lines().count();
        assert!((2..=4).contains(&runs), "{runs} runs in 2.5 s");

        let calls = FakePeer::default().flushed(&reporter).await?;
        let Some(codersdk::agentsdk::Request::BatchUpdateMetadata { values }) = calls.first()
        else {
            anyhow::bail!("{calls:?}");
        };
        let got: Vec<_> = values
            .iter()
            .map(|v| (v.key.as_str(), v.value.trim()))
            .collect();
        assert_eq!(
            got,
            [
                ("every-second", runs.to_string().as_str()),
                ("once", "once")
            ]
        );
        Ok(())
    }
}
