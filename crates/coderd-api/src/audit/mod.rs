//! The audit log's front door: `GET /audit` and its search language. Entries are written by
//! the domain layer (`coderd_core::audit`); retention is an executor's.

mod query;
pub(crate) mod routes;

pub use query::parse_query;
pub use routes::routes;
