//! End-to-end tests of the real `coder` binary.

mod agent;
mod agent_binary;
mod apps;
mod cli;
mod cli_auth;
mod container;
mod devcontainers;
mod external_auth;
mod external_workspaces;
mod fuzz;
mod groups;
mod harness;
mod ide;
mod prebuilds;
mod provisioning;
mod relay;
mod schedule;
mod script_order;
mod secrets;
mod server;
mod ssh;
mod task_app;
mod tasks;
mod terraform;
mod timings;
mod verbs;
