//! Seeding rows in bulk by cloning rows coderd itself wrote through the API, so seeded data is
//! exactly what the API would have written (setup is not measured; only its speed matters).
//!
//! Clones are made with `jsonb_populate_record(<source row>, <overrides>)`, which keeps every
//! column of the source and replaces only ids, links and the fields named, so the seeding stays
//! right when migrations add columns. Ids are derived from a per-call salt (`md5(salt || old
//! id || n)`), which maps each child row to its parent's clone without a lookup table.

use anyhow::ensure;
use coderd_store::pubsub::channels;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// The pieces of a workspace the clones start from.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub workspace: Uuid,
    pub build: Uuid,
    pub job: Uuid,
}

impl Source {
    /// The workspace's latest build and its job.
    pub async fn of(pool: &PgPool, workspace: Uuid) -> anyhow::Result<Self> {
        let (build, job): (Uuid, Uuid) = sqlx::query_as(
            "SELECT id, job_id FROM workspace_builds WHERE workspace_id = $1
             ORDER BY build_number DESC LIMIT 1",
        )
        .bind(workspace)
        .fetch_one(pool)
        .await?;
        Ok(Self {
            workspace,
            build,
            job,
        })
    }
}

/// How the clones' jobs look.
pub enum Jobs {
    /// Completed like the source's, with its resources, agents and apps.
    Completed,
    /// A new pending first build, as `POST /users/{user}/workspaces` writes it. With tags, the
    /// jobs carry those instead of the source's (so no daemon takes them); without, each job is
    /// announced on coderd's posting channel in the same transaction, as coderd does.
    Pending { tags: Option<(Value, String)> },
}

fn salt() -> String {
    Uuid::new_v4().simple().to_string()
}

/// Clones `source`'s workspace `count` times (names `<prefix><n>`). Returns the new job ids.
pub async fn workspaces(
    pool: &PgPool,
    source: Source,
    count: usize,
    prefix: &str,
    jobs: Jobs,
) -> anyhow::Result<Vec<Uuid>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let salt = salt();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "CREATE TEMP TABLE clone_map ON COMMIT DROP AS
         SELECT i, md5($1 || 'w' || i)::uuid AS workspace_id, md5($1 || 'b' || i)::uuid AS build_id,
                md5($1 || 'j' || i)::uuid AS job_id
         FROM generate_series(1, $2) i",
    )
    .bind(&salt)
    .bind(count as i32)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO workspaces
         SELECT r.* FROM workspaces w CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(w, jsonb_build_object(
             'id', m.workspace_id, 'name', $2 || m.i)) r
         WHERE w.id = $1",
    )
    .bind(source.workspace)
    .bind(prefix)
    .execute(&mut *tx)
    .await?;
    let pending = matches!(jobs, Jobs::Pending { .. });
    let (tags, tags_key) = match &jobs {
        Jobs::Pending {
            tags: Some((tags, key)),
        } => (Some(tags.clone()), Some(key.clone())),
        _ => (None, None),
    };
    sqlx::query(
        "INSERT INTO provisioner_jobs
         SELECT r.* FROM provisioner_jobs j CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(j, jsonb_build_object(
             'id', m.job_id,
             'input', jsonb_set(j.input, '{workspace_build_id}', to_jsonb(m.build_id)),
             'tags', coalesce($3, j.tags), 'tags_key', coalesce($4, j.tags_key))
           || CASE WHEN $2 THEN jsonb_build_object(
             'created_at', clock_timestamp(), 'updated_at', clock_timestamp(), 'started_at', null,
             'completed_at', null, 'canceled_at', null, 'worker_id', null, 'error', null,
             'error_code', null, 'logs_length', 0, 'logs_overflowed', false)
             ELSE '{}'::jsonb END) r
         WHERE j.id = $1",
    )
    .bind(source.job)
    .bind(pending)
    .bind(tags)
    .bind(tags_key)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO workspace_builds
         SELECT r.* FROM workspace_builds b CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(b, jsonb_build_object(
             'id', m.build_id, 'workspace_id', m.workspace_id, 'job_id', m.job_id)
           || CASE WHEN $2 THEN jsonb_build_object(
             'build_number', 1, 'transition', 'start', 'provisioner_state', null,
             'created_at', now(), 'updated_at', now())
             ELSE '{}'::jsonb END) r
         WHERE b.id = $1",
    )
    .bind(source.build)
    .bind(pending)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO workspace_build_parameters
         SELECT r.* FROM workspace_build_parameters p CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(p, jsonb_build_object(
             'workspace_build_id', m.build_id)) r
         WHERE p.workspace_build_id = $1",
    )
    .bind(source.build)
    .execute(&mut *tx)
    .await?;
    if pending {
        if let Jobs::Pending { tags: None } = jobs {
            // What insert_job announces: `<org>:<job>:<provisioner>:<tags key>`.
            sqlx::query(
                "SELECT pg_notify($1, j.organization_id || ':' || j.id || ':' || j.provisioner
                                      || ':' || j.tags_key)
                 FROM provisioner_jobs j JOIN clone_map m ON m.job_id = j.id ORDER BY m.i",
            )
            .bind(channels::JOB_POSTED)
            .execute(&mut *tx)
            .await?;
        }
    } else {
        clone_resources(&mut tx, &salt, source.job).await?;
    }
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT job_id FROM clone_map ORDER BY i")
        .fetch_all(&mut *tx)
        .await?;
    // Autovacuum would analyse the bulk insert within a minute or so; a scenario that starts
    // reading at once would otherwise be measured against a planner that thinks the tables
    // are as small as before the seed. Before the commit (ANALYZE counts its own transaction's
    // rows): pending jobs are announced by the commit and drained from then on, so a caller
    // that times the drain from this function's return must not lose the ANALYZE's ~0.6 s of
    // it (P2b counted every job over a window that began after that).
    sqlx::query("ANALYZE").execute(&mut *tx).await?;
    tx.commit().await?;
    ensure!(
        ids.len() == count,
        "cloned {} of {count} workspaces",
        ids.len()
    );
    Ok(ids)
}

