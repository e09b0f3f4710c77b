//! The caller's session lookup handing its pooled connection to the request's first read.
//!
//! Every connection that goes back to sqlx's pool is pinged (a round trip and a wake-up of
//! its backend: sqlx-core does it unconditionally on release), so a request that checks out
//! a connection for the caller's session and then another for its reads pays two. Inside
//! [`request_scope`], the session lookup leaves its connection in the scope's slot instead,
//! and the next read that asks through [`Store::request_conn`] takes it from there.
//!
//! Why this is safe:
//! - A scope belongs to one request's task: task-locals do not reach spawned tasks, which
//!   use the pool as before.
//! - A connection is handed on once and never parked again, so a request holds an idle
//!   connection only between its session lookup and its first read. Any other checkout in
//!   that window would wait for the pool while holding one (enough such requests at once
//!   could exhaust it), so the routes that set a scope read first, and the reads that can come
//!   first ask through [`Store::request_conn`].
//! - A read cancelled mid-statement returns its connection to the pool as before (the release
//!   ping flushes it); the slot only ever holds a connection whose statement completed.
//! - Transactions never come from here.

use std::cell::RefCell;

use sqlx::Postgres;
use sqlx::pool::PoolConnection;

use super::{Result, Store};

tokio::task_local! {
    static PARKED: RefCell<Option<PoolConnection<Postgres>>>;
}

/// Runs `fut` (a request's handling) with a slot where its session lookup leaves its
/// connection for its first read.
pub async fn request_scope<F: Future>(fut: F) -> F::Output {
    PARKED.scope(RefCell::new(None), fut).await
}

impl Store {
    /// The connection the request's session lookup left, else one from the pool.
    pub(super) async fn request_conn(&self) -> Result<PoolConnection<Postgres>> {
        let parked = PARKED
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        match parked {
            Some(conn) => Ok(conn),
            None => Ok(self.pool.acquire().await?),
        }
    }

    /// Leaves `conn` for the request's first read; outside a scope it goes back to the pool.
    pub(super) fn hand_on(conn: PoolConnection<Postgres>) {
        let mut conn = Some(conn);
        // A connection already there (not expected: one session lookup per request) is
        // replaced and goes back to the pool.
        let _ = PARKED.try_with(|slot| drop(slot.replace(conn.take())));
    }
}
