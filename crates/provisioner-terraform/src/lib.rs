#![doc = include_str!("../README.md")]

pub mod agent_scripts;
mod command;
pub mod convert;
mod environment;
mod error;
mod executor;
mod job;
mod lockfile;
mod running_agents;
mod state_secrets;
mod ui;
pub mod variables;
pub mod version;

pub use environment::parameter_variable;
pub use error::{Error, SetupError};
pub use executor::{DEFAULT_INTERRUPT_GRACE, JobLogs, Settings, Terraform};
