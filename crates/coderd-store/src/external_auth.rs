//! `external_auth_links` and `gitsshkeys`: users' links with git providers and their git SSH
//! keys. Tokens and private keys arrive here sealed (`coderd_core::external_auth` seals and
//! opens them); nothing in this file sees one in plain text.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{Result, Store, timed};

/// A link as stored: every token sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAuthLinkRow {
    pub user_id: Uuid,
    pub provider_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub oauth_access_token: String,
    pub oauth_refresh_token: String,
    pub oauth_expiry: Option<DateTime<Utc>>,
    pub oauth_extra: String,
    pub oauth_key_id: String,
    pub oauth_refresh_failure_reason: String,
}

/// What a link's tokens become (on linking, or after a refresh), sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedLinkTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expiry: Option<DateTime<Utc>>,
    pub extra: String,
    pub key_id: String,
}

/// A link held for refreshing: the row stays locked (`FOR UPDATE`) until the lock is saved or
/// dropped, so replicas racing to refresh the same link take turns and the later ones find
/// the fresh token instead of spending a refresh token that may be single-use.
pub struct LinkLock {
    tx: Transaction<'static, Postgres>,
    pub row: ExternalAuthLinkRow,
}

impl LinkLock {
    /// Stores the refreshed tokens and releases the row.
    pub async fn save(mut self, tokens: &SealedLinkTokens) -> Result<ExternalAuthLinkRow> {
        let row = sqlx::query_as!(
            ExternalAuthLinkRow,
            "UPDATE external_auth_links SET oauth_access_token = $3, oauth_refresh_token = $4,
                 oauth_expiry = $5, oauth_extra = $6, oauth_key_id = $7,
                 oauth_refresh_failure_reason = '', updated_at = now()
             WHERE user_id = $1 AND provider_id = $2 RETURNING *",
            self.row.user_id,
            self.row.provider_id,
            tokens.access_token,
            tokens.refresh_token,
            tokens.expiry,
            tokens.extra,
            tokens.key_id
        )
        .fetch_one(&mut *self.tx)
        .await?;
        self.tx.commit().await?;
        Ok(row)
    }

    /// The provider refused the refresh token: it is cleared (it will never work again) and
    /// the reason kept for the user, who must link again.
    pub async fn refused(mut self, reason: &str) -> Result<ExternalAuthLinkRow> {
        let row = sqlx::query_as!(
            ExternalAuthLinkRow,
            "UPDATE external_auth_links SET oauth_refresh_token = '',
                 oauth_refresh_failure_reason = $3, updated_at = now()
             WHERE user_id = $1 AND provider_id = $2 RETURNING *",
            self.row.user_id,
            self.row.provider_id,
            reason
        )
        .fetch_one(&mut *self.tx)
        .await?;
        self.tx.commit().await?;
        Ok(row)
    }
}

/// A user's git SSH key as stored: the private half sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSshKeyRow {
    pub user_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub private_key: String,
    pub public_key: String,
}

