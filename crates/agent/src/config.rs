//! What the agent is told at start: where coderd is, how to authenticate, where to write logs,
//! and the timings of its loops (tests shorten them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

use crate::error::AgentError;

/// The agent's configuration. Built once by the caller (the CLI parses `CODER_AGENT_*`);
/// nothing below reads the process environment except through [`Config::environment`].
#[derive(Debug, Clone)]
pub struct Config {
    /// coderd's URL (`CODER_AGENT_URL`).
    pub url: Url,
    pub token: TokenSource,
    /// Where the agent's own log and the scripts' logs go.
    pub log_dir: PathBuf,
    /// Base of `coder-script-data`, where scripts keep data and binaries.
    pub script_data_dir: PathBuf,
    /// Special environments the agent runs in (`CODER_AGENT_SUBSYSTEM`), told to coderd.
    pub subsystems: Vec<String>,
    /// The environment scripts inherit (normally the agent's own).
    pub environment: BTreeMap<String, String>,
    /// Reported to coderd at startup.
    pub version: String,
    pub timings: Timings,
}

impl Config {
    /// A configuration with the defaults: logs and script data in the system temp directory,
    /// the process's environment for scripts, Coder's timings.
    pub fn new(url: Url, token: TokenSource) -> Self {
        Self {
            url,
            token,
            log_dir: std::env::temp_dir(),
            script_data_dir: std::env::temp_dir(),
            subsystems: Vec::new(),
            // Non-UTF-8 variables cannot be passed on faithfully through a `String` map; they
            // are rare enough in workspaces to skip rather than mangle.
            environment: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            version: codersdk::version::VERSION.to_string(),
            timings: Timings::default(),
        }
    }
}

/// Where the agent's token comes from. The file is re-read on every connect, so a token
/// rotated on disk is picked up without a restart.
#[derive(Clone)]
pub enum TokenSource {
    Value(String),
    File(PathBuf),
}

impl TokenSource {
    pub(crate) fn read(&self) -> Result<String, AgentError> {
        let token = match self {
            Self::Value(token) => token.trim().to_string(),
            Self::File(path) => std::fs::read_to_string(path)
                .map_err(|source| AgentError::TokenFile {
                    path: path.clone(),
                    source,
                })?
                .trim()
                .to_string(),
        };
        if token.is_empty() {
            return Err(AgentError::Config(match self {
                Self::Value(_) => "the agent token is empty".into(),
                Self::File(path) => format!("the agent token file {} is empty", path.display()),
            }));
        }
        Ok(token)
    }
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Value(_) => f.write_str("Value(<redacted>)"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// How long the agent's loops wait. The defaults are Coder's; tests shorten them.
#[derive(Debug, Clone)]
pub struct Timings {
    /// After interrupting a script (timeout or shutdown), how long before it is killed.
    pub kill_grace: Duration,
    /// How long a script's output pipes may stay open after it exited before that counts as
    /// an error (a background process inherited them).
    pub pipes_grace: Duration,
    /// How often queued logs are sent (100 queued lines are sent at once).
    pub log_flush_interval: Duration,
    /// How often changed metadata values are sent, in one batch.
    pub metadata_report_interval: Duration,
    /// The stats interval until coderd names one.
    pub stats_interval: Duration,
    /// How long shutdown waits for the final lifecycle state and logs to reach coderd.
    pub final_report_timeout: Duration,
    /// How long a reconnecting PTY (web terminal) outlives its last client.
    pub pty_timeout: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            kill_grace: Duration::from_secs(10),
            pipes_grace: Duration::from_secs(10),
            log_flush_interval: Duration::from_millis(250),
            metadata_report_interval: Duration::from_secs(1),
            stats_interval: Duration::from_secs(30),
            final_report_timeout: Duration::from_secs(10),
            pty_timeout: Duration::from_secs(5 * 60),
        }
    }
}

/// Creates `dir` (and parents) if needed, so a typo fails at start rather than per script.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), AgentError> {
    std::fs::create_dir_all(dir).map_err(|source| AgentError::Directory {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_trimmed_and_never_shown() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("token");
        std::fs::write(&file, "secret-from-file\n")?;
        assert_eq!(TokenSource::File(file.clone()).read()?, "secret-from-file");
        assert_eq!(TokenSource::Value(" secret ".into()).read()?, "secret");

        std::fs::write(&file, "  \n")?;
        assert!(TokenSource::File(file).read().is_err());
        assert!(
            TokenSource::File(dir.path().join("missing"))
                .read()
                .is_err()
        );

        let config = Config::new(
            Url::parse("http://coderd")?,
            TokenSource::Value("secret".into()),
        );
        let shown = format!("{config:?}");
        assert!(!shown.contains("secret"), "{shown}");
        Ok(())
    }
}
