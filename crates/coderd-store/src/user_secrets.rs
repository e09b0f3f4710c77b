//! `user_secrets`: secrets users keep for their workspaces. Values arrive here already sealed
//! (`coderd_core::secrets` seals and opens them); nothing in this file sees a plaintext value.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSecretRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub description: String,
    /// Sealed: `<key id>:<base64 of nonce, ciphertext and tag>`.
    pub value: String,
    pub value_key_id: String,
    pub env_name: String,
    pub file_path: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A partial update; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UserSecretChanges {
    /// Sealed value and the id of the key that sealed it.
    pub value: Option<(String, String)>,
    pub description: Option<String>,
    pub env_name: Option<String>,
    pub file_path: Option<String>,
}

impl Store {
    pub async fn insert_user_secret(&self, row: &UserSecretRow) -> Result<UserSecretRow> {
        timed("insert_user_secret", async {
            Ok(sqlx::query_as!(
                UserSecretRow,
                r#"INSERT INTO user_secrets (id, user_id, name, description, value, value_key_id,
                       env_name, file_path, created_at, updated_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now())
                   RETURNING *"#,
                row.id,
                row.user_id,
                row.name,
                row.description,
                row.value,
                row.value_key_id,
                row.env_name,
                row.file_path
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// A user's secrets, by name.
    pub async fn user_secrets(&self, user: Uuid) -> Result<Vec<UserSecretRow>> {
        timed("user_secrets", async {
            Ok(sqlx::query_as!(
                UserSecretRow,
                "SELECT * FROM user_secrets WHERE user_id = $1 ORDER BY name",
                user
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn user_secret(&self, user: Uuid, name: &str) -> Result<Option<UserSecretRow>> {
        timed("user_secret", async {
            Ok(sqlx::query_as!(
                UserSecretRow,
                "SELECT * FROM user_secrets WHERE user_id = $1 AND name = $2",
                user,
                name
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    /// Applies `changes` to the secret with this id; `NotFound` if it is gone.
    pub async fn update_user_secret(
        &self,
        id: Uuid,
        changes: &UserSecretChanges,
    ) -> Result<UserSecretRow> {
        let (value, key_id) = changes.value.clone().unzip();
        timed("update_user_secret", async {
            Ok(sqlx::query_as!(
                UserSecretRow,
                r#"UPDATE user_secrets SET
                       value = COALESCE($2, value),
                       value_key_id = COALESCE($3, value_key_id),
                       description = COALESCE($4, description),
                       env_name = COALESCE($5, env_name),
                       file_path = COALESCE($6, file_path),
                       updated_at = now()
                   WHERE id = $1
                   RETURNING *"#,
                id,
                value,
                key_id,
                changes.description,
                changes.env_name,
                changes.file_path
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Whether a secret of that name existed (and is now deleted).
    pub async fn delete_user_secret(&self, user: Uuid, name: &str) -> Result<bool> {
        timed("delete_user_secret", async {
            let done = sqlx::query!(
                "DELETE FROM user_secrets WHERE user_id = $1 AND name = $2",
                user,
                name
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
