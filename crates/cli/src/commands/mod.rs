//! One module per top-level command.

pub mod agent;
pub mod config_ssh;
pub mod external_workspaces;
pub mod groups;
pub mod login;
pub mod ping;
pub mod port_forward;
pub mod provisionerd;
pub mod provisioners;
pub mod schedule;
pub mod secrets;
pub mod server;
pub mod ssh;
pub mod task;
pub mod templates;
pub mod tokens;
pub mod users;
pub mod version;
pub mod vscodessh;
pub mod whoami;
pub mod workspaces;
