#![doc = include_str!("../README.md")]

mod backoff;
pub mod config;
pub mod connection;
pub mod engine;
pub mod engines;
pub mod error;
pub mod extract;
mod job;
pub mod logs;
mod runner;

pub use config::DaemonConfig;
pub use connection::websocket::{DaemonAuth, WebSocketConnector};
pub use connection::{ConnectError, Connection, Connector, ServerSide};
pub use engine::{Engine, JobContext, Progress, Template, TemplateForm};
pub use error::DaemonError;
pub use logs::LogSink;
pub use runner::{run, run_until};
