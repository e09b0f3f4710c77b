//! coderd's core: what is running ([`state::AppState`]: the store, pubsub, job dispatch, the
//! registries of connected daemons and agents, caches, the deployment's settings) and the
//! domain layer ([`domain`]), the one place where coderd decides — who may see or do what, how
//! a build is made, what a workspace's status is. Every front door and capability calls it;
//! it calls none of them, which the crate graph enforces: this crate depends only on the store
//! and the pure policy crates below it.
//!
//! Beside the domain live the parts it needs to decide: the audit log's entries ([`audit`]),
//! field rules ([`validate`]), the agents' and daemons' connections ([`agents`],
//! [`provisioners`]), users' secrets and external agents' tokens ([`secrets`],
//! [`external_agents`]), app URLs ([`app_urls`]) and the configured sign-in providers
//! ([`sso_providers`]). Rate limits ([`limits`], [`api_limit`]) are shared by the two front
//! doors that sign people in.

pub mod agents;
pub mod api_limit;
pub mod app_urls;
pub mod audit;
pub mod build_times;
pub mod deployment_options;
pub mod devcontainers;
pub mod domain;
pub mod examples;
pub mod external_agents;
pub mod external_auth;
pub mod limits;
pub mod provisioners;
pub mod relay_usage;
pub mod replicas;
pub mod secrets;
pub mod sso_providers;
pub mod state;
pub mod usage;
pub mod validate;

pub use state::AppState;
