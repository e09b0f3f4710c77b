//! `coder ssh --log-dir`: what one SSH connection did, in a file of its own that Coder's IDE
//! plugins show when asked for logs. Named as Coder's CLI names it,
//! `coder-ssh-<YYYYMMDD-HHMMSS>-<5 letters>[-<parent pid>].log` (the parent, the `ssh` running
//! the ProxyCommand, is how the IDE finds its file), created anew and readable by its owner.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;

/// Opens the log file and sends this process's logs there (debug ones with `verbose`).
pub fn start(dir: &Path, stdio: bool, verbose: bool) -> anyhow::Result<PathBuf> {
    let mut name = format!(
        "coder-ssh-{}-{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S"),
        letters()
    );
    if stdio {
        name.push_str(&format!("-{}", std::os::unix::process::parent_id()));
    }
    name.push_str(".log");
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("--log-dir: cannot create {}", path.display()))?;
    let level = if verbose {
        tracing::Level::DEBUG
    } else {
        tracing::Level::INFO
    };
    tracing_subscriber::fmt()
        .with_writer(Mutex::new(file))
        .with_max_level(level)
        .with_ansi(false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("--log-dir: {e}"))?;
    Ok(path)
}

/// Five random lower-case letters, as Coder's names have.
fn letters() -> String {
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(b'a' + b % 26))
        .collect()
}
