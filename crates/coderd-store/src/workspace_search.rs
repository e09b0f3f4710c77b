//! Searching workspaces: one page of ids in display order (owner's name, then the workspace's)
//! and how many match in all.

use uuid::Uuid;

use super::workspaces::WorkspaceQuery;
use super::{Result, Store, timed};
use coderd_authz::Filter;

/// `name` as an ILIKE pattern matching it anywhere, its wildcards taken literally.
fn substring_pattern(name: &str) -> String {
    format!(
        "%{}%",
        name.replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    )
}

impl Store {
    /// One page of the workspaces `filter` lets the caller see (ids, in display order), plus how
    /// many match in all. Only a status filter needs each workspace's latest build; without one,
    /// the page and the count come from the workspaces (and their owners) alone, so a page costs
    /// an index walk rather than a look at every visible workspace's builds.
    pub async fn list_workspace_ids(
        &self,
        q: &WorkspaceQuery,
        filter: &Filter,
    ) -> Result<(Vec<Uuid>, i64)> {
        if let Some(owner) = q.owner
            && q.status.is_empty()
        {
            return self.list_owned_workspace_ids(owner, q, filter).await;
        }
        timed("list_workspace_ids", async {
            // One connection for the page and its count: a connection returned to the pool costs
            // a round trip (sqlx pings it).
            let mut conn = self.pool.acquire().await?;
            let pattern = substring_pattern(&q.name);
            if q.status.is_empty() {
                // Owner by owner in name order, each owner's walk of the (deleted, owner,
                // name) index cut at the page's end: the page costs a few index entries per
                // owner instead of a sort of every visible workspace.
                let ids = sqlx::query_scalar!(
                    r#"SELECT w.id AS "id!"
                       FROM users u
                       CROSS JOIN LATERAL (
                           SELECT w.id, lower(w.name) AS lname
                           FROM workspaces w
                           WHERE w.owner_id = u.id AND w.deleted = $1
                             AND ($2 OR w.organization_id = ANY($3)
                                  OR (w.owner_id = $4 AND w.organization_id = ANY($5)))
                             AND ($6::uuid IS NULL OR w.owner_id = $6)
                             AND ($7 = '%%' OR w.name ILIKE $7)
                             AND ($8 = '' OR EXISTS (SELECT 1 FROM templates t
                                                     WHERE t.id = w.template_id
                                                       AND lower(t.name) = lower($8)))
                             AND ($9::boolean IS NULL OR (
                                  SELECT COALESCE(b.has_external_agent, v.has_external_agent)
                                  FROM workspace_builds b
                                  JOIN template_versions v ON v.id = b.template_version_id
                                  WHERE b.workspace_id = w.id
                                  ORDER BY b.build_number DESC LIMIT 1) = $9)
                           ORDER BY lower(w.name)
                           LIMIT $12
                       ) w
                       ORDER BY lower(u.username), w.lname
                       LIMIT $10 OFFSET $11"#,
                    q.deleted,
                    filter.all,
                    &filter.orgs,
                    filter.owner,
                    &filter.owner_orgs,
                    q.owner,
                    pattern,
                    q.template,
                    q.has_external_agent,
                    q.limit,
                    q.offset,
                    q.limit.saturating_add(q.offset)
                )
                .fetch_all(&mut *conn)
                .await?;
                let total = sqlx::query_scalar!(
                    r#"SELECT count(*) AS "count!"
                       FROM workspaces w
                       WHERE w.deleted = $1
                         AND ($2 OR w.organization_id = ANY($3)
                              OR (w.owner_id = $4 AND w.organization_id = ANY($5)))
                         AND ($6::uuid IS NULL OR w.owner_id = $6)
                         AND ($7 = '%%' OR w.name ILIKE $7)
                         AND ($8 = '' OR EXISTS (SELECT 1 FROM templates t
                                                 WHERE t.id = w.template_id
                                                   AND lower(t.name) = lower($8)))
                         AND ($9::boolean IS NULL OR (
                              SELECT COALESCE(b.has_external_agent, v.has_external_agent)
                              FROM workspace_builds b
                              JOIN template_versions v ON v.id = b.template_version_id
                              WHERE b.workspace_id = w.id
                              ORDER BY b.build_number DESC LIMIT 1) = $9)"#,
                    q.deleted,
                    filter.all,
                    &filter.orgs,
                    filter.owner,
                    &filter.owner_orgs,
                    q.owner,
                    pattern,
                    q.template,
                    q.has_external_agent
                )
                .fetch_one(&mut *conn)
                .await?;
                return Ok((ids, total));
            }
            let rows = sqlx::query!(
                r#"SELECT w.id, count(*) OVER () AS "total!"
                   FROM workspaces w
                   JOIN users u ON u.id = w.owner_id
                   JOIN templates t ON t.id = w.template_id
                   JOIN LATERAL (
                       SELECT b.transition, j.started_at, j.completed_at, j.canceled_at, j.error,
                              b.has_external_agent, v.has_external_agent AS version_has_external_agent
                       FROM workspace_builds b JOIN provisioner_jobs j ON j.id = b.job_id
                       JOIN template_versions v ON v.id = b.template_version_id
                       WHERE b.workspace_id = w.id ORDER BY b.build_number DESC LIMIT 1
                   ) lb ON true
                   WHERE w.deleted = $1
                     AND ($2 OR w.organization_id = ANY($3)
                          OR (w.owner_id = $4 AND w.organization_id = ANY($5)))
                     AND ($6::uuid IS NULL OR w.owner_id = $6)
                     AND ($7 = '%%' OR w.name ILIKE $7)
                     AND ($8 = '' OR lower(t.name) = lower($8))
                     AND ($12::boolean IS NULL
                          OR COALESCE(lb.has_external_agent, lb.version_has_external_agent) = $12)
                     AND (CASE
                            WHEN lb.completed_at IS NOT NULL AND lb.error IS NOT NULL THEN 'failed'
                            WHEN lb.completed_at IS NOT NULL AND lb.canceled_at IS NOT NULL THEN 'canceled'
                            WHEN lb.completed_at IS NOT NULL THEN
                                CASE lb.transition WHEN 'start' THEN 'running' WHEN 'stop' THEN 'stopped' ELSE 'deleted' END
                            WHEN lb.canceled_at IS NOT NULL THEN 'canceling'
                            WHEN lb.started_at IS NULL THEN 'pending'
                            ELSE CASE lb.transition WHEN 'start' THEN 'starting' WHEN 'stop' THEN 'stopping' ELSE 'deleting' END
                          END) = $9
                   ORDER BY lower(u.username), lower(w.name)
                   LIMIT $10 OFFSET $11"#,
                q.deleted,
                filter.all,
                &filter.orgs,
                filter.owner,
                &filter.owner_orgs,
                q.owner,
                pattern,
                q.template,
                q.status,
                q.limit,
                q.offset,
                q.has_external_agent
            )
            .fetch_all(&mut *conn)
            .await?;
            let total = rows.first().map_or(0, |r| r.total);
            Ok((rows.into_iter().map(|r| r.id).collect(), total))
        })
        .await
    }

