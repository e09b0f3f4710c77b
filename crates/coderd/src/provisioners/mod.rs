//! The provisioner side of coderd: tags, the push dispatcher, daemon sessions and their
//! transports, the hang detector.

pub mod builtin;
pub mod dispatch;
pub mod hang;
pub mod payload;
pub mod registry;
pub mod session;
pub mod tags;
