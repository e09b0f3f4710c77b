//! The executor with the real terraform (from PATH) and our provider: imports, builds,
//! failures, cancellation, and the agent bootstrap script.

mod agent_script;
mod credentials;
mod failures;
mod harness;
mod lifecycle;
mod newer_types;
mod prebuild_claim;
