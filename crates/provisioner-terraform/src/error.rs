//! Why the executor could not set up or run a job. Messages are what a template author or an
//! operator reads in the job's error, so they say what to do.

use std::path::PathBuf;

use crate::convert::ConvertError;
use crate::variables::VariablesError;
use crate::version::{MINIMUM_VERSION, Version};

/// Preparing the daemon's terraform settings (mirror, plugin cache, CLI config) failed.
#[derive(Debug, thiserror::Error)]
#[error("preparing {}: {source}", path.display())]
pub struct SetupError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A job could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "terraform not found: {searched}; install terraform {MINIMUM_VERSION} or newer on the \
         provisioner's PATH, or give the provisioner daemon its path (--terraform-path)"
    )]
    NotFound { searched: String },
    #[error(
        "terraform {found} at {} is too old: terraform {MINIMUM_VERSION} or newer is needed",
        binary.display()
    )]
    TooOld { binary: PathBuf, found: Version },
    #[error("checking the version of {}: {message}", binary.display())]
    Version { binary: PathBuf, message: String },
    #[error("running {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} failed: {message}")]
    Failed { command: String, message: String },
    #[error("terraform was canceled")]
    Canceled,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the template's variables: {0}")]
    Variables(#[from] VariablesError),
    #[error(
        "required template variables need values: {}; set them with `coder templates push --variable NAME=VALUE`",
        names.join(", ")
    )]
    MissingVariables { names: Vec<String> },
    #[error("{what}: {source}")]
    Convert {
        what: &'static str,
        #[source]
        source: ConvertError,
    },
}

impl Error {
    /// Coder's error code for the failure, where it has one.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::MissingVariables { .. } => "REQUIRED_TEMPLATE_VARIABLES",
            _ => "",
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}
