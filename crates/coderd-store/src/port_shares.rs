//! `workspace_agent_port_shares`: ports of a workspace's agents shared beyond the owner.

use uuid::Uuid;

use super::{Result, Store, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortShareRow {
    pub workspace_id: Uuid,
    pub agent_name: String,
    pub port: i32,
    pub share_level: String,
    pub protocol: String,
}

impl Store {
    pub async fn port_shares(&self, workspace: Uuid) -> Result<Vec<PortShareRow>> {
        timed("port_shares", async {
            Ok(sqlx::query_as!(
                PortShareRow,
                "SELECT * FROM workspace_agent_port_shares WHERE workspace_id = $1
                 ORDER BY agent_name, port",
                workspace
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// The share of one port, if any (the app proxy's question).
    pub async fn port_share(
        &self,
        workspace: Uuid,
        agent: &str,
        port: i32,
    ) -> Result<Option<PortShareRow>> {
        timed("port_share", async {
            Ok(sqlx::query_as!(
                PortShareRow,
                "SELECT * FROM workspace_agent_port_shares
                 WHERE workspace_id = $1 AND agent_name = $2 AND port = $3",
                workspace,
                agent,
                port
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    /// Creates or replaces the share of a port.
    pub async fn upsert_port_share(&self, share: &PortShareRow) -> Result<PortShareRow> {
        timed("upsert_port_share", async {
            Ok(sqlx::query_as!(
                PortShareRow,
                "INSERT INTO workspace_agent_port_shares
                     (workspace_id, agent_name, port, share_level, protocol)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (workspace_id, agent_name, port)
                 DO UPDATE SET share_level = EXCLUDED.share_level, protocol = EXCLUDED.protocol
                 RETURNING *",
                share.workspace_id,
                share.agent_name,
                share.port,
                share.share_level,
                share.protocol
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// Removes a share; whether there was one.
    pub async fn delete_port_share(&self, workspace: Uuid, agent: &str, port: i32) -> Result<bool> {
        timed("delete_port_share", async {
            let done = sqlx::query!(
                "DELETE FROM workspace_agent_port_shares
                 WHERE workspace_id = $1 AND agent_name = $2 AND port = $3",
                workspace,
                agent,
                port
            )
            .execute(&self.pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
