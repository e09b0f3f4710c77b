//! Where a script's output goes: its log file, byte for byte as written, and coderd, line by
//! line (stdout as `info`, stderr as `error`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::reporter::{Reporter, log_line};

/// Longest line sent to coderd; longer runs without a newline are sent in pieces.
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// Cuts a byte stream into lines, holding back an unfinished last line.
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut lines = Vec::new();
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            match rest.iter().position(|b| *b == b'\n') {
                Some(end) if end <= MAX_LINE => {
                    lines.push(text(&rest[..end]));
                    start += end + 1;
                }
                _ if rest.len() > MAX_LINE => {
                    lines.push(text(&rest[..MAX_LINE]));
                    start += MAX_LINE;
                }
                _ => break,
            }
        }
        self.pending.drain(..start);
        lines
    }

    /// The unfinished last line, once the stream has ended.
    pub(crate) fn finish(&mut self) -> Option<String> {
        (!self.pending.is_empty()).then(|| text(&std::mem::take(&mut self.pending)))
    }
}

fn text(bytes: &[u8]) -> String {
    let line = String::from_utf8_lossy(bytes);
    line.strip_suffix('\r').unwrap_or(&line).to_string()
}

/// One script run's sinks.
#[derive(Clone)]
pub(crate) struct ScriptOutput {
    file: Option<Arc<Mutex<tokio::fs::File>>>,
    path: PathBuf,
    reporter: Reporter,
    source: Uuid,
}

impl ScriptOutput {
    /// Opens (appending) the log file; without it the output still reaches coderd.
    pub(crate) async fn open(path: &Path, reporter: Reporter, source: Uuid) -> Self {
        let file = match open_log(path).await {
            Ok(file) => Some(Arc::new(Mutex::new(file))),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open a script's log file");
                None
            }
        };
        Self {
            file,
            path: path.to_path_buf(),
            reporter,
            source,
        }
    }

    async fn write_file(&self, bytes: &[u8]) {
        let Some(file) = &self.file else { return };
        let mut file = file.lock().await;
        // tokio's File hands each write to a blocking task and reports success before it has
        // reached the file; flushing waits for it, so the log is current when a run ends.
        let written = match file.write_all(bytes).await {
            Ok(()) => file.flush().await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            tracing::debug!(path = %self.path.display(), %error, "cannot write a script's log file");
        }
    }

    fn send(&self, level: &str, line: String) {
        self.reporter.push_log(self.source, log_line(level, line));
    }

    /// A line from the agent itself about the run (a timeout, a held pipe), shown with the
    /// script's output so that the template author sees it where they look.
    pub(crate) async fn note(&self, level: &str, message: &str) {
        self.write_file(format!("{message}\n").as_bytes()).await;
        self.send(level, message.to_string());
    }

    /// Copies `reader` into the sinks until it ends.
    pub(crate) async fn pump(&self, mut reader: impl AsyncRead + Unpin, level: &str) {
        let mut buf = vec![0u8; 8192];
        let mut lines = LineSplitter::default();
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.write_file(&buf[..n]).await;
                    for line in lines.push(&buf[..n]) {
                        self.send(level, line);
                    }
                }
            }
        }
        if let Some(line) = lines.finish() {
            self.send(level, line);
        }
    }
}

async fn open_log(path: &Path) -> std::io::Result<tokio::fs::File> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks_and_capped() {
        let mut splitter = LineSplitter::default();
        assert_eq!(splitter.push(b"one\ntw"), ["one"]);
        assert_eq!(splitter.push(b"o\r\n\nthr"), ["two", ""]);
        assert_eq!(splitter.finish().as_deref(), Some("thr"));
        assert_eq!(splitter.finish(), None);

        let long = vec![b'x'; MAX_LINE * 2 + 5];
        let lines = splitter.push(&long);
        assert_eq!(
            lines.iter().map(String::len).collect::<Vec<_>>(),
            [MAX_LINE, MAX_LINE]
        );
        assert_eq!(splitter.push(b"\n"), ["xxxxx"]);
        assert_eq!(splitter.push(&[0xff, b'\n']), ["\u{fffd}"]);
    }
}
