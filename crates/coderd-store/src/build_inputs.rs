//! What a build of an existing workspace is decided from — the latest build's parameter
//! values, the version to run and that version's import job — read in one statement. Read
//! from the pool one by one they were four checkouts; then three statements on one connection;
//! every build that the API, the lifecycle executor or prebuilds create runs it.

use uuid::Uuid;

use super::jobs::JobRow;
use super::templates::TemplateVersionRow;
use super::{Result, Store, timed};

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
            // One statement, one snapshot: the version picked, the latest build's values, and
            // that version with its creator and import job. Inner joins: a version always has
            // its creator and its import job (foreign keys), so no row means no such version.
            let row = sqlx::query!(
                r#"WITH prev AS (
                       SELECT id, template_version_id FROM workspace_builds
                       WHERE workspace_id = $1 ORDER BY build_number DESC LIMIT 1),
                   picked AS (
                       SELECT COALESCE($2::uuid,
                                       CASE WHEN $3::bool
                                            THEN (SELECT template_version_id FROM prev) END,
                                       $4::uuid) AS version)
                   SELECT ARRAY(SELECT p.name FROM workspace_build_parameters p
                                WHERE p.workspace_build_id = (SELECT id FROM prev)
                                ORDER BY p.name) AS "names!",
                          ARRAY(SELECT p.value FROM workspace_build_parameters p
                                WHERE p.workspace_build_id = (SELECT id FROM prev)
                                ORDER BY p.name) AS "values!",
                          v.id, v.template_id, v.organization_id, v.name, v.message, v.readme,
                          v.job_id, v.created_by, v.created_at, v.updated_at, v.archived,
                          v.rich_parameters, v.variables, v.user_variable_values,
                          v.external_auth_providers, v.secret_requirements, v.has_ai_task,
                          v.has_external_agent,
                          u.username AS created_by_username, u.name AS created_by_name,
                          u.avatar_url AS created_by_avatar_url,
                          j.created_at AS j_created_at, j.updated_at AS j_updated_at,
                          j.started_at AS j_started_at, j.canceled_at AS j_canceled_at,
                          j.completed_at AS j_completed_at, j.error AS j_error,
                          j.error_code AS j_error_code, j.organization_id AS j_organization_id,
                          j.initiator_id AS j_initiator_id, j.provisioner AS j_provisioner,
                          j.storage_method AS j_storage_method, j.file_id AS j_file_id,
                          j.type AS j_type, j.input AS j_input, j.worker_id AS j_worker_id,
                          j.tags AS j_tags, j.tags_key AS j_tags_key,
                          j.logs_length AS j_logs_length, j.logs_overflowed AS j_logs_overflowed
                   FROM picked
                   JOIN template_versions v ON v.id = picked.version
                   JOIN users u ON u.id = v.created_by
                   JOIN provisioner_jobs j ON j.id = v.job_id"#,
                workspace,
                exact,
                previous,
                fallback
            )
            .fetch_optional(&self.pool)
            .await?;
            let Some(r) = row else {
                // No such version (a request naming one that does not exist): the caller's
                // error names the id picked, so pick it again without the version.
                return self
                    .picked_without_version(workspace, exact, previous, fallback)
                    .await;
            };
            let import = JobRow {
                id: r.job_id,
                created_at: r.j_created_at,
                updated_at: r.j_updated_at,
                started_at: r.j_started_at,
                canceled_at: r.j_canceled_at,
                completed_at: r.j_completed_at,
                error: r.j_error,
                error_code: r.j_error_code,
                organization_id: r.j_organization_id,
                initiator_id: r.j_initiator_id,
                provisioner: r.j_provisioner,
                storage_method: r.j_storage_method,
                file_id: r.j_file_id,
                r#type: r.j_type,
                input: r.j_input,
                worker_id: r.j_worker_id,
                tags: r.j_tags,
                tags_key: r.j_tags_key,
                logs_length: r.j_logs_length,
                logs_overflowed: r.j_logs_overflowed,
            };
            let version = TemplateVersionRow {
                id: r.id,
                template_id: r.template_id,
                organization_id: r.organization_id,
                name: r.name,
                message: r.message,
                readme: r.readme,
                job_id: r.job_id,
                created_by: r.created_by,
                created_at: r.created_at,
                updated_at: r.updated_at,
                archived: r.archived,
                rich_parameters: r.rich_parameters,
                variables: r.variables,
                user_variable_values: r.user_variable_values,
                external_auth_providers: r.external_auth_providers,
                secret_requirements: r.secret_requirements,
                has_ai_task: r.has_ai_task,
                has_external_agent: r.has_external_agent,
                created_by_username: r.created_by_username,
                created_by_name: r.created_by_name,
                created_by_avatar_url: r.created_by_avatar_url,
            };
            Ok(BuildInputs {
                previous_values: r.names.into_iter().zip(r.values).collect(),
                version_id: version.id,
                version: Some((version, import)),
            })
        })
        .await
    }

    /// [`Store::build_inputs`] when the version picked does not exist: the id picked and the
    /// latest build's values, without a version.
    async fn picked_without_version(
        &self,
        workspace: Uuid,
        exact: Option<Uuid>,
        previous: bool,
        fallback: Uuid,
    ) -> Result<BuildInputs> {
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
        .fetch_one(&self.pool)
        .await?;
        Ok(BuildInputs {
            previous_values: picked.names.into_iter().zip(picked.values).collect(),
            version_id: picked.version,
            version: None,
        })
    }
}
