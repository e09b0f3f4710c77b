#![doc = include_str!("../README.md")]

pub mod agents;
pub mod api_limit;
pub mod apps;
pub mod audit;
pub mod auth;
pub mod authz;
pub mod clock;
pub mod config;
pub mod cookies;
pub mod deployment_options;
pub mod devcontainers;
pub mod domain;
pub mod error;
pub mod external_agents;
pub mod groups;
pub mod http;
pub mod lifecycle;
pub mod limits;
pub mod openapi;
pub mod postgres;
pub mod prebuilds;
pub mod provisioners;
pub mod pubsub;
pub mod relay;
pub mod schedule;
pub mod secrets;
pub mod server;
pub mod sso;
pub mod state;
pub mod store;
pub mod tasks;
pub mod usage;
pub mod validate;

pub use config::ServerConfig;
pub use server::{FrontDoor, ServeOptions, run, run_with, serve, serve_state};
