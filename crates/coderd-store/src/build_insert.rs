//! A new build's rows in one statement: the check that no build of its workspace is active,
//! its number and starting state (from the latest build), its job, the build, its parameters,
//! the workspace's `updated_at`, the build's audit entry, and the job's and workspace's
//! announcements. That was nine round trips to PostgreSQL (each its own statement); P2's
//! closed loops pay them on every build, in coderd's and PostgreSQL's CPU.

use chrono::{DateTime, Utc};

use super::audit::NewAuditLog;
use super::jobs::{Claimant, JobRow};
use super::workspaces::{BuildRow, NewBuild};
use super::{Error, Result};
use crate::pubsub::channels;

/// The unique key on `(workspace_id, build_number)`: a create that loses the race to another
/// build of the same workspace fails on it (see [`insert_build`]).
pub(super) const BUILD_NUMBER_TAKEN: &str = "workspace_builds_workspace_id_build_number_key";

/// Inserts `build` as the next build of its workspace, starting from the latest build's state
/// (none when orphaning). Returns the build as the API shows it and its job, both announced
/// when the statement's transaction commits (the job first), or `None` (nothing written) when
/// the workspace is deleted, or its latest build is still active or is not
/// `build.expect_latest`.
///
/// Run on its own (autocommit), the statement is the whole decision, without a lock: it reads
/// the latest build in its snapshot, and a build of the same workspace committed after that
/// snapshot was taken holds the number this one computes, so this insert waits for it and then
/// fails on [`BUILD_NUMBER_TAKEN`], which the caller answers as a build that came first. So
/// two creates never both succeed from the same latest build, and a refused one writes nothing
/// (its job, audit entry and notifications are this statement's). A delete build's completion
/// marks the workspace deleted in the transaction that completes its job, so a snapshot that
/// sees that build done sees the workspace deleted too. Also runs inside the transaction that
/// inserts the workspace, which no one else sees before it commits.
///
/// With `claim` (an idle daemon this process reserved for the job), the job is inserted
/// already claimed by that daemon (`started_at` = `created_at`) and not posted, when the
/// daemon's own claim would have taken it: no pending job the daemon could run is older (the
/// queue stays first in, first out) and the daemon holds no job. Otherwise it is inserted
/// pending and posted as without. A pending job committed after this statement's snapshot is
/// not seen, as it is not by the claim statement either: it was created after this one began.
pub(super) async fn insert_build(
    tx: &mut sqlx::PgConnection,
    build: &NewBuild,
    log: Option<&NewAuditLog>,
    claim: Option<&Claimant<'_>>,
    now: DateTime<Utc>,
) -> Result<Option<(BuildRow, JobRow)>> {
    let job = &build.job;
    let (names, values): (Vec<String>, Vec<String>) = build.parameters.iter().cloned().unzip();
    let channels = [channels::JOB_POSTED, channels::WORKSPACE_UPDATED].map(str::to_string);
    let payloads = [
        format!(
            "{}:{}:{}:{}",
            job.organization_id, job.id, job.provisioner, job.tags_key
        ),
        build.workspace_id.to_string(),
    ];
    // The names the build shows come from rows this statement does not change (the workspace,
    // users, version), as they were when it began. The job comes back as JSON: a second row
    // type would need a second statement. Foreign keys between the new rows are checked at the
    // statement's end, when all of them are in.
    let row = sqlx::query!(
        r#"WITH latest AS (
               SELECT b.id, b.build_number, b.provisioner_state,
                      j.completed_at IS NOT NULL AS done
               FROM workspace_builds b JOIN provisioner_jobs j ON j.id = b.job_id
               WHERE b.workspace_id = $12 ORDER BY b.build_number DESC LIMIT 1
           ), next AS (
               SELECT COALESCE((SELECT build_number FROM latest), 0) + 1 AS number,
                      CASE WHEN $14 THEN NULL
                           WHEN $43::bytea IS NOT NULL THEN $43
                           ELSE (SELECT provisioner_state FROM latest) END AS state
               WHERE NOT EXISTS (SELECT 1 FROM latest WHERE NOT done)
                 AND EXISTS (SELECT 1 FROM workspaces WHERE id = $12 AND NOT deleted)
                 AND ($15::uuid IS NULL OR $15 = (SELECT id FROM latest))
           ), claimed_by AS (
               -- Evaluated only with a reserved daemon (the one-time filter on $39). The
               -- pending check walks the pending index per key, as the claim does: the generic
               -- plan of a plain EXISTS scanned the whole table.
               SELECT $39::uuid AS worker
               WHERE $39::uuid IS NOT NULL
                 AND NOT EXISTS (
                     SELECT 1 FROM unnest($40::text[]) AS p(provisioner)
                     CROSS JOIN unnest($41::text[]) AS k(tags_key)
                     CROSS JOIN LATERAL (
                         SELECT 1 FROM provisioner_jobs q
                         WHERE q.organization_id = $3 AND q.provisioner = p.provisioner
                           AND q.tags_key = k.tags_key
                           AND q.started_at IS NULL AND q.canceled_at IS NULL
                         ORDER BY q.created_at, q.id
                         LIMIT 1) head)
                 AND NOT EXISTS (
                     SELECT 1 FROM provisioner_jobs h
                     WHERE h.worker_id = $39 AND h.completed_at IS NULL)
           ), j AS (
               INSERT INTO provisioner_jobs (id, created_at, updated_at, organization_id,
                   initiator_id, provisioner, file_id, type, input, tags, tags_key, worker_id,
                   started_at)
               SELECT $1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10, c.worker,
                      CASE WHEN c.worker IS NOT NULL THEN $2::timestamptz END
               FROM next LEFT JOIN claimed_by c ON true
               RETURNING *
           ), b AS (
               INSERT INTO workspace_builds (id, workspace_id, template_version_id, build_number,
                   transition, initiator_id, provisioner_state, job_id, reason, created_at,
                   updated_at, template_version_preset_id)
               SELECT $11, $12, $13, next.number, $16, $17, next.state, j.id, $18, $2, $2, $19
               FROM j, next
               RETURNING *
           ), params AS (
               INSERT INTO workspace_build_parameters (workspace_build_id, name, value)
               SELECT b.id, p.name, p.value
               FROM b, unnest($20::text[], $21::text[]) AS p(name, value)
           ), touched AS (
               UPDATE workspaces w SET updated_at = $2 FROM b WHERE w.id = b.workspace_id
           ), audit AS (
               -- audit::append's row, written only with the build.
               INSERT INTO audit_logs (id, user_id, organization_id, ip, user_agent,
                   resource_type, resource_id, resource_target, action, diff, status_code,
                   additional_fields, request_id, description)
               SELECT $24, $25, $26, $27::text::inet, $28, $29, $30, $31, $32, $33, $34, $35,
                      $36, $37
               FROM b WHERE $38
           )
           SELECT b.id AS "id!", b.workspace_id AS "workspace_id!",
                  b.template_version_id AS "template_version_id!",
                  b.build_number AS "build_number!", b.transition AS "transition!",
                  b.initiator_id AS "initiator_id!", b.job_id AS "job_id!", b.reason AS "reason!",
                  b.daily_cost AS "daily_cost!", b.deadline AS "deadline?",
                  b.max_deadline AS "max_deadline?",
                  b.created_at AS "created_at!", b.updated_at AS "updated_at!",
                  w.name AS "workspace_name!", w.owner_id AS "workspace_owner_id!",
                  u.username AS "owner_username!", u.avatar_url AS "owner_avatar_url!",
                  v.name AS "template_version_name!", i.username AS "initiator_username!",
                  b.template_version_preset_id AS "template_version_preset_id?",
                  b.has_ai_task AS "has_ai_task?",
                  b.ai_task_sidebar_app_id AS "ai_task_sidebar_app_id?",
                  b.has_external_agent AS "has_external_agent?",
                  (SELECT to_jsonb(j) FROM j) AS "job!",
                  (SELECT count(pg_notify(n.channel, n.payload))
                   FROM unnest($22::text[], $23::text[]) AS n(channel, payload)
                   -- A claimed job is no one else's to take: not posted.
                   WHERE n.channel <> $42 OR NOT EXISTS (SELECT 1 FROM claimed_by))
                   AS "sent!"
           FROM b
           JOIN workspaces w ON w.id = b.workspace_id
           JOIN users u ON u.id = w.owner_id
           JOIN users i ON i.id = b.initiator_id
           JOIN template_versions v ON v.id = b.template_version_id"#,
        job.id,
        now,
        job.organization_id,
        job.initiator_id,
        job.provisioner,
        job.file_id,
        job.job_type,
        job.input,
        job.tags,
        job.tags_key,
        build.id,
        build.workspace_id,
        build.template_version_id,
        build.orphan,
        build.expect_latest,
        build.transition,
        build.initiator_id,
        build.reason,
        build.preset_id,
        &names,
        &values,
        &channels[..],
        &payloads[..],
        log.map(|l| l.id),
        log.and_then(|l| l.user_id),
        log.and_then(|l| l.organization_id),
        log.and_then(|l| l.ip.as_deref()),
        log.map(|l| l.user_agent.as_str()),
        log.map(|l| l.resource_type.as_str()),
        log.map(|l| l.resource_id),
        log.map(|l| l.resource_target.as_str()),
        log.map(|l| l.action.as_str()),
        log.map(|l| &l.diff),
        log.map(|l| l.status_code),
        log.map(|l| &l.additional_fields),
        log.map(|l| l.request_id),
        log.map(|l| l.description.as_str()),
        log.is_some(),
        claim.map(|c| c.worker),
        claim.map(|c| c.provisioners),
        claim.map(|c| c.tag_keys),
        channels::JOB_POSTED,
        build.state.as_deref(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let job: JobRow = serde_json::from_value(row.job)
        .map_err(|e| Error::Database(sqlx::Error::Decode(Box::new(e))))?;
    debug_assert_eq!(
        row.sent,
        channels.len() as i64 - i64::from(job.worker_id.is_some())
    );
    let build = BuildRow {
        id: row.id,
        workspace_id: row.workspace_id,
        template_version_id: row.template_version_id,
        build_number: row.build_number,
        transition: row.transition,
        initiator_id: row.initiator_id,
        job_id: row.job_id,
        reason: row.reason,
        daily_cost: row.daily_cost,
        deadline: row.deadline,
        max_deadline: row.max_deadline,
        created_at: row.created_at,
        updated_at: row.updated_at,
        workspace_name: row.workspace_name,
        workspace_owner_id: row.workspace_owner_id,
        owner_username: row.owner_username,
        owner_avatar_url: row.owner_avatar_url,
        template_version_name: row.template_version_name,
        initiator_username: row.initiator_username,
        template_version_preset_id: row.template_version_preset_id,
        has_ai_task: row.has_ai_task,
        ai_task_sidebar_app_id: row.ai_task_sidebar_app_id,
        has_external_agent: row.has_external_agent,
    };
    Ok(Some((build, job)))
}
