//! `api_keys`: session tokens and named API tokens, stored as hashes.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewAuditLog, Result, Store, UserRow, audit, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRow {
    pub id: String,
    pub hashed_secret: Vec<u8>,
    pub user_id: Uuid,
    pub login_type: String,
    pub token_name: String,
    pub scope: String,
    pub lifetime_seconds: i64,
    pub expires_at: DateTime<Utc>,
    pub last_used: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub id: String,
    pub hashed_secret: Vec<u8>,
    pub user_id: Uuid,
    pub login_type: String,
    pub token_name: String,
    pub scope: String,
    pub lifetime_seconds: i64,
    pub expires_at: DateTime<Utc>,
}

/// A key with the user it belongs to and what the user belongs to: everything authenticating
/// a request reads, in one statement.
#[derive(Debug, Clone)]
pub struct KeyHolder {
    pub key: ApiKeyRow,
    pub user: UserRow,
    /// Organizations and the user's roles in each.
    pub memberships: Vec<(Uuid, Vec<String>)>,
    /// The groups the user was added to (the Everyone groups are implied by memberships).
    pub groups: Vec<Uuid>,
}

impl Store {
    pub async fn insert_api_key(
        &self,
        key: &NewApiKey,
        log: Option<&NewAuditLog>,
    ) -> Result<ApiKeyRow> {
        timed("insert_api_key", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                ApiKeyRow,
                r#"INSERT INTO api_keys (id, hashed_secret, user_id, login_type, token_name, scope,
                                         lifetime_seconds, expires_at, last_used, created_at, updated_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now(), now())
                   RETURNING *"#,
                key.id,
                key.hashed_secret,
                key.user_id,
                key.login_type,
                key.token_name,
                key.scope,
                key.lifetime_seconds,
                key.expires_at
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// The key, its user and the user's memberships (organization, roles) in one round trip:
    /// this runs on every authenticated request.
    pub async fn api_key_with_user(&self, id: &str) -> Result<KeyHolder> {
        timed("api_key_with_user", async {
            let r = sqlx::query!(
                r#"SELECT k.id, k.hashed_secret, k.user_id, k.login_type AS key_login_type,
                          k.token_name, k.scope, k.lifetime_seconds, k.expires_at, k.last_used,
                          k.created_at AS key_created_at, k.updated_at AS key_updated_at,
                          u.email, u.username, u.name, u.hashed_password, u.status, u.rbac_roles,
                          u.login_type, u.avatar_url, u.created_at, u.updated_at, u.last_seen_at,
                          u.deleted,
                          COALESCE((SELECT array_agg(m.organization_id ORDER BY m.organization_id)
                                    FROM organization_members m WHERE m.user_id = u.id), '{}') AS "member_orgs!",
                          COALESCE((SELECT array_agg(array_to_string(m.roles, ',') ORDER BY m.organization_id)
                                    FROM organization_members m WHERE m.user_id = u.id), '{}') AS "member_roles!",
                          COALESCE((SELECT array_agg(g.group_id ORDER BY g.group_id)
                                    FROM group_members g WHERE g.user_id = u.id), '{}') AS "groups!"
                   FROM api_keys k JOIN users u ON u.id = k.user_id
                   WHERE k.id = $1"#,
                id
            )
            .fetch_one(&self.pool)
            .await?;
            let key = ApiKeyRow {
                id: r.id,
                hashed_secret: r.hashed_secret,
                user_id: r.user_id,
                login_type: r.key_login_type,
                token_name: r.token_name,
                scope: r.scope,
                lifetime_seconds: r.lifetime_seconds,
                expires_at: r.expires_at,
                last_used: r.last_used,
                created_at: r.key_created_at,
                updated_at: r.key_updated_at,
            };
            let memberships = r
                .member_orgs
                .into_iter()
                .zip(r.member_roles)
                .map(|(org, roles)| {
                    let roles = roles.split(',').filter(|r| !r.is_empty()).map(str::to_string).collect();
                    (org, roles)
                })
                .collect();
            let user = UserRow {
                id: r.user_id,
                email: r.email,
                username: r.username,
                name: r.name,
                hashed_password: r.hashed_password,
                status: r.status,
                rbac_roles: r.rbac_roles,
                login_type: r.login_type,
                avatar_url: r.avatar_url,
                created_at: r.created_at,
                updated_at: r.updated_at,
                last_seen_at: r.last_seen_at,
                deleted: r.deleted,
            };
            Ok(KeyHolder {
                key,
                user,
                memberships,
                groups: r.groups,
            })
        })
        .await
    }

    /// Records use of a key, optionally pushing its expiry out (session refresh), and the
    /// user's last-seen time.
    pub async fn touch_api_key(
        &self,
        id: &str,
        user_id: Uuid,
        expires_at: DateTime<Utc>,
    ) -> Result<()> {
        timed("touch_api_key", async {
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                "UPDATE api_keys SET last_used = now(), expires_at = $2, updated_at = now() WHERE id = $1",
                id,
                expires_at
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                "UPDATE users SET last_seen_at = now() WHERE id = $1",
                user_id
            )
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    pub async fn api_key_by_id(&self, id: &str) -> Result<ApiKeyRow> {
        timed("api_key_by_id", async {
            Ok(
                sqlx::query_as!(ApiKeyRow, "SELECT * FROM api_keys WHERE id = $1", id)
                    .fetch_one(&self.pool)
                    .await?,
            )
        })
        .await
    }

    pub async fn api_key_by_name(&self, user: Uuid, name: &str) -> Result<ApiKeyRow> {
        timed("api_key_by_name", async {
            Ok(sqlx::query_as!(
                ApiKeyRow,
                "SELECT * FROM api_keys WHERE user_id = $1 AND token_name = $2 AND login_type = 'token'",
                user,
                name
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// The named API tokens of `user` (sessions are not listed).
    pub async fn api_tokens_of_user(&self, user: Uuid) -> Result<Vec<ApiKeyRow>> {
        timed("api_tokens_of_user", async {
            Ok(sqlx::query_as!(
                ApiKeyRow,
                "SELECT * FROM api_keys WHERE user_id = $1 AND login_type = 'token' ORDER BY created_at",
                user
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn delete_api_key(&self, id: &str, log: Option<&NewAuditLog>) -> Result<()> {
        timed("delete_api_key", async {
            let mut tx = self.pool.begin().await?;
            let deleted = sqlx::query!("DELETE FROM api_keys WHERE id = $1", id)
                .execute(&mut *tx)
                .await?;
            if deleted.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Ends the key `id` now while keeping its row (it lists as expired): Coder's default for
    /// removing a token, which leaves a trace of what was used.
    pub async fn expire_api_key(&self, id: &str, log: Option<&NewAuditLog>) -> Result<()> {
        timed("expire_api_key", async {
            let mut tx = self.pool.begin().await?;
            let expired = sqlx::query!(
                "UPDATE api_keys SET expires_at = LEAST(expires_at, now()), updated_at = now()
                 WHERE id = $1",
                id
            )
            .execute(&mut *tx)
            .await?;
            if expired.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
