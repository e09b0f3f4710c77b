//! `GET /deployment/stats`: workspaces by state and what their agents report, for those who may
//! read the deployment's configuration.

use chrono::{Duration, Utc};
use codersdk::deployment::{
    DeploymentStats, SessionCountDeploymentStats, WorkspaceConnectionLatencyMS,
    WorkspaceDeploymentStats,
};

use super::Result;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

/// The agents' figures count when reported within this window, as Coder aggregates them.
const WINDOW: Duration = Duration::minutes(15);
/// How often a client should ask again.
const REFRESH: Duration = Duration::seconds(30);

pub async fn stats(state: &AppState, subject: &Subject) -> Result<DeploymentStats> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    let now = Utc::now();
    let from = now - WINDOW;
    let (counts, agents) = tokio::try_join!(
        state.store.workspace_counts(),
        state.store.agent_totals(from)
    )?;
    Ok(DeploymentStats {
        aggregated_from: from,
        collected_at: now,
        next_update_at: now + REFRESH,
        workspaces: WorkspaceDeploymentStats {
            pending: counts.pending,
            building: counts.building,
            running: counts.running,
            failed: counts.failed,
            stopped: counts.stopped,
            // Nothing samples round trips through the relay yet, so there is no latency to
            // report; zero, as Coder reports before its agents have sent any.
            connection_latency_ms: WorkspaceConnectionLatencyMS { p50: 0.0, p95: 0.0 },
            rx_bytes: agents.rx_bytes,
            tx_bytes: agents.tx_bytes,
        },
        session_count: SessionCountDeploymentStats {
            vscode: agents.vscode,
            ssh: agents.ssh,
            jetbrains: agents.jetbrains,
            reconnecting_pty: agents.reconnecting_pty,
        },
    })
}
