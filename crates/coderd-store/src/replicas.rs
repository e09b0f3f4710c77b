//! `replicas`: the coderd processes sharing this database. Liveness is judged by PostgreSQL's
//! `now()`, so replicas' clocks never have to agree.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, timed};

/// How recently a replica must have beaten to count as alive.
pub const ALIVE_SECONDS: f64 = 6.0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub hostname: String,
    pub region_id: i32,
    pub relay_address: String,
    pub database_latency: i32,
    pub version: String,
    pub error: String,
}

impl Store {
    pub async fn insert_replica(
        &self,
        id: Uuid,
        hostname: &str,
        relay_address: &str,
        version: &str,
    ) -> Result<ReplicaRow> {
        timed("insert_replica", async {
            Ok(sqlx::query_as!(
                ReplicaRow,
                "INSERT INTO replicas (id, hostname, relay_address, version)
                 VALUES ($1, $2, $3, $4) RETURNING *",
                id,
                hostname,
                relay_address,
                version
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Records a beat; false when the row is gone (purged while this replica was stopped).
    pub async fn beat_replica(&self, id: Uuid, latency_us: i32, error: &str) -> Result<bool> {
        timed("beat_replica", async {
            let done = sqlx::query!(
                "UPDATE replicas SET updated_at = now(), database_latency = $2, error = $3
                 WHERE id = $1 AND stopped_at IS NULL",
                id,
                latency_us,
                error
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    pub async fn stop_replica(&self, id: Uuid) -> Result<()> {
        timed("stop_replica", async {
            sqlx::query!(
                "UPDATE replicas SET stopped_at = now(), updated_at = now() WHERE id = $1",
                id
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// The replicas alive now (beaten within [`ALIVE_SECONDS`], not stopped), oldest first.
    pub async fn live_replicas(&self) -> Result<Vec<ReplicaRow>> {
        timed("live_replicas", async {
            Ok(sqlx::query_as!(
                ReplicaRow,
                "SELECT * FROM replicas
                 WHERE stopped_at IS NULL AND updated_at > now() - make_interval(secs => $1)
                 ORDER BY started_at, id",
                ALIVE_SECONDS
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Forgets replicas silent for an hour.
    pub async fn purge_replicas(&self) -> Result<u64> {
        timed("purge_replicas", async {
            let done =
                sqlx::query!("DELETE FROM replicas WHERE updated_at < now() - interval '1 hour'")
                    .execute(&self.pool)
                    .await?;
            Ok(done.rows_affected())
        })
        .await
    }
}
