//! The pubsub outbox (migration 0024): hot transactions publish by inserting rows, and a relay
//! task moves committed rows to `pg_notify`, many messages per transaction.
//!
//! Why: PostgreSQL's NOTIFY takes a database-wide lock at pre-commit and holds it until the
//! transaction has ended, across its commit record's fsync, so transactions that NOTIFY commit
//! one at a time, one fsync each. Outbox rows are plain inserts: concurrent publishers share
//! fsyncs (group commit), and only the relay's one transaction per batch takes the NOTIFY lock.
//!
//! Delivery rules kept from direct NOTIFY: the relay only sees committed rows, so a subscriber
//! never hears of a row it cannot read yet; one transaction's messages have consecutive ids and
//! are relayed in id order by one relay at a time (an advisory lock in `coder_relay_outbox`
//! serialises replicas), so they arrive in the order they were published. Better than an
//! in-memory queue: a message committed by a coderd that dies before relaying it stays in the
//! table, and the periodic sweep of any replica (or of the same one after a restart) sends it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Result, Store, timed};

/// How often a relay looks at the outbox without being woken: the bound on how late a message
/// left behind by a replica that died between its commit and its relay's run is delivered.
const SWEEP: Duration = Duration::from_secs(1);

/// Messages moved per relay transaction: bounds one transaction's NOTIFY queue usage and lock
/// hold; a fuller outbox takes several transactions in a row. A woken relay usually finds a
/// few; at 1000 the planner picked a sort over a sequential scan for the pick (measured on a
/// churned table), at 100 it stays an index scan.
const BATCH: i32 = 100;

/// Wakes this process's relay after a commit that published through the outbox.
#[derive(Clone, Debug, Default)]
pub(crate) struct Relay {
    wake: Arc<Notify>,
}

impl Relay {
    /// Called after (never before) the commit of a transaction that published: a relay woken
    /// earlier could run before the commit and miss the rows until the next sweep. A wake while
    /// the relay is busy is kept (one permit), so wakes coalesce without being lost.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Publishes `payload` on `channel` when the caller's transaction commits. The caller wakes
/// the relay ([`Store::published`]) after that commit.
pub(crate) async fn publish(
    tx: &mut sqlx::PgConnection,
    channel: &str,
    payload: String,
) -> Result<()> {
    sqlx::query_scalar!("SELECT coder_publish($1, $2) AS \"one!\"", channel, payload)
        .fetch_one(&mut *tx)
        .await?;
    Ok(())
}

impl Store {
    /// Wakes the relay: call after committing a transaction that published through the outbox.
    pub(crate) fn published(&self) {
        self.relay.wake();
    }

    /// Moves one batch of committed outbox messages to NOTIFY; returns how many.
    pub async fn relay_outbox(&self) -> Result<i32> {
        timed("relay_outbox", async {
            let sent = sqlx::query_scalar!("SELECT coder_relay_outbox($1) AS \"sent!\"", BATCH)
                .fetch_one(&self.pool)
                .await?;
            Ok(sent)
        })
        .await
    }

    /// Runs this process's relay until `shutdown`: after every wake-up and every [`SWEEP`], it
    /// relays batches until the outbox is drained. An idle coderd runs one cheap statement per
    /// sweep (an index probe of an empty table) and nothing else.
    pub fn start_outbox_relay(&self, shutdown: CancellationToken) {
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = store.relay.wake.notified() => {}
                    () = tokio::time::sleep(SWEEP) => {}
                }
                loop {
                    match store.relay_outbox().await {
                        Ok(sent) if sent < BATCH => break,
                        Ok(_) => {}
                        Err(e) => {
                            // The rows stay in the outbox; the next wake-up or sweep retries.
                            tracing::warn!(error = %e, "pubsub outbox relay failed");
                            break;
                        }
                    }
                }
            }
        });
    }
}
