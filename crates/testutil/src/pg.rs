//! The throwaway PostgreSQL cluster tests share, and a fresh database per test.
//!
//! The cluster is coderd's own embedded cluster code pointed at a directory under /tmp (fsync
//! off): the first test process of a run initialises and starts it under a file lock, later ones
//! adopt it. `scripts/test.sh` deletes it before the run and stops it after. Each test gets a
//! database cloned from a template that was migrated once per schema version, which takes
//! milliseconds instead of re-running migrations.
//!
//! `CODER_TEST_DATABASE_URL` points the harness at another server instead (it needs the
//! CREATEDB privilege).

use std::path::PathBuf;

use coderd_store::postgres::{MIGRATOR, embedded};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::OnceCell;
use uuid::Uuid;

/// Where the shared cluster lives.
pub fn cluster_dir() -> PathBuf {
    std::env::var_os("CODER_TEST_PG_DIR").map_or_else(
        || PathBuf::from(format!("/tmp/coder-rs-test-pg-{}", nix::unistd::getuid())),
        PathBuf::from,
    )
}

/// Admin connection options for the cluster, starting it if this process is the first.
async fn admin_options() -> anyhow::Result<PgConnectOptions> {
    static ADMIN: OnceCell<PgConnectOptions> = OnceCell::const_new();
    ADMIN
        .get_or_try_init(|| async {
            if let Ok(url) = std::env::var("CODER_TEST_DATABASE_URL") {
                return Ok(url.parse::<PgConnectOptions>()?.disable_statement_logging());
            }
            let dir = cluster_dir();
            std::fs::create_dir_all(&dir)?;
            let lock_path = dir.with_extension("lock");
            let lock_file = std::fs::File::create(&lock_path)?;
            let lock = tokio::task::spawn_blocking(move || {
                Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, e)| e)
            })
            .await??;
            let mut options = embedded::Options::new(&dir);
            options.fsync = false;
            options.max_connections = 500;
            let pg = embedded::EmbeddedPostgres::start(options).await?;
            drop(lock);
            Ok(pg.connect_options("postgres").disable_statement_logging())
        })
        .await
        .cloned()
}

/// A database of its own for one test, migrated; dropped when the value is.
pub struct TestDb {
    pub pool: PgPool,
    pub name: String,
    pub options: PgConnectOptions,
    admin: PgConnectOptions,
}

impl TestDb {
    pub async fn new() -> anyhow::Result<Self> {
        let admin = admin_options().await?;
        let template = template_database(&admin).await?;
        let name = format!("test_{}", Uuid::new_v4().simple());
        let mut conn = PgConnection::connect_with(&admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            r#"CREATE DATABASE "{name}" TEMPLATE "{template}""#
        )))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        let options = admin.clone().database(&name);
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .connect_with(options.clone())
            .await?;
        Ok(Self {
            pool,
            name,
            options,
            admin,
        })
    }

    /// A `postgres://` URL of this database, for processes outside the test (a `coder server`
    /// under test).
    pub fn url(&self) -> String {
        let host = self.options.get_host();
        let socket = self
            .options
            .get_socket()
            .map(|p| p.to_string_lossy().into_owned());
        let host = socket.unwrap_or_else(|| host.to_string());
        let encoded: String = url::form_urlencoded::byte_serialize(host.as_bytes()).collect();
        format!(
            "postgres://{}@{}:{}/{}",
            self.options.get_username(),
            encoded,
            self.options.get_port(),
            self.name
        )
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Async drop does not exist; a short-lived thread with its own runtime does the work.
        // The pool's sockets belong to the test's runtime, which is blocked here; FORCE ends
        // those sessions from the server side instead of closing them from this thread.
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = PgConnection::connect_with(&admin).await {
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                        r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#
                    )))
                    .execute(&mut conn)
                    .await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// The migrated template for the current schema, created once per schema version.
async fn template_database(admin: &PgConnectOptions) -> anyhow::Result<String> {
    static TEMPLATE: OnceCell<String> = OnceCell::const_new();
    TEMPLATE
        .get_or_try_init(|| async {
            let mut hasher = Sha256::new();
            for migration in MIGRATOR.iter() {
                hasher.update(migration.version.to_le_bytes());
                hasher.update(&*migration.checksum);
            }
            let name = format!("coder_template_{}", &hex::encode(hasher.finalize())[..16]);
            let mut conn = PgConnection::connect_with(admin).await?;
            // One process creates it; the others wait here, then find it.
            sqlx::query("SELECT pg_advisory_lock(4242)")
                .execute(&mut conn)
                .await?;
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                    .bind(&name)
                    .fetch_one(&mut conn)
                    .await?;
            if !exists {
                let building = format!("{name}_building");
                for statement in [
                    format!(r#"DROP DATABASE IF EXISTS "{building}""#),
                    format!(r#"CREATE DATABASE "{building}""#),
                ] {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                        .execute(&mut conn)
                        .await?;
                }
                let mut migrate =
                    PgConnection::connect_with(&admin.clone().database(&building)).await?;
                MIGRATOR.run(&mut migrate).await?;
                migrate.close().await?;
                // Renamed only once complete, so a crash mid-migration never leaves a template
                // that looks ready.
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    r#"ALTER DATABASE "{building}" RENAME TO "{name}""#
                )))
                .execute(&mut conn)
                .await?;
            }
            sqlx::query("SELECT pg_advisory_unlock(4242)")
                .execute(&mut conn)
                .await?;
            conn.close().await?;
            Ok(name)
        })
        .await
        .cloned()
}
