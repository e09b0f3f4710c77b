//! Workspace agents at run time: who connects with a token, their lifecycle and connection
//! times, scripts, logs, and the batched metadata and stats writes.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use codersdk::agentsdk::{AgentLog, LifecycleState, MAX_AGENT_LOGS_BYTES, Stats};
use uuid::Uuid;

use super::jobs::notify;
use super::resources::AgentRow;
use super::{Result, Store, timed};
use crate::pubsub::channels;

/// An agent found by its token, with what decides whether it may connect.
#[derive(Debug, Clone)]
pub struct AgentAuth {
    pub agent: AgentRow,
    pub workspace_id: Uuid,
    pub workspace_deleted: bool,
    pub build_number: i32,
    pub latest_build_number: i32,
}

/// Names the manifest shows next to the agent.
#[derive(Debug, Clone)]
pub struct AgentContext {
    pub workspace_id: Uuid,
    pub workspace_name: String,
    pub owner_id: Uuid,
    pub owner_username: String,
    pub template_name: String,
    pub organization_id: Uuid,
    /// The number of the agent's build, and of its workspace's latest: an agent of an older
    /// build is gone (or going) and no longer reachable.
    pub build_number: i32,
    pub latest_build_number: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ScriptRow {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub log_source_id: Uuid,
    pub display_name: String,
    pub script: String,
    pub cron: String,
    pub run_on_start: bool,
    pub run_on_stop: bool,
    pub start_blocks_login: bool,
    pub timeout_seconds: i32,
    pub log_path: String,
    pub created_at: DateTime<Utc>,
    pub resource_address: String,
    /// `codersdk::proto::ScriptDependency` list, as the provisioner computed it.
    pub dependencies: serde_json::Value,
}

/// A `coder_devcontainer` of an agent, with the log source the agent reports it under and
/// its sub-agent (name and directory included, as the containers listing shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevcontainerRow {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub log_source_id: Uuid,
    pub name: String,
    pub workspace_folder: String,
    pub config_path: String,
    pub created_at: DateTime<Utc>,
    pub subagent_id: Option<Uuid>,
    pub subagent_name: Option<String>,
    pub subagent_directory: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct LogSourceRow {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub display_name: String,
    pub icon: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLogRow {
    pub id: i64,
    pub agent_id: Uuid,
    pub log_source_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub level: String,
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataEntry {
    pub agent_id: Uuid,
    pub key: String,
    pub display_name: String,
    pub script: String,
    pub interval_seconds: i64,
    pub timeout_seconds: i64,
    pub display_order: i32,
    pub value: String,
    pub error: String,
    pub collected_at: Option<DateTime<Utc>>,
}

/// One pending metadata write.
#[derive(Debug, Clone)]
pub struct MetadataWrite {
    pub agent_id: Uuid,
    pub key: String,
    pub value: String,
    pub error: String,
    pub collected_at: DateTime<Utc>,
}

impl Store {
    /// The newest agent holding this token, and where its build stands.
    pub async fn agent_by_token(&self, token_hash: &[u8]) -> Result<Option<AgentAuth>> {
        timed("agent_by_token", async {
            let Some(row) = sqlx::query!(
                r#"SELECT a.id, b.workspace_id, w.deleted, b.build_number,
                          (SELECT max(build_number) FROM workspace_builds WHERE workspace_id = b.workspace_id) AS "latest!"
                   FROM workspace_agents a
                   JOIN workspace_resources r ON r.id = a.resource_id
                   JOIN workspace_builds b ON b.job_id = r.job_id
                   JOIN workspaces w ON w.id = b.workspace_id
                   WHERE a.auth_token_hash = $1
                   ORDER BY a.created_at DESC LIMIT 1"#,
                token_hash
            )
            .fetch_optional(&self.pool)
            .await?
            else {
                return Ok(None);
            };
            let agent = self.agent_by_id(row.id).await?;
            Ok(Some(AgentAuth {
                agent,
                workspace_id: row.workspace_id,
                workspace_deleted: row.deleted,
                build_number: row.build_number,
                latest_build_number: row.latest,
            }))
        })
        .await
    }

    pub async fn agent_by_id(&self, id: Uuid) -> Result<AgentRow> {
        timed("agent_by_id", async {
            Ok(sqlx::query_as!(
                AgentRow,
                "SELECT id, resource_id, name, auth_token_hash, auth_instance_id, architecture,
                            operating_system, directory, environment_variables,
                            connection_timeout_seconds, troubleshooting_url, motd_file,
                            display_apps, api_key_scope, display_order, created_at, updated_at,
                            first_connected_at, last_connected_at, disconnected_at,
                            lifecycle_state, started_at, ready_at, version, api_version,
                            expanded_directory, logs_length, logs_overflowed, subsystems,
                            parent_id
                     FROM workspace_agents WHERE id = $1",
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await
    }

    /// The workspace (and names) an agent belongs to, through its build's job.
    pub async fn agent_context(&self, agent: Uuid) -> Result<AgentContext> {
        timed("agent_context", async {
            let r = sqlx::query!(
                r#"SELECT w.id AS workspace_id, w.name AS workspace_name, w.owner_id,
                          u.username, t.name AS template_name, w.organization_id, b.build_number,
                          (SELECT max(build_number) FROM workspace_builds WHERE workspace_id = w.id) AS "latest!"
                   FROM workspace_agents a
                   JOIN workspace_resources r ON r.id = a.resource_id
                   JOIN workspace_builds b ON b.job_id = r.job_id
                   JOIN workspaces w ON w.id = b.workspace_id
                   JOIN users u ON u.id = w.owner_id
                   JOIN templates t ON t.id = w.template_id
                   WHERE a.id = $1"#,
                agent
            )
            .fetch_one(&self.pool)
            .await?;
            Ok(AgentContext {
                workspace_id: r.workspace_id,
                workspace_name: r.workspace_name,
                owner_id: r.owner_id,
                owner_username: r.username,
                template_name: r.template_name,
                organization_id: r.organization_id,
                build_number: r.build_number,
                latest_build_number: r.latest,
            })
        })
        .await
    }

    pub async fn agent_scripts(&self, agents: &[Uuid]) -> Result<Vec<ScriptRow>> {
        timed("agent_scripts", async {
            Ok(sqlx::query_as!(
                ScriptRow,
                "SELECT * FROM workspace_agent_scripts WHERE agent_id = ANY($1) ORDER BY created_at, display_name",
                agents
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn agent_devcontainers(&self, agent: Uuid) -> Result<Vec<DevcontainerRow>> {
        timed("agent_devcontainers", async {
            Ok(sqlx::query_as!(
                DevcontainerRow,
                r#"SELECT d.id, d.agent_id, d.log_source_id, d.name, d.workspace_folder, d.config_path,
                          d.created_at, d.subagent_id, s.name AS "subagent_name?",
                          s.directory AS "subagent_directory?"
                   FROM workspace_agent_devcontainers d
                   LEFT JOIN workspace_agents s ON s.id = d.subagent_id
                   WHERE d.agent_id = $1 ORDER BY d.created_at, d.name"#,
                agent
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn agent_log_sources(&self, agents: &[Uuid]) -> Result<Vec<LogSourceRow>> {
        timed("agent_log_sources", async {
            Ok(sqlx::query_as!(
                LogSourceRow,
                "SELECT * FROM workspace_agent_log_sources WHERE agent_id = ANY($1) ORDER BY created_at, display_name",
                agents
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    pub async fn agent_metadata(&self, agent: Uuid) -> Result<Vec<MetadataEntry>> {
        timed("agent_metadata", async {
            Ok(sqlx::query_as!(
                MetadataEntry,
                "SELECT * FROM workspace_agent_metadata WHERE agent_id = $1 ORDER BY display_order, key",
                agent
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// The agent's connection is up.
    /// The agent connected to `replica`: it becomes the holder with the next epoch, which the
    /// connection keeps to recognise a newer one and to record the disconnect only if still
    /// the holder.
    pub async fn agent_connected(&self, agent: Uuid, replica: Uuid) -> Result<i64> {
        timed("agent_connected", async {
            let mut tx = self.pool.begin().await?;
            let epoch = sqlx::query_scalar!(
                r#"UPDATE workspace_agents
                   SET first_connected_at = COALESCE(first_connected_at, now()),
                       last_connected_at = now(), updated_at = now(),
                       holder_replica_id = $2, holder_epoch = holder_epoch + 1
                   WHERE id = $1
                   RETURNING holder_epoch"#,
                agent,
                replica
            )
            .fetch_one(&mut *tx)
            .await?;
            notify(&mut tx, channels::AGENT_UPDATED, agent.to_string()).await?;
            tx.commit().await?;
            Ok(epoch)
        })
        .await
    }

    /// Which replica holds the agent's connection, and its epoch.
    pub async fn agent_holder(&self, agent: Uuid) -> Result<(Option<Uuid>, i64)> {
        timed("agent_holder", async {
            let row = sqlx::query!(
                "SELECT holder_replica_id, holder_epoch FROM workspace_agents WHERE id = $1",
                agent
            )
            .fetch_one(&self.pool)
            .await?;
            Ok((row.holder_replica_id, row.holder_epoch))
        })
        .await
    }

    /// The agent's connection of `epoch` is gone; nothing changes when a newer connection
    /// holds it (the agent moved to another replica).
    pub async fn agent_disconnected(&self, agent: Uuid, epoch: i64) -> Result<()> {
        timed("agent_disconnected", async {
            let mut tx = self.pool.begin().await?;
            let done = sqlx::query!(
                "UPDATE workspace_agents SET disconnected_at = now(), updated_at = now()
                 WHERE id = $1 AND holder_epoch = $2",
                agent,
                epoch
            )
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(());
            }
            notify(&mut tx, channels::AGENT_UPDATED, agent.to_string()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Marks every connected agent as seen now, in one statement.
    pub async fn touch_agents(&self, agents: &[Uuid]) -> Result<()> {
        timed("touch_agents", async {
            sqlx::query!(
                "UPDATE workspace_agents SET last_connected_at = now() WHERE id = ANY($1)",
                agents
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// Applies a lifecycle change if it moves the lifecycle forward; returns whether it did.
    pub async fn update_agent_lifecycle(
        &self,
        agent: Uuid,
        state: LifecycleState,
        changed_at: DateTime<Utc>,
    ) -> Result<bool> {
        timed("update_agent_lifecycle", async {
            let mut tx = self.pool.begin().await?;
            let current = sqlx::query_scalar!(
                "SELECT lifecycle_state FROM workspace_agents WHERE id = $1 FOR UPDATE",
                agent
            )
            .fetch_one(&mut *tx)
            .await?;
            let current: LifecycleState = current.parse().unwrap_or_default();
            if state.rank() <= current.rank() {
                return Ok(false);
            }
            let starting = state == LifecycleState::Starting;
            let ready = matches!(
                state,
                LifecycleState::Ready | LifecycleState::StartError | LifecycleState::StartTimeout
            );
            sqlx::query!(
                r#"UPDATE workspace_agents SET lifecycle_state = $2, updated_at = now(),
                       started_at = CASE WHEN $3 THEN $5 ELSE started_at END,
                       ready_at = CASE WHEN $4 THEN $5 ELSE ready_at END
                   WHERE id = $1"#,
                agent,
                state.as_str(),
                starting,
                ready,
                changed_at
            )
            .execute(&mut *tx)
            .await?;
            notify(&mut tx, channels::AGENT_UPDATED, agent.to_string()).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    pub async fn update_agent_startup(
        &self,
        agent: Uuid,
        version: &str,
        expanded_directory: &str,
        subsystems: &[String],
    ) -> Result<()> {
        timed("update_agent_startup", async {
            sqlx::query!(
                r#"UPDATE workspace_agents SET version = $2, expanded_directory = $3, subsystems = $4,
                       api_version = $5, updated_at = now()
                   WHERE id = $1"#,
                agent,
                version,
                expanded_directory,
                subsystems,
                codersdk::agentsdk::API_VERSION
            )
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// Stores agent log lines under the per-agent cap (serialised per agent by its row lock, so
    /// ids grow in commit order); returns whether the cap was reached.
    pub async fn insert_agent_logs(
        &self,
        agent: Uuid,
        source: Uuid,
        logs: &[AgentLog],
    ) -> Result<bool> {
        timed("insert_agent_logs", async {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query!(
                "SELECT logs_length, logs_overflowed FROM workspace_agents WHERE id = $1 FOR UPDATE",
                agent
            )
            .fetch_one(&mut *tx)
            .await?;
            if row.logs_overflowed {
                return Ok(true);
            }
            let mut kept = 0usize;
            let mut bytes = 0i32;
            for log in logs {
                let size = i32::try_from(log.output.len()).unwrap_or(i32::MAX);
                if row.logs_length.saturating_add(bytes).saturating_add(size) > MAX_AGENT_LOGS_BYTES {
                    break;
                }
                bytes += size;
                kept += 1;
            }
            let overflowed = kept < logs.len();
            let logs = &logs[..kept];
            if !logs.is_empty() {
                let created: Vec<DateTime<Utc>> = logs.iter().map(|l| l.created_at).collect();
                let levels: Vec<String> = logs.iter().map(|l| l.level.clone()).collect();
                let outputs: Vec<String> = logs.iter().map(|l| l.output.replace('\0', "")).collect();
                sqlx::query!(
                    r#"INSERT INTO workspace_agent_logs (agent_id, log_source_id, created_at, level, output)
                       SELECT $1, $2, * FROM unnest($3::timestamptz[], $4::text[], $5::text[])"#,
                    agent,
                    source,
                    &created,
                    &levels,
                    &outputs
                )
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query!(
                r#"UPDATE workspace_agents SET logs_length = logs_length + $2, logs_overflowed = $3
                   WHERE id = $1"#,
                agent,
                bytes,
                overflowed
            )
            .execute(&mut *tx)
            .await?;
            notify(&mut tx, channels::AGENT_LOGS, agent.to_string()).await?;
            tx.commit().await?;
            Ok(overflowed)
        })
        .await
    }

    pub async fn agent_logs_after(&self, agent: Uuid, after: i64) -> Result<Vec<AgentLogRow>> {
        timed("agent_logs_after", async {
            Ok(sqlx::query_as!(
                AgentLogRow,
                "SELECT * FROM workspace_agent_logs WHERE agent_id = $1 AND id > $2 ORDER BY id",
                agent,
                after
            )
            .fetch_all(&self.pool)
            .await?)
        })
        .await
    }

    /// Writes the latest metadata values of many agents in one statement.
    pub async fn flush_agent_metadata(&self, writes: &[MetadataWrite]) -> Result<()> {
        timed("flush_agent_metadata", async {
            let agents: Vec<Uuid> = writes.iter().map(|w| w.agent_id).collect();
            let keys: Vec<String> = writes.iter().map(|w| w.key.clone()).collect();
            let values: Vec<String> = writes.iter().map(|w| w.value.clone()).collect();
            let errors: Vec<String> = writes.iter().map(|w| w.error.clone()).collect();
            let collected: Vec<DateTime<Utc>> = writes.iter().map(|w| w.collected_at).collect();
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"UPDATE workspace_agent_metadata m
                   SET value = u.value, error = u.error, collected_at = u.collected_at
                   FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
                        AS u(agent_id, key, value, error, collected_at)
                   WHERE m.agent_id = u.agent_id AND m.key = u.key"#,
                &agents,
                &keys,
                &values,
                &errors,
                &collected
            )
            .execute(&mut *tx)
            .await?;
            let mut unique = agents.clone();
            unique.sort();
            unique.dedup();
            for agent in unique {
                notify(&mut tx, channels::AGENT_METADATA, agent.to_string()).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Writes the latest stats of many agents in one statement, and bumps `last_used_at` of
    /// workspaces with active sessions.
    pub async fn flush_agent_stats(&self, stats: &HashMap<Uuid, (Uuid, Stats)>) -> Result<()> {
        timed("flush_agent_stats", async {
            let mut agents = Vec::new();
            let mut workspaces = Vec::new();
            let mut protos = Vec::new();
            let mut numbers: [Vec<i64>; 7] = Default::default();
            let mut used = Vec::new();
            for (agent, (workspace, s)) in stats {
                agents.push(*agent);
                workspaces.push(*workspace);
                protos.push(serde_json::to_value(&s.connections_by_proto).unwrap_or_default());
                for (column, value) in numbers.iter_mut().zip([
                    s.connection_count,
                    s.rx_bytes,
                    s.tx_bytes,
                    s.session_count_ssh,
                    s.session_count_vscode,
                    s.session_count_jetbrains,
                    s.session_count_reconnecting_pty,
                ]) {
                    column.push(value);
                }
                if s.sessions() > 0 {
                    used.push(*workspace);
                }
            }
            let mut tx = self.pool.begin().await?;
            sqlx::query!(
                r#"INSERT INTO workspace_agent_stats (agent_id, workspace_id, connections_by_proto,
                       connection_count, rx_bytes, tx_bytes, session_count_ssh, session_count_vscode,
                       session_count_jetbrains, session_count_reconnecting_pty, reported_at)
                   SELECT *, now() FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[], $4::bigint[],
                       $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[])
                   ON CONFLICT (agent_id) DO UPDATE SET
                       connections_by_proto = EXCLUDED.connections_by_proto,
                       connection_count = EXCLUDED.connection_count,
                       rx_bytes = EXCLUDED.rx_bytes, tx_bytes = EXCLUDED.tx_bytes,
                       session_count_ssh = EXCLUDED.session_count_ssh,
                       session_count_vscode = EXCLUDED.session_count_vscode,
                       session_count_jetbrains = EXCLUDED.session_count_jetbrains,
                       session_count_reconnecting_pty = EXCLUDED.session_count_reconnecting_pty,
                       reported_at = EXCLUDED.reported_at"#,
                &agents,
                &workspaces,
                &protos,
                &numbers[0],
                &numbers[1],
                &numbers[2],
                &numbers[3],
                &numbers[4],
                &numbers[5],
                &numbers[6]
            )
            .execute(&mut *tx)
            .await?;
            if !used.is_empty() {
                sqlx::query!(
                    "UPDATE workspaces SET last_used_at = now() WHERE id = ANY($1)",
                    &used
                )
                .execute(&mut *tx)
                .await?;
                super::lifecycle::bump_deadlines(&mut tx, &used).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
