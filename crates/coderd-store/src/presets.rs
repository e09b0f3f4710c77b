//! A template version's presets (`coder_workspace_preset`) and their parameter values,
//! recorded with a successful import and read by the API, the builder and the prebuilds
//! reconciler.

use chrono::{DateTime, Utc};
use codersdk::proto;
use uuid::Uuid;

use super::{Result, Store, timed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresetRow {
    pub id: Uuid,
    pub template_version_id: Uuid,
    pub name: String,
    pub is_default: bool,
    pub description: String,
    pub icon: String,
    /// `None`: the preset has no `prebuilds` block.
    pub desired_instances: Option<i32>,
    /// Seconds an unclaimed prebuild may live; `None` or 0: forever.
    pub expiration_ttl: Option<i32>,
    pub scheduling: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    /// (name, value), by name.
    pub parameters: Vec<(String, String)>,
}

/// Records the presets an import found, inside the completion transaction.
pub(crate) async fn insert_presets(
    tx: &mut sqlx::PgConnection,
    job: Uuid,
    presets: &[proto::Preset],
) -> Result<()> {
    if presets.is_empty() {
        return Ok(());
    }
    let version = sqlx::query_scalar!("SELECT id FROM template_versions WHERE job_id = $1", job)
        .fetch_one(&mut *tx)
        .await?;
    // A resent result must not add the presets twice.
    sqlx::query!(
        "DELETE FROM template_version_presets WHERE template_version_id = $1",
        version
    )
    .execute(&mut *tx)
    .await?;
    for preset in presets {
        let id = Uuid::new_v4();
        let prebuild = preset.prebuild.as_ref();
        let scheduling = prebuild
            .and_then(|p| p.scheduling.as_ref())
            .and_then(|s| serde_json::to_value(s).ok());
        sqlx::query!(
            r#"INSERT INTO template_version_presets (id, template_version_id, name, is_default,
                   description, icon, desired_instances, expiration_ttl, scheduling, created_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())"#,
            id,
            version,
            preset.name,
            preset.default,
            preset.description,
            preset.icon,
            prebuild.map(|p| p.instances.max(0)),
            prebuild
                .and_then(|p| p.expiration_policy.as_ref())
                .map(|e| e.ttl.max(0)),
            scheduling
        )
        .execute(&mut *tx)
        .await?;
        let (names, values): (Vec<String>, Vec<String>) = preset
            .parameters
            .iter()
            .map(|p| (p.name.clone(), p.value.clone()))
            .unzip();
        sqlx::query!(
            r#"INSERT INTO template_version_preset_parameters (preset_id, name, value)
               SELECT $1, * FROM unnest($2::text[], $3::text[])
               ON CONFLICT (preset_id, name) DO UPDATE SET value = excluded.value"#,
            id,
            &names,
            &values
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

struct Head {
    id: Uuid,
    template_version_id: Uuid,
    name: String,
    is_default: bool,
    description: String,
    icon: String,
    desired_instances: Option<i32>,
    expiration_ttl: Option<i32>,
    scheduling: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
}

impl Store {
    /// Presets of these versions with their parameters, by version then name.
    pub async fn presets_of_versions(&self, versions: &[Uuid]) -> Result<Vec<PresetRow>> {
        timed("presets_of_versions", async {
            let heads = sqlx::query_as!(
                Head,
                r#"SELECT id, template_version_id, name, is_default, description, icon,
                          desired_instances, expiration_ttl, scheduling, created_at
                   FROM template_version_presets WHERE template_version_id = ANY($1)
                   ORDER BY template_version_id, name"#,
                versions
            )
            .fetch_all(&self.pool)
            .await?;
            let ids: Vec<Uuid> = heads.iter().map(|h| h.id).collect();
            let params = sqlx::query!(
                r#"SELECT preset_id, name, value FROM template_version_preset_parameters
                   WHERE preset_id = ANY($1) ORDER BY preset_id, name"#,
                &ids
            )
            .fetch_all(&self.pool)
            .await?;
            Ok(heads
                .into_iter()
                .map(|h| PresetRow {
                    parameters: params
                        .iter()
                        .filter(|p| p.preset_id == h.id)
                        .map(|p| (p.name.clone(), p.value.clone()))
                        .collect(),
                    id: h.id,
                    template_version_id: h.template_version_id,
                    name: h.name,
                    is_default: h.is_default,
                    description: h.description,
                    icon: h.icon,
                    desired_instances: h.desired_instances,
                    expiration_ttl: h.expiration_ttl,
                    scheduling: h.scheduling,
                    created_at: h.created_at,
                })
                .collect())
        })
        .await
    }

    pub async fn preset_by_id(&self, id: Uuid) -> Result<PresetRow> {
        let version = timed("preset_version", async {
            Ok(sqlx::query_scalar!(
                "SELECT template_version_id FROM template_version_presets WHERE id = $1",
                id
            )
            .fetch_one(&self.pool)
            .await?)
        })
        .await?;
        self.presets_of_versions(&[version])
            .await?
            .into_iter()
            .find(|p| p.id == id)
            .ok_or(super::Error::NotFound)
    }
}
