//! The manifest an agent fetches on connect: built from what the build stored.

use codersdk::agentsdk::{Manifest, ManifestDevcontainer, ManifestScript, MetadataDescription};

use crate::state::AppState;
use coderd_store as store;

pub async fn build(state: &AppState, agent: uuid::Uuid) -> store::Result<Manifest> {
    let row = state.store.agent_by_id(agent).await?;
    let context = state.store.agent_context(agent).await?;
    let scripts = state.store.agent_scripts(&[agent]).await?;
    let metadata = state.store.agent_metadata(agent).await?;
    let devcontainers = state.store.agent_devcontainers(agent).await?;
    let apps = state
        .store
        .agent_apps(agent)
        .await?
        .into_iter()
        .map(crate::domain::render::app)
        .collect();
    Ok(Manifest {
        agent_id: row.id,
        agent_name: row.name,
        owner_name: context.owner_username,
        workspace_id: context.workspace_id,
        workspace_name: context.workspace_name,
        template_name: context.template_name,
        environment_variables: serde_json::from_value(row.environment_variables)
            .unwrap_or_default(),
        directory: row.directory,
        motd_file: row.motd_file,
        scripts: scripts
            .into_iter()
            .map(|s| ManifestScript {
                id: s.id,
                log_source_id: s.log_source_id,
                display_name: s.display_name,
                script: s.script,
                cron: s.cron,
                run_on_start: s.run_on_start,
                run_on_stop: s.run_on_stop,
                start_blocks_login: s.start_blocks_login,
                timeout_seconds: i64::from(s.timeout_seconds),
                log_path: s.log_path,
                resource_address: s.resource_address,
                dependencies: serde_json::from_value(s.dependencies).unwrap_or_default(),
            })
            .collect(),
        metadata: metadata
            .into_iter()
            .map(|m| MetadataDescription {
                key: m.key,
                display_name: m.display_name,
                script: m.script,
                interval_seconds: m.interval_seconds,
                timeout_seconds: m.timeout_seconds,
            })
            .collect(),
        apps,
        access_url: state.options.access_url.as_str().to_string(),
        devcontainers: devcontainers
            .into_iter()
            .map(|d| ManifestDevcontainer {
                id: d.id,
                log_source_id: d.log_source_id,
                name: d.name,
                workspace_folder: d.workspace_folder,
                config_path: d.config_path,
                subagent_id: d.subagent_id,
            })
            .collect(),
    })
}
