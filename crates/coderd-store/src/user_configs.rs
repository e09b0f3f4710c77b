//! `user_configs`: each user's own settings, one row per key.

use std::collections::HashMap;

use uuid::Uuid;

use super::audit::{self, NewAuditLog};
use super::users::UserRow;
use super::{Result, Store, timed};

impl Store {
    /// Every setting `user` saved, by key.
    pub async fn user_configs(&self, user: Uuid) -> Result<HashMap<String, String>> {
        timed("user_configs", async {
            let rows = sqlx::query!(
                "SELECT key, value FROM user_configs WHERE user_id = $1",
                user
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.key, r.value)).collect())
        })
        .await
    }

    /// Saves several of `user`'s settings at once, replacing what was there.
    pub async fn set_user_configs(&self, user: Uuid, values: &[(&str, &str)]) -> Result<()> {
        timed("set_user_configs", async {
            let (keys, values): (Vec<String>, Vec<String>) = values
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .unzip();
            sqlx::query!(
                "INSERT INTO user_configs (user_id, key, value)
                 SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS t(k, v)
                 ON CONFLICT (user_id, key) DO UPDATE SET value = EXCLUDED.value",
                user,
                &keys,
                &values
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// Changes a user's username and display name; a taken username is a conflict.
    pub async fn update_user_profile(
        &self,
        id: Uuid,
        username: &str,
        name: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<UserRow> {
        timed("update_user_profile", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query_as!(
                UserRow,
                "UPDATE users SET username = $2, name = $3, updated_at = now()
                 WHERE id = $1 AND NOT deleted RETURNING *",
                id,
                username,
                name
            )
            .fetch_one(&mut *tx)
            .await?;
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// The value `user` last gave each parameter of `template`'s versions, from their
    /// workspaces' builds, ephemeral parameters left out (they are one build's only).
    pub async fn recent_parameter_values(
        &self,
        user: Uuid,
        template: Uuid,
    ) -> Result<Vec<(String, String)>> {
        timed("recent_parameter_values", async {
            let rows = sqlx::query!(
                r#"SELECT DISTINCT ON (p.name) p.name AS "name!", p.value AS "value!"
                   FROM workspace_build_parameters p
                   JOIN workspace_builds b ON b.id = p.workspace_build_id
                   JOIN workspaces w ON w.id = b.workspace_id
                   JOIN template_versions v ON v.id = b.template_version_id
                   WHERE w.owner_id = $1 AND w.template_id = $2
                     AND NOT EXISTS (
                         SELECT 1 FROM jsonb_array_elements(v.rich_parameters) d
                         WHERE d->>'name' = p.name AND (d->>'ephemeral')::boolean)
                   ORDER BY p.name, b.created_at DESC"#,
                user,
                template
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(rows.into_iter().map(|r| (r.name, r.value)).collect())
        })
        .await
    }

    /// The claims `user`'s last sign-in through `login_type` brought; `None` without a link.
    pub async fn link_claims(
        &self,
        user: Uuid,
        login_type: &str,
    ) -> Result<Option<serde_json::Value>> {
        timed("link_claims", async {
            Ok(sqlx::query_scalar!(
                "SELECT claims FROM user_links WHERE user_id = $1 AND login_type = $2",
                user,
                login_type
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }
}
