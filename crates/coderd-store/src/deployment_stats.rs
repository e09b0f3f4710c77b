//! Deployment-wide counts for `GET /deployment/stats`: workspaces by the state of their latest
//! build, and what their agents last reported (sessions, bytes).

use super::{Result, Store, timed};

/// Workspaces by the state of their latest build.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceCounts {
    pub pending: i64,
    pub building: i64,
    pub running: i64,
    pub failed: i64,
    pub stopped: i64,
}

/// Sums over the agents that reported within the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentTotals {
    pub rx_bytes: i64,
    pub tx_bytes: i64,
    pub ssh: i64,
    pub vscode: i64,
    pub jetbrains: i64,
    pub reconnecting_pty: i64,
}

impl Store {
    pub async fn workspace_counts(&self) -> Result<WorkspaceCounts> {
        timed("workspace_counts", async {
            let r = sqlx::query!(
                r#"SELECT
                     count(*) FILTER (WHERE lb.started_at IS NULL AND lb.canceled_at IS NULL) AS "pending!",
                     count(*) FILTER (WHERE lb.started_at IS NOT NULL AND lb.completed_at IS NULL) AS "building!",
                     count(*) FILTER (WHERE lb.completed_at IS NOT NULL
                                      AND (coalesce(lb.error, '') <> '' OR lb.canceled_at IS NOT NULL)) AS "failed!",
                     count(*) FILTER (WHERE lb.completed_at IS NOT NULL AND coalesce(lb.error, '') = ''
                                      AND lb.canceled_at IS NULL AND lb.transition = 'start') AS "running!",
                     count(*) FILTER (WHERE lb.completed_at IS NOT NULL AND coalesce(lb.error, '') = ''
                                      AND lb.canceled_at IS NULL AND lb.transition = 'stop') AS "stopped!"
                   FROM workspaces w
                   JOIN LATERAL (
                       SELECT b.transition, j.started_at, j.completed_at, j.canceled_at, j.error
                       FROM workspace_builds b JOIN provisioner_jobs j ON j.id = b.job_id
                       WHERE b.workspace_id = w.id ORDER BY b.build_number DESC LIMIT 1
                   ) lb ON true
                   WHERE NOT w.deleted"#
            )
            .fetch_one(&self.pool)
            .await?;
            Ok(WorkspaceCounts {
                pending: r.pending,
                building: r.building,
                running: r.running,
                failed: r.failed,
                stopped: r.stopped,
            })
        })
        .await
    }

    /// What agents reported since `since`, summed.
    pub async fn agent_totals(&self, since: chrono::DateTime<chrono::Utc>) -> Result<AgentTotals> {
        timed("agent_totals", async {
            let r = sqlx::query!(
                r#"SELECT coalesce(sum(rx_bytes), 0)::bigint AS "rx!",
                          coalesce(sum(tx_bytes), 0)::bigint AS "tx!",
                          coalesce(sum(session_count_ssh), 0)::bigint AS "ssh!",
                          coalesce(sum(session_count_vscode), 0)::bigint AS "vscode!",
                          coalesce(sum(session_count_jetbrains), 0)::bigint AS "jetbrains!",
                          coalesce(sum(session_count_reconnecting_pty), 0)::bigint AS "pty!"
                   FROM workspace_agent_stats WHERE reported_at >= $1"#,
                since
            )
            .fetch_one(&self.pool)
            .await?;
            Ok(AgentTotals {
                rx_bytes: r.rx,
                tx_bytes: r.tx,
                ssh: r.ssh,
                vscode: r.vscode,
                jetbrains: r.jetbrains,
                reconnecting_pty: r.pty,
            })
        })
        .await
    }
}
