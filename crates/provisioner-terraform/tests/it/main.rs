//! Integration tests of the plan/state converter: conformance with Coder's fixtures, template
//! errors on inputs written here, and robustness against arbitrary input.

mod behaviour;
mod conformance;
mod errors;
mod robustness;
mod shape;
mod support;
