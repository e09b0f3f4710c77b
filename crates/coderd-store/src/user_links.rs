//! `user_links`: a user's identity at an external sign-in provider, and the provider's tokens
//! (already sealed by the caller; the store never sees them in the clear).

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::groups::{GroupSync, sync_groups};
use super::{NewAuditLog, NewUser, Result, Store, UserRow, audit, insert_user, timed};

/// What a successful external sign-in records about the link.
#[derive(Debug, Clone)]
pub struct LinkUpdate {
    pub login_type: String,
    /// The provider's stable id for the person (`<issuer>||<subject>` for OIDC).
    pub linked_id: String,
    /// Sealed, or empty when tokens are not kept.
    pub oauth_access_token: String,
    pub oauth_refresh_token: String,
    pub oauth_expiry: Option<DateTime<Utc>>,
    pub claims: Value,
}

impl Store {
    /// The (not deleted) user linked to `linked_id` at this provider.
    pub async fn user_by_link(&self, login_type: &str, linked_id: &str) -> Result<UserRow> {
        timed("user_by_link", async {
            Ok(sqlx::query_as!(
                UserRow,
                r#"SELECT u.* FROM users u
                   JOIN user_links l ON l.user_id = u.id
                   WHERE l.login_type = $1 AND l.linked_id = $2 AND NOT u.deleted"#,
                login_type,
                linked_id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Whether a (not deleted) user has this username, case-insensitively.
    pub async fn username_taken(&self, username: &str) -> Result<bool> {
        timed("username_taken", async {
            Ok(sqlx::query_scalar!(
                r#"SELECT EXISTS (SELECT 1 FROM users WHERE lower(username) = lower($1) AND NOT deleted) AS "e!""#,
                username
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Creates a user signing in for the first time together with its link, atomically: a
    /// failure leaves neither.
    pub async fn create_linked_user(
        &self,
        user: NewUser,
        link: &LinkUpdate,
        log: Option<&NewAuditLog>,
    ) -> Result<UserRow> {
        self.create_synced_user(user, link, None, log).await
    }

    /// [`Store::create_linked_user`], also setting the user's synced groups in the same
    /// transaction.
    pub async fn create_synced_user(
        &self,
        user: NewUser,
        link: &LinkUpdate,
        groups: Option<&GroupSync>,
        log: Option<&NewAuditLog>,
    ) -> Result<UserRow> {
        timed("create_linked_user", async {
            let mut tx = self.pool.begin().await?;
            let now = Utc::now();
            let row = insert_user(&mut tx, &user, now).await?;
            upsert_link(&mut tx, row.id, link, now).await?;
            if let Some(groups) = groups {
                sync_groups(&mut tx, row.id, groups).await?;
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Records a returning user's sign-in on its link (created if the user had none).
    pub async fn update_link(&self, user_id: Uuid, link: &LinkUpdate) -> Result<()> {
        self.update_synced_link(user_id, link, None).await
    }

    /// [`Store::update_link`], also setting the user's synced groups in the same transaction.
    pub async fn update_synced_link(
        &self,
        user_id: Uuid,
        link: &LinkUpdate,
        groups: Option<&GroupSync>,
    ) -> Result<()> {
        timed("update_link", async {
            let mut tx = self.pool.begin().await?;
            upsert_link(&mut tx, user_id, link, Utc::now()).await?;
            if let Some(groups) = groups {
                sync_groups(&mut tx, user_id, groups).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

async fn upsert_link(
    tx: &mut sqlx::PgConnection,
    user_id: Uuid,
    link: &LinkUpdate,
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO user_links (user_id, login_type, linked_id, oauth_access_token,
                                   oauth_refresh_token, oauth_expiry, claims, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
           ON CONFLICT (user_id, login_type) DO UPDATE SET
               linked_id = EXCLUDED.linked_id,
               oauth_access_token = EXCLUDED.oauth_access_token,
               oauth_refresh_token = EXCLUDED.oauth_refresh_token,
               oauth_expiry = EXCLUDED.oauth_expiry,
               claims = EXCLUDED.claims,
               updated_at = EXCLUDED.updated_at"#,
        user_id,
        link.login_type,
        link.linked_id,
        link.oauth_access_token,
        link.oauth_refresh_token,
        link.oauth_expiry,
        link.claims,
        now
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
