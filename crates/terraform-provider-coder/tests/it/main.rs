//! Integration tests: the real `terraform` (on PATH) drives the real provider binary, found
//! through a filesystem mirror exactly as the provisioner daemon sets it up.

mod agent;
mod harness;
mod lifecycle;
mod newer_types;
mod parameter;
mod plugin;
mod state_shape;
mod workspace;
