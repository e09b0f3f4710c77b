//! coderd's integration tests: the real HTTP API on a real PostgreSQL.

mod agents;
mod app_origins;
mod apps;
mod audit;
mod auth;
mod builds;
mod domain;
mod files;
mod github;
mod groups;
mod lifecycle;
mod lifecycle_ha;
mod limits;
mod metrics;
mod migrations;
mod oidc;
mod openapi;
mod prebuilds;
mod presets;
mod queue;
mod rbac;
mod relay;
mod robustness;
mod schedules;
mod secrets;
mod users;
