//! The sealed tokens of external agents: written with a build's agents when it completes,
//! read when the workspace's owner asks for an agent's credentials. Values arrive sealed
//! (`coderd_core::external_agents` seals and opens them).

use uuid::Uuid;

use super::{Result, Store, timed};

/// A sealed token for one agent of a completing build.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedAgentToken {
    pub agent_name: String,
    pub sealed: String,
}

impl std::fmt::Debug for SealedAgentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedAgentToken")
            .field("agent_name", &self.agent_name)
            .finish_non_exhaustive()
    }
}

/// An agent of a workspace's latest build, as its credentials need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAgentRow {
    pub job_id: Uuid,
    pub operating_system: String,
    pub architecture: String,
    pub auth_instance_id: Option<String>,
    pub sealed_token: Option<String>,
}

/// The workspace's latest build, as far as external agents go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestBuildExternal {
    pub job_id: Uuid,
    pub has_external_agent: bool,
}

/// Stores the sealed tokens of a completing build's agents, in its completion transaction.
pub(crate) async fn record_external_tokens(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    tokens: &[SealedAgentToken],
) -> Result<()> {
    for token in tokens {
        sqlx::query!(
            r#"INSERT INTO workspace_agent_external_tokens (agent_id, sealed)
               SELECT a.id, $3 FROM workspace_agents a
               JOIN workspace_resources r ON r.id = a.resource_id
               WHERE r.job_id = $1 AND a.name = $2 AND a.parent_id IS NULL
               ON CONFLICT (agent_id) DO UPDATE SET sealed = excluded.sealed"#,
            job,
            token.agent_name,
            token.sealed
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

impl Store {
    pub async fn latest_build_external(&self, workspace: Uuid) -> Result<LatestBuildExternal> {
        timed("latest_build_external", async {
            Ok(sqlx::query_as!(
                LatestBuildExternal,
                r#"SELECT job_id, coalesce(has_external_agent, false) AS "has_external_agent!"
                   FROM workspace_builds WHERE workspace_id = $1
                   ORDER BY build_number DESC LIMIT 1"#,
                workspace
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// The agent called `name` among a build job's agents.
    pub async fn build_agent_by_name(
        &self,
        job: Uuid,
        name: &str,
    ) -> Result<Option<ExternalAgentRow>> {
        timed("build_agent_by_name", async {
            Ok(sqlx::query_as!(
                ExternalAgentRow,
                r#"SELECT r.job_id, a.operating_system, a.architecture, a.auth_instance_id,
                          t.sealed AS "sealed_token?"
                   FROM workspace_agents a JOIN workspace_resources r ON r.id = a.resource_id
                   LEFT JOIN workspace_agent_external_tokens t ON t.agent_id = a.id
                   WHERE r.job_id = $1 AND a.name = $2 AND a.parent_id IS NULL
                   LIMIT 1"#,
                job,
                name
            )
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }
}
