//! Job output on its way to coderd: engines write lines into a [`LogSink`]; the runner takes
//! them out in batches and sends them with the job's updates.
//!
//! The buffer is bounded because it must survive a lost connection (the job keeps running and
//! keeps logging while the daemon reconnects). Lines that do not fit are dropped and counted;
//! the count is reported as a line of its own once there is room.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::Utc;
use codersdk::provisionerd::{JobLog, LogLevel, LogSource};

/// How much output a job may have waiting to be sent.
pub const MAX_BUFFERED_LOG_BYTES: usize = 4 << 20;
/// Bookkeeping per line, so that a flood of empty lines is bounded too.
const LINE_OVERHEAD: usize = 64;

/// Where an engine writes its output. Cheap to clone; every clone writes to the same job.
#[derive(Clone, Debug)]
pub struct LogSink {
    buffer: Arc<Mutex<Buffer>>,
}

#[derive(Debug)]
struct Buffer {
    lines: VecDeque<JobLog>,
    bytes: usize,
    limit: usize,
    dropped: u64,
}

fn line_size(log: &JobLog) -> usize {
    log.output.len() + log.stage.len() + LINE_OVERHEAD
}

impl Default for LogSink {
    fn default() -> Self {
        Self::new()
    }
}

impl LogSink {
    pub fn new() -> Self {
        Self::with_limit(MAX_BUFFERED_LOG_BYTES)
    }

    /// A sink holding at most `limit` bytes of unsent output.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buffer: Arc::new(Mutex::new(Buffer {
                lines: VecDeque::new(),
                bytes: 0,
                limit,
                dropped: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // Nothing panics while holding the lock, and a half-written line is harmless anyway.
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a line, stamped now.
    pub fn write(
        &self,
        source: LogSource,
        level: LogLevel,
        stage: &str,
        output: impl Into<String>,
    ) {
        let log = JobLog {
            created_at: Utc::now(),
            source,
            level,
            stage: stage.to_string(),
            output: output.into(),
        };
        let size = line_size(&log);
        let mut buffer = self.lock();
        if buffer.bytes + size > buffer.limit {
            buffer.dropped += 1;
            return;
        }
        buffer.bytes += size;
        buffer.lines.push_back(log);
    }

    /// A line of the provisioner's own output (what an engine writes).
    pub fn log(&self, level: LogLevel, stage: &str, output: impl Into<String>) {
        self.write(LogSource::Provisioner, level, stage, output);
    }

    /// A line about what the daemon itself does for the job.
    pub(crate) fn daemon(&self, level: LogLevel, stage: &str, output: impl Into<String>) {
        self.write(LogSource::ProvisionerDaemon, level, stage, output);
    }

    pub fn is_empty(&self) -> bool {
        let buffer = self.lock();
        buffer.lines.is_empty() && buffer.dropped == 0
    }

    /// Bytes of buffered lines (as counted against the limit).
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Takes everything buffered.
    pub fn take(&self) -> Vec<JobLog> {
        self.take_batch(usize::MAX)
    }

    /// Takes the oldest lines up to about `max_bytes` (at least one line, so that an oversized
    /// line still moves), followed by a note about dropped lines if any were.
    pub(crate) fn take_batch(&self, max_bytes: usize) -> Vec<JobLog> {
        let mut buffer = self.lock();
        let mut batch = Vec::new();
        let mut size = 0;
        while let Some(front) = buffer.lines.front() {
            let line = line_size(front);
            if !batch.is_empty() && size + line > max_bytes {
                break;
            }
            size += line;
            buffer.bytes -= line;
            batch.extend(buffer.lines.pop_front());
        }
        if buffer.dropped > 0 && buffer.lines.is_empty() {
            batch.push(JobLog {
                created_at: Utc::now(),
                source: LogSource::ProvisionerDaemon,
                level: LogLevel::Warn,
                stage: batch.last().map(|l| l.stage.clone()).unwrap_or_default(),
                output: format!(
                    "{} log lines were dropped: they came faster than the daemon could send them",
                    buffer.dropped
                ),
            });
            buffer.dropped = 0;
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_order_source_and_stage() {
        let sink = LogSink::new();
        let clone = sink.clone();
        sink.log(LogLevel::Info, "Plan", "one");
        clone.daemon(LogLevel::Warn, "Setting up", "two");
        assert!(!sink.is_empty());
        let lines = sink.take();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].output, "one");
        assert_eq!(lines[0].source, LogSource::Provisioner);
        assert_eq!(lines[1].source, LogSource::ProvisionerDaemon);
        assert_eq!(lines[1].level, LogLevel::Warn);
        assert_eq!(lines[1].stage, "Setting up");
        assert!(lines[0].created_at <= lines[1].created_at);
        assert!(sink.is_empty());
    }

    #[test]
    fn batches_are_bounded_but_always_move() {
        let sink = LogSink::new();
        for i in 0..10 {
            sink.log(LogLevel::Info, "s", format!("{i:0>100}"));
        }
        let per_line = 100 + 1 + LINE_OVERHEAD;
        let batch = sink.take_batch(per_line * 3);
        assert_eq!(batch.len(), 3);
        let batch = sink.take_batch(1);
        assert_eq!(batch.len(), 1, "an oversized line is sent on its own");
        assert_eq!(sink.take().len(), 6);
    }

    #[test]
    fn overflow_is_dropped_then_reported() {
        let per_line = 10 + 1 + LINE_OVERHEAD;
        let sink = LogSink::with_limit(per_line * 2);
        for _ in 0..5 {
            sink.log(LogLevel::Info, "s", "0123456789");
        }
        let batch = sink.take();
        assert_eq!(batch.len(), 3);
        assert_eq!(batch[2].source, LogSource::ProvisionerDaemon);
        assert!(
            batch[2].output.starts_with("3 log lines were dropped"),
            "{}",
            batch[2].output
        );
        sink.log(LogLevel::Info, "s", "0123456789");
        assert_eq!(sink.take().len(), 1, "room again after draining");
    }
}
