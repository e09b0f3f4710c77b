//! The provisioner side of coderd: tags, the push dispatcher, daemon sessions and their
//! transports, job payloads and the template archives they carry, the hang detector. The built-in daemons that run inside `coder server` are the assembly's
//! (they are the provisionerd crate's daemon on an in-process transport).

pub mod dispatch;
pub mod file_cache;
pub mod hang;
pub mod payload;
pub mod registry;
pub mod session;
pub mod tags;
