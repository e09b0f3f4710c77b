//! What a build of an existing workspace is decided from — the latest build's parameter
//! values, the version to run and that version's import job — read on one connection. Read
//! from the pool one by one they were four checkouts, each returned with sqlx's ping: eight
//! round trips before every build that the API, the lifecycle executor or prebuilds create.

use uuid::Uuid;

use super::jobs::JobRow;
use super::templates::{TemplateVersionRow, version_by_id};
use super::{Error, Result, Store, timed};

/// See [`Store::build_inputs`].
#[derive(Debug)]
pub struct BuildInputs {
    /// The latest build's parameter values by name (none without a build).
    pub previous_values: Vec<(String, String)>,
    /// The version picked.
    pub version_id: Uuid,
    /// That version and its import job; `None` when no version has that id.
    pub version: Option<(TemplateVersionRow, JobRow)>,
}

impl Store {
    /// The inputs of `workspace`'s next build. Its version is `exact` if given, else the
    /// latest build's when `previous` (and there is one), else `fallback`.
    pub async fn build_inputs(
        &self,
        workspace: Uuid,
        exact: Option<Uuid>,
        previous: bool,
        fallback: Uuid,
    ) -> Result<BuildInputs> {
        timed("build_inputs", async {
            let mut conn = self.pool.acquire().await?;
            let picked = sqlx::query!(
                r#"WITH prev AS (
                       SELECT id, template_version_id FROM workspace_builds
                       WHERE workspace_id = $1 ORDER BY build_number DESC LIMIT 1)
                   SELECT COALESCE($2::uuid,
                                   CASE WHEN $3::bool THEN (SELECT template_version_id FROM prev) END,
                                   $4::uuid) AS "version!",
                          ARRAY(SELECT p.name FROM workspace_build_parameters p
                                WHERE p.workspace_build_id = (SELECT id FROM prev)
                                ORDER BY p.name) AS "names!",
                          ARRAY(SELECT p.value FROM workspace_build_parameters p
                                WHERE p.workspace_build_id = (SELECT id FROM prev)
                                ORDER BY p.name) AS "values!""#,
                workspace,
                exact,
                previous,
                fallback
            )
            .fetch_one(&mut *conn)
            .await?;
            let version = match version_by_id(&mut conn, picked.version).await {
                Ok(version) => {
                    let import = sqlx::query_as!(
                        JobRow,
                        "SELECT * FROM provisioner_jobs WHERE id = $1",
                        version.job_id
                    )
                    .fetch_one(&mut *conn)
                    .await?;
                    Some((version, import))
                }
                Err(Error::NotFound) => None,
                Err(e) => return Err(e),
            };
            Ok(BuildInputs {
                previous_values: picked.names.into_iter().zip(picked.values).collect(),
                version_id: picked.version,
                version,
            })
        })
        .await
    }
}
