//! The provisioner engines this crate provides.

pub mod echo;
pub mod terraform;
