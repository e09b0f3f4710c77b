//! What changes about a workspace without a build: its name, whether its owner pinned it, and
//! (to repair it by hand) a build's Terraform state.

use uuid::Uuid;

use super::jobs::notify;
use super::{NewAuditLog, Result, Store, audit, timed};
use crate::pubsub::channels;

impl Store {
    /// Renames a workspace; [`super::Error::Conflict`] when its owner has one by that name.
    pub async fn rename_workspace(
        &self,
        workspace: Uuid,
        name: &str,
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("rename_workspace", async {
            let mut tx = self.pool.begin().await?;
            let renamed = sqlx::query!(
                "UPDATE workspaces SET name = $2, updated_at = now() WHERE id = $1 AND NOT deleted",
                workspace,
                name
            )
            .execute(&mut *tx)
            .await?;
            if renamed.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Pins or unpins a workspace for its owner.
    pub async fn set_workspace_favorite(&self, workspace: Uuid, favorite: bool) -> Result<()> {
        timed("set_workspace_favorite", async {
            let mut tx = self.pool.begin().await?;
            let changed = sqlx::query!(
                "UPDATE workspaces SET favorite = $2 WHERE id = $1 AND NOT deleted",
                workspace,
                favorite
            )
            .execute(&mut *tx)
            .await?;
            if changed.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            notify(&mut tx, channels::WORKSPACE_UPDATED, workspace.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Replaces a build's Terraform state (`coder state push --no-build`).
    pub async fn replace_build_state(
        &self,
        build: Uuid,
        provisioner_state: &[u8],
        log: Option<&NewAuditLog>,
    ) -> Result<()> {
        timed("replace_build_state", async {
            let mut tx = self.pool.begin().await?;
            let replaced = sqlx::query!(
                "UPDATE workspace_builds SET provisioner_state = $2, updated_at = now() WHERE id = $1",
                build,
                provisioner_state
            )
            .execute(&mut *tx)
            .await?;
            if replaced.rows_affected() == 0 {
                return Err(super::Error::NotFound);
            }
            audit::append(&mut tx, log).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
