//! Where a build's time went: the provisioner's stages (recorded with the job's result), the
//! runs of its agents' scripts (reported by the agents) and its agents' first connections.

use chrono::{DateTime, Utc};
use codersdk::agentsdk::ScriptTiming;
use uuid::Uuid;

use super::{Result, Store, timed};

#[derive(Debug, Clone)]
pub struct ProvisionerTimingRow {
    pub job_id: Uuid,
    pub stage: String,
    pub source: String,
    pub action: String,
    pub resource: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ScriptTimingRow {
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub exit_code: i32,
    pub stage: String,
    pub status: String,
    pub display_name: String,
    pub agent_id: Uuid,
    pub agent_name: String,
}

#[derive(Debug, Clone)]
pub struct ConnectionTimingRow {
    pub agent_id: Uuid,
    pub agent_name: String,
    pub created_at: DateTime<Utc>,
    pub first_connected_at: DateTime<Utc>,
}

/// A build's timeline, each part in start order.
#[derive(Debug, Clone, Default)]
pub struct BuildTimings {
    pub provisioner: Vec<ProvisionerTimingRow>,
    pub scripts: Vec<ScriptTimingRow>,
    pub connections: Vec<ConnectionTimingRow>,
}

impl Store {
    /// Records the script runs `agent` reports; runs of scripts that are not the agent's own
    /// are ignored, and a run reported twice is kept once.
    pub async fn insert_script_timings(&self, agent: Uuid, timings: &[ScriptTiming]) -> Result<()> {
        timed("insert_script_timings", async {
            let scripts: Vec<Uuid> = timings.iter().map(|t| t.script_id).collect();
            let started: Vec<DateTime<Utc>> = timings.iter().map(|t| t.started_at).collect();
            let ended: Vec<DateTime<Utc>> = timings.iter().map(|t| t.ended_at).collect();
            let codes: Vec<i32> = timings.iter().map(|t| t.exit_code).collect();
            let stages: Vec<String> = timings.iter().map(|t| t.stage.as_str().into()).collect();
            let statuses: Vec<String> = timings.iter().map(|t| t.status.as_str().into()).collect();
            sqlx::query!(
                r#"INSERT INTO workspace_agent_script_timings
                       (script_id, started_at, ended_at, exit_code, stage, status)
                   SELECT t.script_id, t.started_at, t.ended_at, t.exit_code, t.stage, t.status
                   FROM unnest($2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::int[],
                               $6::text[], $7::text[])
                        AS t(script_id, started_at, ended_at, exit_code, stage, status)
                   JOIN workspace_agent_scripts s ON s.id = t.script_id AND s.agent_id = $1
                   ON CONFLICT DO NOTHING"#,
                agent,
                &scripts,
                &started,
                &ended,
                &codes,
                &stages,
                &statuses,
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn build_timings(&self, build: Uuid) -> Result<BuildTimings> {
        timed("build_timings", async {
            let provisioner = sqlx::query_as!(
                ProvisionerTimingRow,
                r#"SELECT t.job_id, t.stage, t.source, t.action, t.resource, t.started_at, t.ended_at
                   FROM provisioner_job_timings t
                   JOIN workspace_builds b ON b.job_id = t.job_id
                   WHERE b.id = $1
                   ORDER BY t.started_at, t.ended_at"#,
                build
            )
            .fetch_all(&self.pool)
            .await?;
            let scripts = sqlx::query_as!(
                ScriptTimingRow,
                r#"SELECT st.started_at, st.ended_at, st.exit_code, st.stage, st.status,
                          s.display_name, a.id AS agent_id, a.name AS agent_name
                   FROM workspace_agent_script_timings st
                   JOIN workspace_agent_scripts s ON s.id = st.script_id
                   JOIN workspace_agents a ON a.id = s.agent_id
                   JOIN workspace_resources r ON r.id = a.resource_id
                   JOIN workspace_builds b ON b.job_id = r.job_id
                   WHERE b.id = $1
                   ORDER BY st.started_at"#,
                build
            )
            .fetch_all(&self.pool)
            .await?;
            let connections = sqlx::query_as!(
                ConnectionTimingRow,
                r#"SELECT a.id AS agent_id, a.name AS agent_name, a.created_at,
                          a.first_connected_at AS "first_connected_at!"
                   FROM workspace_agents a
                   JOIN workspace_resources r ON r.id = a.resource_id
                   JOIN workspace_builds b ON b.job_id = r.job_id
                   WHERE b.id = $1 AND a.first_connected_at IS NOT NULL
                   ORDER BY a.created_at"#,
                build
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(BuildTimings {
                provisioner,
                scripts,
                connections,
            })
        })
        .await
    }
}
