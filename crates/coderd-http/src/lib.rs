//! What every HTTP front door of coderd shares — the JSON API, the capabilities' routes, the
//! dashboard: Coder's error body ([`error::ApiError`], rendered as `{message, detail,
//! validations}`), the extractors that read a request and authenticate its caller
//! ([`extract`]), the field rules applied to request bodies ([`requests`]), cookies, WebSocket
//! limits and the audit log's request context. It holds no routes: each door mounts its own.

pub mod audit_context;
pub mod cookies;
pub mod error;
pub mod extract;
mod input;
pub mod oauth_flow;
pub mod requests;
pub mod websocket;

pub use error::{ApiError, ApiResult};
