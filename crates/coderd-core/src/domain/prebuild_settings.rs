//! Deployment-wide prebuild settings: whether the reconciler is paused (Coder's
//! `/prebuilds/settings`), kept in `site_configs` so every replica's reconciler obeys it.

use codersdk::deployment::PrebuildsSettings;

use super::{Error, Result};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

const KEY: &str = "prebuilds_settings";

/// The settings as saved (not paused until someone pauses it). For the reconciler too.
pub async fn current(state: &AppState) -> Result<PrebuildsSettings> {
    match state.store.site_config(KEY).await? {
        Some(json) => serde_json::from_str(&json).map_err(Error::internal),
        None => Ok(PrebuildsSettings::default()),
    }
}

/// The settings, for those who may read the deployment's configuration.
pub async fn get(state: &AppState, subject: &Subject) -> Result<PrebuildsSettings> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    current(state).await
}

/// Pauses or resumes the reconciler; deployment administrators only.
pub async fn update(
    state: &AppState,
    subject: &Subject,
    settings: &PrebuildsSettings,
) -> Result<PrebuildsSettings> {
    authz::authorize(
        subject,
        Action::Update,
        &Object::site(Resource::DeploymentConfig),
    )?;
    let json = serde_json::to_string(settings).map_err(Error::internal)?;
    state.store.set_site_config(KEY, &json).await?;
    tracing::info!(
        paused = settings.reconciliation_paused,
        "prebuilds: reconciliation settings changed"
    );
    Ok(settings.clone())
}
