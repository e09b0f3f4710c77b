#![doc = include_str!("../README.md")]

pub mod agentsdk;
pub mod apikeys;
pub mod appearance;
pub mod applications;
pub mod audit;
pub mod buildinfo;
pub mod client;
pub mod deployment;
pub mod error;
pub mod externalagents;
pub mod externalauth;
pub mod files;
pub mod groups;
pub mod health;
pub mod insights;
pub mod logs;
pub mod organizations;
pub mod portsharing;
pub mod presets;
pub mod proto;
pub mod provisionerd;
pub mod provisioners;
pub mod relay;
pub mod tasks;
pub mod templates;
pub mod users;
pub mod usersecrets;
pub mod usersettings;
pub mod version;
pub mod workspaces;

pub use client::Client;
pub use error::{ClientError, Response, ValidationError};
