//! Turning an acquired job row into everything the daemon needs to run it, so the daemon never
//! has to ask coderd (or a database) for anything else.

use codersdk::provisionerd::{
    AcquiredJob, JobKind, Metadata, RichParameterValue, Transition, VariableValue,
};
use codersdk::users::LoginType;
use uuid::Uuid;

use crate::http::AppState;
use crate::store::{self, JobRow};

/// How long the workspace owner's token handed to terraform builds lasts.
const OWNER_TOKEN_LIFETIME: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("the job's input is malformed: {0}")]
    Input(String),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("issuing the workspace owner's token: {0}")]
    Token(String),
}

fn input_id(job: &JobRow, field: &str) -> Result<Uuid, PayloadError> {
    job.input
        .get(field)
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| PayloadError::Input(format!("missing {field}")))
}

fn variable_values(version: &store::TemplateVersionRow) -> Vec<VariableValue> {
    serde_json::from_value(version.user_variable_values.clone()).unwrap_or_default()
}

pub async fn build(state: &AppState, job: &JobRow) -> Result<AcquiredJob, PayloadError> {
    let file = state.store.file_by_id(job.file_id).await?;
    let access_url = state
        .options
        .access_url
        .as_str()
        .trim_end_matches('/')
        .to_string();
    let kind = match job.r#type.as_str() {
        "template_version_import" => {
            let version = state.store.template_version_by_job(job.id).await?;
            let template = match version.template_id {
                Some(id) => Some(state.store.template_by_id(id).await?),
                None => None,
            };
            JobKind::TemplateImport {
                metadata: Metadata {
                    coder_url: access_url,
                    workspace_transition: Transition::Start,
                    template_id: template
                        .as_ref()
                        .map(|t| t.id.to_string())
                        .unwrap_or_default(),
                    template_name: template.map(|t| t.name).unwrap_or_default(),
                    template_version: version.name.clone(),
                    ..Metadata::default()
                },
                user_variable_values: variable_values(&version),
            }
        }
        "workspace_build" => {
            let build_id = input_id(job, "workspace_build_id")?;
            let build = state.store.build_by_id(build_id).await?;
            let workspace = state
                .store
                .workspace_by_id(build.workspace_id, true)
                .await?;
            let owner = state.store.user_by_id(workspace.owner_id).await?;
            let version = state
                .store
                .template_version_by_id(build.template_version_id)
                .await?;
            let template = state.store.template_by_id(workspace.template_id).await?;
            let transition: Transition = build.transition.parse().map_err(PayloadError::Input)?;
            let owner_token = if job.provisioner == "terraform" {
                crate::http::apikeys::issue_key(
                    state,
                    owner.id,
                    LoginType::None,
                    "",
                    OWNER_TOKEN_LIFETIME,
                )
                .await
                .map_err(|e| PayloadError::Token(e.body.message))?
            } else {
                String::new()
            };
            JobKind::WorkspaceBuild {
                workspace_build_id: build.id,
                workspace_name: workspace.name.clone(),
                state: state.store.build_state(build.id).await?,
                rich_parameter_values: state
                    .store
                    .build_parameters(build.id)
                    .await?
                    .into_iter()
                    .map(|(name, value)| RichParameterValue { name, value })
                    .collect(),
                variable_values: variable_values(&version),
                metadata: Metadata {
                    coder_url: access_url,
                    workspace_transition: transition,
                    workspace_name: workspace.name,
                    workspace_owner: owner.username,
                    workspace_owner_id: owner.id.to_string(),
                    workspace_owner_email: owner.email,
                    workspace_owner_name: owner.name,
                    workspace_owner_session_token: owner_token,
                    workspace_id: workspace.id.to_string(),
                    workspace_build_id: build.id.to_string(),
                    template_id: template.id.to_string(),
                    template_name: template.name,
                    template_version: version.name,
                    workspace_owner_groups: Vec::new(),
                },
            }
        }
        other => {
            return Err(PayloadError::Input(format!(
                "unsupported job type {other:?}"
            )));
        }
    };
    Ok(AcquiredJob {
        job_id: job.id,
        created_at: job.created_at,
        provisioner: job.provisioner.clone(),
        template_source_archive: file.data,
        kind,
    })
}
