//! `site_configs`: deployment-wide values.

use uuid::Uuid;

use super::{Result, Store, timed};

impl Store {
    /// The deployment's id, created on first use and stable afterwards.
    pub async fn deployment_id(&self) -> Result<String> {
        timed("deployment_id", async {
            sqlx::query!(
                "INSERT INTO site_configs (key, value) VALUES ('deployment_id', $1) ON CONFLICT (key) DO NOTHING",
                Uuid::new_v4().to_string()
            )
            .execute(&self.pool)
            .await?;
            Ok(sqlx::query_scalar!("SELECT value FROM site_configs WHERE key = 'deployment_id'")
                .fetch_one(&self.pool)
                .await?)
        })
        .await
    }

    /// A deployment-wide secret under `key`, created by `generate` on first use; concurrent
    /// first uses (several replicas starting) agree on one value.
    pub async fn site_secret(
        &self,
        key: &str,
        generate: impl FnOnce() -> String,
    ) -> Result<String> {
        timed("site_secret", async {
            sqlx::query!(
                "INSERT INTO site_configs (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                key,
                generate()
            )
            .execute(&self.pool)
            .await?;
            Ok(sqlx::query_scalar!("SELECT value FROM site_configs WHERE key = $1", key)
                .fetch_one(&self.pool)
                .await?)
        })
        .await
    }

    /// A deployment-wide setting, when one was saved.
    pub async fn site_config(&self, key: &str) -> Result<Option<String>> {
        timed("site_config", async {
            Ok(
                sqlx::query_scalar!("SELECT value FROM site_configs WHERE key = $1", key)
                    .fetch_optional(&self.pool)
                    .await?,
            )
        })
        .await
    }

    /// Saves a deployment-wide setting, replacing what was there.
    pub async fn set_site_config(&self, key: &str, value: &str) -> Result<()> {
        timed("set_site_config", async {
            sqlx::query!(
                "INSERT INTO site_configs (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                key,
                value
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }
}
