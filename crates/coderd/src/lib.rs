#![doc = include_str!("../README.md")]

mod builtin_daemons;
pub mod config;
pub mod dbcrypt;
pub mod deployment_options;
pub mod server;

pub use config::ServerConfig;
pub use server::{FrontDoor, ServeOptions, run, run_with, serve, serve_state};
