//! What a template version or a build declares beyond its resources, recorded at job
//! completion: the owner's secrets a version's builds need (`coder_secret`), whether it has
//! AI tasks or external agents, and a build's task app.

use codersdk::proto::{Resource, SecretRequirement, TemplateFeatures};
use uuid::Uuid;

use super::{Result, Store, timed};

/// What the import of a version found.
pub(crate) async fn record_version_facts(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    features: &TemplateFeatures,
) -> Result<()> {
    sqlx::query!(
        r#"UPDATE template_versions
           SET secret_requirements = $2, has_ai_task = $3, has_external_agent = $4
           WHERE job_id = $1"#,
        job,
        serde_json::to_value(&features.secrets).unwrap_or_default(),
        features.has_ai_tasks,
        features.has_external_agents
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The app a build's AI task is shown in, if it has one: the provider names the app by
/// terraform's id; coderd's apps are found by slug, which is unique within a template. Runs
/// after the build's resources are inserted, since the app is found among them.
pub(crate) async fn build_task_app(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    resources: &[Resource],
    features: &TemplateFeatures,
) -> Result<Option<Uuid>> {
    // It may be an app of a dev container's sub-agent.
    let app_slug = features.ai_tasks.first().and_then(|task| {
        resources
            .iter()
            .flat_map(|r| &r.agents)
            .flat_map(|a| {
                a.apps
                    .iter()
                    .chain(a.devcontainers.iter().flat_map(|d| &d.apps))
            })
            .find(|app| !task.app_id.is_empty() && app.id == task.app_id)
            .map(|app| app.slug.clone())
    });
    let Some(slug) = app_slug else {
        return Ok(None);
    };
    Ok(sqlx::query_scalar!(
        r#"SELECT app.id FROM workspace_apps app
           JOIN workspace_agents agent ON agent.id = app.agent_id
           JOIN workspace_resources res ON res.id = agent.resource_id
           WHERE res.job_id = $1 AND app.slug = $2
           LIMIT 1"#,
        job,
        slug
    )
    .fetch_optional(&mut *tx)
    .await?)
}

impl Store {
    /// The owner's secrets a build needs: those its template version declares.
    pub async fn build_secret_requirements(&self, build: Uuid) -> Result<Vec<SecretRequirement>> {
        timed("build_secret_requirements", async {
            let value = sqlx::query_scalar!(
                r#"SELECT v.secret_requirements FROM workspace_builds b
                   JOIN template_versions v ON v.id = b.template_version_id
                   WHERE b.id = $1"#,
                build
            )
            .fetch_one(&self.pool)
            .await?;
            Ok(serde_json::from_value(value).unwrap_or_default())
        })
        .await
    }
}
