//! coderd's integration tests: the real HTTP API on a real PostgreSQL.

mod auth;
mod migrations;
mod openapi;
mod rbac;
mod users;
