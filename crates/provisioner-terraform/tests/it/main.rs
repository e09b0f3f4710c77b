//! Integration tests: the plan/state converter (conformance with Coder's fixtures, template
//! errors on inputs written here, robustness against arbitrary input) and the executor running
//! the real terraform.

mod behaviour;
mod conformance;
mod errors;
mod executor;
mod features;
mod robustness;
mod script_order;
mod shape;
mod support;
