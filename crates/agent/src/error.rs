//! Why the agent could not run at all. Everything after start (coderd unreachable or refusing,
//! scripts failing) is logged, reported and retried, never returned.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("invalid agent configuration: {0}")]
    Config(String),
    #[error("cannot read the agent token from {path}: {source}")]
    TokenFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the directory {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
}
