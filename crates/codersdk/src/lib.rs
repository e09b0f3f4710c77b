#![doc = include_str!("../README.md")]

pub mod apikeys;
pub mod buildinfo;
pub mod client;
pub mod error;
pub mod organizations;
pub mod proto;
pub mod users;

pub use client::Client;
pub use error::{ClientError, Response, ValidationError};
