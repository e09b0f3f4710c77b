//! Connecting to PostgreSQL: the operator's database (`--postgres-url`) or our embedded cluster,
//! a connection pool, and the embedded migrations.

pub mod embedded;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};

/// The schema migrations, compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Oldest PostgreSQL we run on (`server_version_num`).
const MIN_SERVER_VERSION: i32 = 130000;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("connecting to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("PostgreSQL {found} is too old; coderd needs 13 or newer")]
    TooOld { found: String },
    #[error("migrating the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Embedded(#[from] embedded::Error),
    #[error("invalid PostgreSQL URL: {0}")]
    Url(#[source] sqlx::Error),
}

/// Parses a `postgres://` URL, quieting per-statement logs (they would log at INFO per query).
pub fn parse_url(url: &str) -> Result<PgConnectOptions, Error> {
    let options: PgConnectOptions = url.parse().map_err(Error::Url)?;
    Ok(options.disable_statement_logging())
}

/// coderd's statements are short and run thousands of times a second: PostgreSQL's JIT, which
/// starts compiling once a plan's *estimated* cost passes `jit_above_cost`, turned a 0.6 ms
/// resource-tree read into 60 ms of compilation whenever the estimates ran high (after a bulk
/// insert, before autovacuum's `ANALYZE`). Its gains are for long analytical queries only.
fn oltp(options: PgConnectOptions) -> PgConnectOptions {
    options
        .disable_statement_logging()
        .options([("jit", "off")])
}

/// How long a pooled connection may sit unused before it is pinged ahead of its next query.
pub(crate) const IDLE_BEFORE_PING: Duration = Duration::from_secs(30);

/// Opens the pool coderd uses for everything but LISTEN, checks the server version and brings
/// the schema up to date.
pub async fn connect_and_migrate(
    options: PgConnectOptions,
    max_connections: u32,
) -> Result<PgPool, Error> {
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        // sqlx pings every connection it takes from the pool, and again (off the request path)
        // when it goes back: a round trip per query on top of the query's own. The ping on
        // release already proves a busy connection alive, so only one that sat idle long
        // enough for the server or the network to have dropped it is pinged before use.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > IDLE_BEFORE_PING {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_with(oltp(options))
        .await
        .map_err(Error::Connect)?;
    let version = sqlx::query!(
        r#"SELECT current_setting('server_version_num')::int AS "num!", current_setting('server_version') AS "name!""#
    )
    .fetch_one(&pool)
    .await
    .map_err(Error::Connect)?;
    if version.num < MIN_SERVER_VERSION {
        return Err(Error::TooOld {
            found: version.name,
        });
    }
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}
