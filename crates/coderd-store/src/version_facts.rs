//! What a template version or a build declares beyond its resources, recorded at job
//! completion: the owner's secrets a version's builds need (`coder_secret`), whether it has
//! AI tasks or external agents.

use codersdk::proto::TemplateFeatures;
use uuid::Uuid;

use super::Result;

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
