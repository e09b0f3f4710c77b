//! Integration tests: the real runner against a coderd-side protocol peer, over in-memory
//! channels (`memory`) and over a real loopback WebSocket (`websocket`).

mod harness;
mod memory;
mod shutdown;
mod websocket;
