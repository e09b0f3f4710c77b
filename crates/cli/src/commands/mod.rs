//! One module per top-level command.

pub mod agent;
pub mod login;
pub mod provisionerd;
pub mod provisioners;
pub mod server;
pub mod templates;
pub mod tokens;
pub mod users;
pub mod workspaces;
