//! The domain layer: what coderd decides, independent of which front door asked. The JSON API,
//! the dashboard, the lifecycle executor, `coder ssh`'s auto-start, the relay and the app proxy
//! all call these functions with an [`authz::Subject`](coderd_authz::Subject) (a user's, or
//! [`Subject::system`](coderd_authz::Subject::system) for background work) and get rows or SDK
//! types back, or an [`Error`] that each front door presents its own way.

pub mod accounts;
pub mod activity;
pub mod appearance;
pub mod authcheck;
pub mod build_state;
pub mod builds;
pub mod deployment_config;
pub mod deployment_stats;
mod error;
pub mod health;
pub mod health_report;
pub mod insights;
pub mod jobs;
pub mod keys;
pub mod logs;
pub mod parameters;
mod prebuild_claim;
pub mod prebuild_settings;
pub mod presets;
pub mod provisioner_jobs;
pub mod provisioner_keys;
pub mod render;
pub mod resolve;
pub mod schedules;
pub mod search;
pub mod session;
pub mod template_schedules;
pub mod template_versions;
pub mod tokens;
pub mod user_settings;
pub mod users;
pub mod views;
pub mod workspace_edits;

pub use error::{Error, Result};