/// The source job's resources, their metadata, agents (with their metadata keys) and apps,
/// once per clone.
async fn clone_resources(tx: &mut sqlx::PgConnection, salt: &str, job: Uuid) -> anyhow::Result<()> {
    let statements = [
        "INSERT INTO workspace_resources
         SELECT r.* FROM workspace_resources x CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object(
             'id', md5($1 || x.id::text || m.i)::uuid, 'job_id', m.job_id)) r
         WHERE x.job_id = $2",
        "INSERT INTO workspace_resource_metadata
         SELECT r.* FROM workspace_resource_metadata x CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object(
             'workspace_resource_id', md5($1 || x.workspace_resource_id::text || m.i)::uuid)) r
         WHERE x.workspace_resource_id IN (SELECT id FROM workspace_resources WHERE job_id = $2)",
        "INSERT INTO workspace_agents
         SELECT r.* FROM workspace_agents x CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object(
             'id', md5($1 || x.id::text || m.i)::uuid,
             'resource_id', md5($1 || x.resource_id::text || m.i)::uuid)) r
         WHERE x.resource_id IN (SELECT id FROM workspace_resources WHERE job_id = $2)",
        "INSERT INTO workspace_agent_metadata
         SELECT r.* FROM workspace_agent_metadata x CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object(
             'agent_id', md5($1 || x.agent_id::text || m.i)::uuid)) r
         WHERE x.agent_id IN (SELECT a.id FROM workspace_agents a
                              JOIN workspace_resources res ON res.id = a.resource_id
                              WHERE res.job_id = $2)",
        "INSERT INTO workspace_apps
         SELECT r.* FROM workspace_apps x CROSS JOIN clone_map m
         CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object(
             'id', md5($1 || x.id::text || m.i)::uuid,
             'agent_id', md5($1 || x.agent_id::text || m.i)::uuid)) r
         WHERE x.agent_id IN (SELECT a.id FROM workspace_agents a
                              JOIN workspace_resources res ON res.id = a.resource_id
                              WHERE res.job_id = $2)",
    ];
    for statement in statements {
        sqlx::query(statement)
            .bind(salt)
            .bind(job)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Gives each agent of `jobs` a token of its own, stored hashed the way coderd hashes agent
/// tokens, and returns the plaintext tokens (the clones share their source's hash, and coderd
/// never stores a token in the clear, so simulated agents need fresh ones).
pub async fn agent_tokens(pool: &PgPool, jobs: &[Uuid]) -> anyhow::Result<Vec<String>> {
    let agents: Vec<Uuid> = sqlx::query_scalar(
        "SELECT a.id FROM workspace_agents a JOIN workspace_resources r ON r.id = a.resource_id
         WHERE r.job_id = ANY($1) ORDER BY a.id",
    )
    .bind(jobs)
    .fetch_all(pool)
    .await?;
    let tokens: Vec<String> = agents.iter().map(|_| Uuid::new_v4().to_string()).collect();
    let hashes: Vec<Vec<u8>> = tokens
        .iter()
        .map(|t| coderd_authz::auth::hash_secret(t))
        .collect();
    let done = sqlx::query(
        "UPDATE workspace_agents a SET auth_token_hash = u.hash
         FROM unnest($1::uuid[], $2::bytea[]) AS u(id, hash) WHERE a.id = u.id",
    )
    .bind(&agents)
    .bind(&hashes)
    .execute(pool)
    .await?;
    ensure!(
        done.rows_affected() == agents.len() as u64,
        "set {} of {} agent tokens",
        done.rows_affected(),
        agents.len()
    );
    Ok(tokens)
}

/// Clones pending job `source` `count` times, dated before everything else so the clones sit at
/// the head of the queue. They keep the source's tags (which no daemon matches).
pub async fn poison(pool: &PgPool, source: Uuid, count: usize) -> anyhow::Result<()> {
    let done = sqlx::query(
        "INSERT INTO provisioner_jobs
         SELECT r.* FROM provisioner_jobs j CROSS JOIN generate_series(1, $2) i
         CROSS JOIN LATERAL jsonb_populate_record(j, jsonb_build_object(
             'id', md5($3 || i)::uuid,
             'created_at', j.created_at - interval '1 hour' - make_interval(secs => i / 1000.0),
             'updated_at', j.created_at - interval '1 hour')) r
         WHERE j.id = $1 AND j.started_at IS NULL",
    )
    .bind(source)
    .bind(count as i32)
    .bind(salt())
    .execute(pool)
    .await?;
    ensure!(
        done.rows_affected() == count as u64,
        "seeded {} of {count} poisoned jobs (is the source job pending?)",
        done.rows_affected()
    );
    sqlx::query("ANALYZE provisioner_jobs")
        .execute(pool)
        .await?;
    Ok(())
}

/// Removes the clones `poison` made (the source stays: its template version refers to it).
pub async fn remove_poison(pool: &PgPool, source: Uuid) -> anyhow::Result<u64> {
    let done = sqlx::query(
        "DELETE FROM provisioner_jobs
         WHERE tags_key = (SELECT tags_key FROM provisioner_jobs WHERE id = $1)
           AND id <> $1 AND started_at IS NULL",
    )
    .bind(source)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Workspaces not deleted.
pub async fn workspace_count(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM workspaces WHERE NOT deleted")
            .fetch_one(pool)
            .await?,
    )
}
