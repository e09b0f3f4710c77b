//! The store: the only crate that holds SQL. One file per table group; compound operations
//! that must be atomic are single methods that own their transaction. [`postgres`] connects,
//! migrates (the numbered up/down pairs under `migrations/`, embedded) and runs the embedded
//! cluster; [`pubsub`] is LISTEN/NOTIFY and the channels the store notifies in its
//! transactions. Nothing above this crate writes SQL or names a table.

pub mod postgres;
pub mod pubsub;

mod agents;
mod api_keys;
mod audit;
mod build_facts;
mod build_inputs;
mod build_insert;
mod completion;
mod daemons;
mod deployment_stats;
mod external_agents;
mod external_auth;
mod groups;
mod jobs;
mod lifecycle;
mod organizations;
mod port_shares;
mod prebuilds;
mod prepared_completion;
mod presets;
mod replicas;
mod resource_rows;
mod resource_trees;
mod resources;
mod site;
mod subagents;
mod tasks;
mod template_version_edits;
mod templates;
mod timings;
mod usage_rollups;
mod user_configs;
mod user_links;
mod user_secrets;
mod users;
mod version_facts;
mod workspace_build_rows;
mod workspace_edits;
mod workspace_search;
mod workspaces;

use std::future::Future;
use std::time::Instant;

use sqlx::PgPool;

pub use agents::{
    AgentAuth, AgentContext, AgentLogRow, DevcontainerRow, LogSourceRow, MetadataEntry,
    MetadataWrite, ScriptRow,
};
pub use api_keys::{ApiKeyRow, KeyHolder, NewApiKey};
pub use audit::{AuditLogRow, AuditQuery, NewAuditLog};
pub use build_facts::BuildFacts;
pub use build_inputs::BuildInputs;
pub use completion::{BuildSchedule, Completion, FinishOutcome};
pub use daemons::{DaemonRow, KeyRow, NewDaemon};
pub use deployment_stats::{AgentTotals, WorkspaceCounts};
pub use external_agents::{ExternalAgentRow, LatestBuildExternal, SealedAgentToken};
pub use external_auth::{ExternalAuthLinkRow, GitSshKeyRow, LinkLock, SealedLinkTokens};
pub use groups::{AclChange, GroupChanges, GroupMemberRow, GroupRow, GroupSync, NewGroup};
pub use jobs::{
    Claimant, JobRow, JobTemplate, LogRow, MAX_JOB_LOGS_BYTES, NewJob, ReleaseOutcome,
    UpdateOutcome,
};
pub use lifecycle::{BuildTimes, day_bits};
pub use organizations::{MemberRow, MemberWithUserRow, OrganizationRow};
pub use port_shares::PortShareRow;
pub use prebuilds::{PREBUILDS_USER_ID, PrebuildRow, PresetFailures, ReconcileLock, WantedPreset};
pub use prepared_completion::CompletionFacts;
pub use presets::PresetRow;
pub use replicas::{ALIVE_SECONDS, ReplicaRow};
pub use resources::{AgentRow, AgentTree, AppRow, MetadataRow, ResourceRow, ResourceTree};
pub use tasks::{NewTask, TaskQuery, TaskRow};
pub use template_version_edits::Archiving;
pub use templates::{
    FileMeta, FileRow, ImportResult, NewTemplate, NewTemplateVersion, TemplateChanges, TemplateRow,
    TemplateScheduleRow, TemplateVersionRow,
};
pub use timings::{BuildTimings, ConnectionTimingRow, ProvisionerTimingRow, ScriptTimingRow};
pub use usage_rollups::{ParameterUsageRow, UsageKinds, UsageSecs, UserActivityRow};
pub use user_links::LinkUpdate;
pub use user_secrets::{UserSecretChanges, UserSecretRow};
use users::insert_user;
pub use users::{NewUser, UserDeletion, UserQuery, UserRow};
pub use workspaces::{
    BuildContext, BuildRow, NewBuild, NewWorkspace, WorkspaceQuery, WorkspaceRow,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not found")]
    NotFound,
    /// A unique constraint refused the write; the name says which.
    #[error("conflicts with existing data ({constraint})")]
    Conflict { constraint: String },
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict {
                constraint: db.constraint().unwrap_or_default().to_string(),
            },
            other => Self::Database(other),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
    /// The job path's connections (claims, payload reads, completions), on which PostgreSQL
    /// uses generic plans. It re-planned these statements on every call otherwise (a custom
    /// plan looks cheaper than a generic one that assumes 10-element arrays), and that planning
    /// cost as much CPU as running them; their generic plans use the same indexes. A pool of
    /// their own keeps every other statement's planning as it is, and a completion in one
    /// autocommit statement has no transaction to `SET LOCAL` the mode in.
    jobs: PgPool,
}

/// The job path's pool opens up to a third as many connections as the main pool, on top of it:
/// its statements are short, and a daemon's session holds at most two at once (a claim and the
/// posted build's payload read).
const JOB_POOL_SHARE: u32 = 3;

impl Store {
    /// A store on `pool`; the job path's pool connects lazily with the same options.
    pub fn new(pool: PgPool) -> Self {
        let options = (*pool.connect_options())
            .clone()
            .options([("plan_cache_mode", "force_generic_plan")]);
        let jobs = sqlx::postgres::PgPoolOptions::new()
            .max_connections((pool.options().get_max_connections() / JOB_POOL_SHARE).max(2))
            .acquire_timeout(pool.options().get_acquire_timeout())
            // As the main pool: a busy connection is proven alive by the ping when it returns.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > crate::postgres::IDLE_BEFORE_PING {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy_with(options);
        Self { pool, jobs }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether the database answers at all (health checks).
    pub async fn ping(&self) -> Result<()> {
        timed("ping", async {
            sqlx::query_scalar!("SELECT 1 AS one")
                .fetch_one(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    /// `server_version_num` of the server we talk to.
    pub async fn server_version_num(&self) -> Result<i32> {
        let v = sqlx::query_scalar!("SELECT current_setting('server_version_num')::int AS v")
            .fetch_one(&self.pool)
            .await?;
        Ok(v.unwrap_or_default())
    }
}

/// Runs one store operation, recording its latency and outcome per operation name.
pub(crate) async fn timed<T>(op: &'static str, fut: impl Future<Output = Result<T>>) -> Result<T> {
    let start = Instant::now();
    let result = fut.await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(Error::NotFound) => "not_found",
        Err(Error::Conflict { .. }) => "conflict",
        Err(Error::Database(_)) => "error",
    };
    metrics::histogram!("coderd_db_query_duration_seconds", "query" => op, "outcome" => outcome)
        .record(start.elapsed().as_secs_f64());
    result
}
