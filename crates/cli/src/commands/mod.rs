//! One module per top-level command.

pub mod login;
pub mod server;
pub mod tokens;
pub mod users;
