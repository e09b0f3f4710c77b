//! The provisioner side of coderd: tags, the push dispatcher, daemon sessions and their
//! transports, job payloads and the template archives they carry, the hang detector.

pub mod builtin;
pub mod dispatch;
pub mod file_cache;
pub mod hang;
pub mod payload;
pub mod registry;
pub mod session;
pub mod tags;
