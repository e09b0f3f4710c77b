//! `audit_logs`: the record of who did what. Audited writes take an `Option<&NewAuditLog>` and
//! append it with [`append`] inside their own transaction, so a change and its record commit or
//! roll back together; events that change nothing else (a refused login) use
//! [`Store::insert_audit_log`].

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, UserRow, timed};

/// One entry as the audit module built it: secrets already removed from `diff`.
#[derive(Debug, Clone)]
pub struct NewAuditLog {
    pub id: Uuid,
    pub user_id: Option<Uuid>,
    pub organization_id: Option<Uuid>,
    /// Textual IP address (stored as `inet`).
    pub ip: Option<String>,
    pub user_agent: String,
    pub resource_type: String,
    pub resource_id: Uuid,
    pub resource_target: String,
    pub action: String,
    pub diff: serde_json::Value,
    pub status_code: i32,
    pub additional_fields: serde_json::Value,
    pub request_id: Uuid,
    pub description: String,
}

/// A stored entry with its actor's name and email (empty when there is none).
#[derive(Debug, Clone)]
pub struct AuditLogRow {
    pub id: Uuid,
    pub time: DateTime<Utc>,
    pub user_id: Option<Uuid>,
    pub organization_id: Option<Uuid>,
    pub ip: Option<String>,
    pub user_agent: String,
    pub resource_type: String,
    pub resource_id: Uuid,
    pub resource_target: String,
    pub action: String,
    pub diff: serde_json::Value,
    pub status_code: i32,
    pub additional_fields: serde_json::Value,
    pub request_id: Uuid,
    pub description: String,
}

/// A parsed audit search (`GET /audit?q=...`); every field narrows, `None` matches all.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    pub resource_type: Option<String>,
    pub resource_id: Option<Uuid>,
    pub action: Option<String>,
    pub username: Option<String>,
    pub email: Option<String>,
    pub date_from: Option<DateTime<Utc>>,
    /// Exclusive upper bound.
    pub date_to: Option<DateTime<Utc>>,
    pub build_reason: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

/// Appends `entries` (none, one or several) on the caller's transaction.
pub(super) async fn append<'a>(
    conn: &mut sqlx::PgConnection,
    entries: impl IntoIterator<Item = &'a NewAuditLog>,
) -> Result<()> {
    for e in entries {
        sqlx::query!(
            r#"INSERT INTO audit_logs (id, user_id, organization_id, ip, user_agent, resource_type,
                                       resource_id, resource_target, action, diff, status_code,
                                       additional_fields, request_id, description)
               VALUES ($1, $2, $3, $4::text::inet, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"#,
            e.id,
            e.user_id,
            e.organization_id,
            e.ip,
            e.user_agent,
            e.resource_type,
            e.resource_id,
            e.resource_target,
            e.action,
            e.diff,
            e.status_code,
            e.additional_fields,
            e.request_id,
            e.description
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

impl Store {
    /// Records an event that writes nothing else (a refused login).
    pub async fn insert_audit_log(&self, entry: &NewAuditLog) -> Result<()> {
        timed("insert_audit_log", async {
            let mut conn = self.pool.acquire().await?;
            append(&mut conn, Some(entry)).await
        })
        .await
    }

    /// One page of entries, newest first, and how many match in all.
    pub async fn list_audit_logs(&self, q: &AuditQuery) -> Result<(Vec<AuditLogRow>, i64)> {
        timed("list_audit_logs", async {
            let rows = sqlx::query!(
                r#"SELECT a.id, a.time, a.user_id, a.organization_id, host(a.ip) AS ip,
                          a.user_agent, a.resource_type, a.resource_id, a.resource_target,
                          a.action, a.diff, a.status_code, a.additional_fields, a.request_id,
                          a.description
                   FROM audit_logs a LEFT JOIN users u ON u.id = a.user_id
                   WHERE ($1::text IS NULL OR a.resource_type = $1)
                     AND ($2::uuid IS NULL OR a.resource_id = $2)
                     AND ($3::text IS NULL OR a.action = $3)
                     AND ($4::text IS NULL OR lower(u.username) = lower($4))
                     AND ($5::text IS NULL OR lower(u.email) = lower($5))
                     AND ($6::timestamptz IS NULL OR a.time >= $6)
                     AND ($7::timestamptz IS NULL OR a.time < $7)
                     AND ($8::text IS NULL OR a.additional_fields->>'build_reason' = $8)
                   ORDER BY a.time DESC, a.id
                   LIMIT $9 OFFSET $10"#,
                q.resource_type,
                q.resource_id,
                q.action,
                q.username,
                q.email,
                q.date_from,
                q.date_to,
                q.build_reason,
                q.limit,
                q.offset
            )
            .fetch_all(&self.pool)
            .await?;
            // Counted apart from the page, so an offset past the end still reports the total.
            let total = sqlx::query_scalar!(
                r#"SELECT count(*) AS "n!"
                   FROM audit_logs a LEFT JOIN users u ON u.id = a.user_id
                   WHERE ($1::text IS NULL OR a.resource_type = $1)
                     AND ($2::uuid IS NULL OR a.resource_id = $2)
                     AND ($3::text IS NULL OR a.action = $3)
                     AND ($4::text IS NULL OR lower(u.username) = lower($4))
                     AND ($5::text IS NULL OR lower(u.email) = lower($5))
                     AND ($6::timestamptz IS NULL OR a.time >= $6)
                     AND ($7::timestamptz IS NULL OR a.time < $7)
                     AND ($8::text IS NULL OR a.additional_fields->>'build_reason' = $8)"#,
                q.resource_type,
                q.resource_id,
                q.action,
                q.username,
                q.email,
                q.date_from,
                q.date_to,
                q.build_reason
            )
            .fetch_one(&self.pool)
            .await?;
            let rows = rows
                .into_iter()
                .map(|r| AuditLogRow {
                    id: r.id,
                    time: r.time,
                    user_id: r.user_id,
                    organization_id: r.organization_id,
                    ip: r.ip,
                    user_agent: r.user_agent,
                    resource_type: r.resource_type,
                    resource_id: r.resource_id,
                    resource_target: r.resource_target,
                    action: r.action,
                    diff: r.diff,
                    status_code: r.status_code,
                    additional_fields: r.additional_fields,
                    request_id: r.request_id,
                    description: r.description,
                })
                .collect();
            Ok((rows, total))
        })
        .await
    }

    /// The users entries name, deleted ones included (what they did outlives them).
    pub async fn audit_actors(&self, ids: &[Uuid]) -> Result<Vec<UserRow>> {
        timed("audit_actors", async {
            Ok(
                sqlx::query_as!(UserRow, "SELECT * FROM users WHERE id = ANY($1)", ids)
                    .fetch_all(&self.pool)
                    .await?,
            )
        })
        .await
    }

    /// Deletes entries older than `before`; returns how many.
    pub async fn purge_audit_logs(&self, before: DateTime<Utc>) -> Result<u64> {
        timed("purge_audit_logs", async {
            let done = sqlx::query!("DELETE FROM audit_logs WHERE time < $1", before)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }
}
