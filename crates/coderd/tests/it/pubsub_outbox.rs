//! The pubsub outbox (store/outbox.rs): what the relay delivers, in which order, and what it
//! never delivers, heard on a plain LISTEN connection as any subscriber hears it.

use std::collections::HashMap;
use std::time::Duration;

use coderd::pubsub::channels;
use sqlx::postgres::{PgListener, PgNotification};
use testutil::TestApp;

async fn listener(app: &TestApp) -> anyhow::Result<PgListener> {
    let mut listener = PgListener::connect_with(app.pool()).await?;
    listener
        .listen_all([channels::JOB_LOGS, channels::JOB_UPDATED])
        .await?;
    Ok(listener)
}

async fn next(listener: &mut PgListener, within: Duration) -> anyhow::Result<PgNotification> {
    Ok(tokio::time::timeout(within, listener.recv()).await??)
}

/// Publishes `messages` in one committed transaction through the SQL path the store uses,
/// without waking any relay (as a coderd that dies right after its commit would leave them).
async fn publish(pool: &sqlx::PgPool, messages: &[(&str, String)]) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    for (channel, payload) in messages {
        sqlx::query("SELECT coder_publish($1, $2)")
            .bind(channel)
            .bind(payload)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_message_is_never_delivered() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let mut listener = listener(&app).await?;

    let mut tx = app.pool().begin().await?;
    sqlx::query("SELECT coder_publish($1, 'rolled-back')")
        .bind(channels::JOB_UPDATED)
        .execute(&mut *tx)
        .await?;
    tx.rollback().await?;
    publish(app.pool(), &[(channels::JOB_UPDATED, "kept".into())]).await?;
    app.state.store.relay_outbox().await?;

    // Relays go in id order, so anything of the rolled-back transaction would come first.
    let first = next(&mut listener, Duration::from_secs(10)).await?;
    assert_eq!(first.payload(), "kept");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pubsub_outbox")
        .fetch_one(app.pool())
        .await?;
    assert_eq!(left, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_relay_every_transaction_in_order() -> anyhow::Result<()> {
    const TRANSACTIONS: usize = 40;
    const PER_TRANSACTION: usize = 6;
    let app = TestApp::new().await?;
    let replica = app.replica(|_| {}).await?;
    let mut listener = listener(&app).await?;

    // Publishers and both replicas' relays all at once; payloads `<transaction>:<seq>`, with
    // the channel alternating as record_tail alternates JOB_LOGS and JOB_UPDATED.
    let mut tasks = Vec::new();
    for t in 0..TRANSACTIONS {
        let pool = app.pool().clone();
        tasks.push(tokio::spawn(async move {
            let messages: Vec<(&str, String)> = (0..PER_TRANSACTION)
                .map(|i| {
                    let channel = if i % 2 == 0 {
                        channels::JOB_LOGS
                    } else {
                        channels::JOB_UPDATED
                    };
                    (channel, format!("{t}:{i}"))
                })
                .collect();
            publish(&pool, &messages).await
        }));
    }
    for store in [app.state.store.clone(), replica.state.store.clone()] {
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                store.relay_outbox().await?;
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }

    // Whatever the explicit relays missed, the sweep sends; every message exactly once.
    let mut seen: HashMap<usize, Vec<usize>> = HashMap::new();
    for _ in 0..TRANSACTIONS * PER_TRANSACTION {
        let note = next(&mut listener, Duration::from_secs(10)).await?;
        let (t, i) = note
            .payload()
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("payload {}", note.payload()))?;
        let expected = if i.parse::<usize>()? % 2 == 0 {
            channels::JOB_LOGS
        } else {
            channels::JOB_UPDATED
        };
        assert_eq!(note.channel(), expected);
        seen.entry(t.parse()?).or_default().push(i.parse()?);
    }
    assert_eq!(seen.len(), TRANSACTIONS);
    for (t, order) in seen {
        assert_eq!(
            order,
            (0..PER_TRANSACTION).collect::<Vec<_>>(),
            "transaction {t}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_nobody_woke_a_relay_for_is_swept() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let mut listener = listener(&app).await?;
    // Committed, but its publisher's relay never ran (it died after the commit); a replica
    // started afterwards sweeps it too, whichever of the two gets there first.
    publish(app.pool(), &[(channels::JOB_UPDATED, "orphan".into())]).await?;
    let _replica = app.replica(|_| {}).await?;
    let note = next(&mut listener, Duration::from_secs(10)).await?;
    assert_eq!(note.payload(), "orphan");
    Ok(())
}
