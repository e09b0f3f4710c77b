//! Every migration can be undone and redone on a real database.

use coderd_store::postgres::MIGRATOR;
use testutil::TestDb;

#[tokio::test]
async fn migrations_go_down_and_up_again() -> anyhow::Result<()> {
    let db = TestDb::new().await?;
    let latest = MIGRATOR.iter().map(|m| m.version).max().unwrap_or_default();
    assert!(latest >= 2);
    MIGRATOR.undo(&db.pool, 0).await?;
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
    )
    .fetch_one(&db.pool)
    .await?;
    assert_eq!(tables, 0, "down migrations leave nothing behind");
    MIGRATOR.run(&db.pool).await?;
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(users, 0);
    Ok(())
}
