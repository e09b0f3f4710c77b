//! Integration tests: the real agent against coderd's side of the protocol, in-process.

mod coderd;
mod connection;
mod harness;
mod lifecycle;
mod metadata;
mod peer;
mod prebuilds;
mod pty;
mod ssh;
mod streams;