    /// `owner:` without a status filter, the dashboard's default (`owner:me`): one owner's
    /// name orders nothing, so the page (favorites first, then by name) is a walk of the
    /// (deleted, owner, favorite, lower(name)) index
    /// that stops after `limit` rows, instead of a sort of everything the owner has. The
    /// template is looked at only when a `template:` filter asks (a subquery the planner
    /// drops otherwise, where a join was made for every row: ~30% of the count's time).
    async fn list_owned_workspace_ids(
        &self,
        owner: Uuid,
        q: &WorkspaceQuery,
        filter: &Filter,
    ) -> Result<(Vec<Uuid>, i64)> {
        timed("list_owned_workspace_ids", async {
            // One connection for the page and its count: a connection returned to the pool costs
            // a round trip (sqlx pings it).
            let mut conn = self.pool.acquire().await?;
            let pattern = substring_pattern(&q.name);
            let ids = sqlx::query_scalar!(
                r#"SELECT w.id
                   FROM workspaces w
                   WHERE w.owner_id = $6 AND w.deleted = $1
                     AND ($2 OR w.organization_id = ANY($3)
                          OR (w.owner_id = $4 AND w.organization_id = ANY($5)))
                     AND ($7 = '%%' OR w.name ILIKE $7)
                     AND ($8 = '' OR EXISTS (SELECT 1 FROM templates t
                                             WHERE t.id = w.template_id AND lower(t.name) = lower($8)))
                     AND ($9::boolean IS NULL OR (
                          SELECT COALESCE(b.has_external_agent, v.has_external_agent)
                          FROM workspace_builds b
                          JOIN template_versions v ON v.id = b.template_version_id
                          WHERE b.workspace_id = w.id
                          ORDER BY b.build_number DESC LIMIT 1) = $9)
                   ORDER BY w.favorite DESC, lower(w.name)
                   LIMIT $10 OFFSET $11"#,
                q.deleted,
                filter.all,
                &filter.orgs,
                filter.owner,
                &filter.owner_orgs,
                owner,
                pattern,
                q.template,
                q.has_external_agent,
                q.limit,
                q.offset
            )
            .fetch_all(&mut *conn)
            .await?;
            let total = sqlx::query_scalar!(
                r#"SELECT count(*) AS "count!"
                   FROM workspaces w
                   WHERE w.owner_id = $6 AND w.deleted = $1
                     AND ($2 OR w.organization_id = ANY($3)
                          OR (w.owner_id = $4 AND w.organization_id = ANY($5)))
                     AND ($7 = '%%' OR w.name ILIKE $7)
                     AND ($8 = '' OR EXISTS (SELECT 1 FROM templates t
                                             WHERE t.id = w.template_id AND lower(t.name) = lower($8)))
                     AND ($9::boolean IS NULL OR (
                          SELECT COALESCE(b.has_external_agent, v.has_external_agent)
                          FROM workspace_builds b
                          JOIN template_versions v ON v.id = b.template_version_id
                          WHERE b.workspace_id = w.id
                          ORDER BY b.build_number DESC LIMIT 1) = $9)"#,
                q.deleted,
                filter.all,
                &filter.orgs,
                filter.owner,
                &filter.owner_orgs,
                owner,
                pattern,
                q.template,
                q.has_external_agent
            )
            .fetch_one(&mut *conn)
            .await?;
            Ok((ids, total))
        })
        .await
    }
}