impl Store {
    pub async fn external_auth_links(&self, user: Uuid) -> Result<Vec<ExternalAuthLinkRow>> {
        timed("external_auth_links", async {
            Ok(sqlx::query_as!(
                ExternalAuthLinkRow,
                "SELECT * FROM external_auth_links WHERE user_id = $1 ORDER BY provider_id",
                user
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn external_auth_link(
        &self,
        user: Uuid,
        provider: &str,
    ) -> Result<Option<ExternalAuthLinkRow>> {
        timed("external_auth_link", async {
            Ok(sqlx::query_as!(
                ExternalAuthLinkRow,
                "SELECT * FROM external_auth_links WHERE user_id = $1 AND provider_id = $2",
                user,
                provider
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    /// Locks the link for a refresh; `None` when there is none.
    pub async fn lock_external_auth_link(
        &self,
        user: Uuid,
        provider: &str,
    ) -> Result<Option<LinkLock>> {
        timed("lock_external_auth_link", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                ExternalAuthLinkRow,
                "SELECT * FROM external_auth_links WHERE user_id = $1 AND provider_id = $2
                 FOR UPDATE",
                user,
                provider
            )
            .fetch_optional(&mut *tx)
            .await?;
            Ok(row.map(|row| LinkLock { tx, row }))
        })
        .await
    }

    /// Creates or replaces `user`'s link with `provider` (linking again starts afresh).
    pub async fn upsert_external_auth_link(
        &self,
        user: Uuid,
        provider: &str,
        tokens: &SealedLinkTokens,
    ) -> Result<ExternalAuthLinkRow> {
        timed("upsert_external_auth_link", async {
            Ok(sqlx::query_as!(
                ExternalAuthLinkRow,
                "INSERT INTO external_auth_links (user_id, provider_id, oauth_access_token,
                     oauth_refresh_token, oauth_expiry, oauth_extra, oauth_key_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (user_id, provider_id) DO UPDATE SET
                     oauth_access_token = EXCLUDED.oauth_access_token,
                     oauth_refresh_token = EXCLUDED.oauth_refresh_token,
                     oauth_expiry = EXCLUDED.oauth_expiry, oauth_extra = EXCLUDED.oauth_extra,
                     oauth_key_id = EXCLUDED.oauth_key_id,
                     oauth_refresh_failure_reason = '', updated_at = now()
                 RETURNING *",
                user,
                provider,
                tokens.access_token,
                tokens.refresh_token,
                tokens.expiry,
                tokens.extra,
                tokens.key_id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Removes the link; whether there was one.
    pub async fn delete_external_auth_link(&self, user: Uuid, provider: &str) -> Result<bool> {
        timed("delete_external_auth_link", async {
            let done = sqlx::query!(
                "DELETE FROM external_auth_links WHERE user_id = $1 AND provider_id = $2",
                user,
                provider
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    /// The links whose tokens were sealed by a key other than `key_id` (for `dbcrypt rotate`).
    pub async fn external_auth_links_not_sealed_by(
        &self,
        key_id: &str,
    ) -> Result<Vec<ExternalAuthLinkRow>> {
        timed("external_auth_links_not_sealed_by", async {
            Ok(sqlx::query_as!(
                ExternalAuthLinkRow,
                "SELECT * FROM external_auth_links WHERE oauth_key_id <> $1",
                key_id
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Re-seals a link's tokens in place, unless it changed since it was read.
    pub async fn reseal_external_auth_link(
        &self,
        read: &ExternalAuthLinkRow,
        tokens: &SealedLinkTokens,
    ) -> Result<bool> {
        timed("reseal_external_auth_link", async {
            let done = sqlx::query!(
                "UPDATE external_auth_links SET oauth_access_token = $4, oauth_refresh_token = $5,
                     oauth_extra = $6, oauth_key_id = $7
                 WHERE user_id = $1 AND provider_id = $2 AND updated_at = $3",
                read.user_id,
                read.provider_id,
                read.updated_at,
                tokens.access_token,
                tokens.refresh_token,
                tokens.extra,
                tokens.key_id
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    pub async fn gitsshkey(&self, user: Uuid) -> Result<Option<GitSshKeyRow>> {
        timed("gitsshkey", async {
            Ok(sqlx::query_as!(
                GitSshKeyRow,
                "SELECT * FROM gitsshkeys WHERE user_id = $1",
                user
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    /// Stores `user`'s key; with `replace` a key already there is replaced (a reset), else
    /// it is kept and returned (two first reads racing keep one key).
    pub async fn put_gitsshkey(
        &self,
        user: Uuid,
        private_key: &str,
        public_key: &str,
        replace: bool,
    ) -> Result<GitSshKeyRow> {
        timed("put_gitsshkey", async {
            let mut tx = self.pool.begin().await?;
            if replace {
                sqlx::query!("DELETE FROM gitsshkeys WHERE user_id = $1", user)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query!(
                "INSERT INTO gitsshkeys (user_id, private_key, public_key) VALUES ($1, $2, $3)
                 ON CONFLICT (user_id) DO NOTHING",
                user,
                private_key,
                public_key
            )
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query_as!(
                GitSshKeyRow,
                "SELECT * FROM gitsshkeys WHERE user_id = $1",
                user
            )
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }
}
