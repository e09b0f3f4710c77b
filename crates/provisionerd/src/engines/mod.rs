//! The provisioner engines this crate provides.

pub mod echo;
