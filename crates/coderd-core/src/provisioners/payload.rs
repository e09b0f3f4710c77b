//! Turning an acquired job row into everything the daemon needs to run it, so the daemon never
//! has to ask coderd (or a database) for anything else. This runs between acquisition and the
//! daemon receiving its job, so it is kept to a few queries: the job's context, the template
//! archive (from [`super::file_cache`]), and for builds the owner's token and secrets (the
//! context says which the version declares and the workspace's task, if any; the owner's
//! secrets are read only when it declares some).

use codersdk::proto::{ExternalAuthProviderResource, SecretRequirement};
use codersdk::provisionerd::{
    AcquiredJob, JobKind, JobLog, LogLevel, LogSource, Metadata, PrebuiltWorkspaceBuildStage,
    RichParameterValue, Transition, VariableValue,
};
use codersdk::users::LoginType;
use uuid::Uuid;

use crate::state::AppState;
use coderd_store::{self as store, JobRow};

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
    #[error("the workspace owner's secrets: {0}")]
    Secrets(#[from] crate::secrets::Error),
    #[error("external auth: {0}")]
    ExternalAuth(#[from] crate::external_auth::links::Error),
    #[error("the workspace owner's git SSH key: {0}")]
    SshKey(#[from] crate::domain::Error),
}

/// A claim is marked in the job's input by the claim; every other build of a workspace the
/// prebuilds user owns makes (or unmakes) a prebuilt workspace: only the reconciler builds them.
fn prebuild_stage(job: &JobRow, owner: Uuid) -> PrebuiltWorkspaceBuildStage {
    let marked = job
        .input
        .get("prebuilt_workspace_build_stage")
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    match marked {
        Some(stage) => stage,
        None if owner == store::PREBUILDS_USER_ID => PrebuiltWorkspaceBuildStage::Create,
        None => PrebuiltWorkspaceBuildStage::None,
    }
}

fn input_id(job: &JobRow, field: &str) -> Result<Uuid, PayloadError> {
    job.input
        .get(field)
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| PayloadError::Input(format!("missing {field}")))
}

/// Describes `job`; `prefetched` is used when it is the context of the job's build.
pub async fn build(
    state: &AppState,
    job: &JobRow,
    prefetched: Option<store::BuildContext>,
) -> Result<AcquiredJob, PayloadError> {
    Ok(describe(state, job, prefetched).await?.job)
}

/// A job as its daemon gets it, and for a build the schedule facts read with it, from which
/// its completion is prepared ([`store::Store::complete_prepared_and_claim`]).
pub struct Described {
    pub job: AcquiredJob,
    pub facts: Option<store::CompletionFacts>,
}

/// [`build`], keeping a build's schedule facts.
pub async fn describe(
    state: &AppState,
    job: &JobRow,
    prefetched: Option<store::BuildContext>,
) -> Result<Described, PayloadError> {
    let mut facts = None;
    let archive = state.files.get(&state.store, job.file_id).await?;
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
                user_variable_values: serde_json::from_value::<Vec<VariableValue>>(
                    version.user_variable_values,
                )
                .unwrap_or_default(),
            }
        }
        "workspace_build" => {
            let build_id = input_id(job, "workspace_build_id")?;
            let build = match prefetched {
                Some(context) if context.build_id == build_id => context,
                _ => state.store.build_context(build_id).await?,
            };
            let transition: Transition = build.transition.parse().map_err(PayloadError::Input)?;
            facts = Some(build.completion_facts());
            let owner_token = if job.provisioner == "terraform" {
                crate::domain::keys::issue_key(
                    state,
                    build.owner_id,
                    LoginType::None,
                    "",
                    OWNER_TOKEN_LIFETIME,
                    None,
                )
                .await
                .map_err(|e| PayloadError::Token(e.to_string()))?
            } else {
                String::new()
            };
            let wanted: Vec<SecretRequirement> =
                serde_json::from_value(build.secret_requirements).unwrap_or_default();
            let secrets = crate::secrets::for_build(state, &wanted, build.owner_id).await?;
            let wanted_auth: Vec<ExternalAuthProviderResource> =
                serde_json::from_value(build.external_auth_providers).unwrap_or_default();
            let (external_auth_providers, notes) =
                crate::external_auth::for_build(state, build.owner_id, &wanted_auth).await?;
            if let (Some(worker), false) = (job.worker_id, notes.is_empty()) {
                let lines: Vec<JobLog> = notes
                    .into_iter()
                    .map(|output| JobLog {
                        created_at: chrono::Utc::now(),
                        source: LogSource::ProvisionerDaemon,
                        level: LogLevel::Warn,
                        stage: "Setting up".into(),
                        output,
                    })
                    .collect();
                state.store.update_job(job.id, worker, &lines).await?;
            }
            let owner_ssh_key = if job.provisioner == "terraform" {
                Some(crate::external_auth::gitsshkey::for_workspace(state, build.owner_id).await?)
            } else {
                None
            };
            let prebuilt_workspace_build_stage = prebuild_stage(job, build.owner_id);
            // Every build of a task's workspace tells the provider its task and prompt.
            let task_id = build.task_id.map(|id| id.to_string()).unwrap_or_default();
            let task_prompt = build.task_prompt.unwrap_or_default();
            JobKind::WorkspaceBuild {
                secrets,
                external_auth_providers,
                owner_ssh_key,
                workspace_build_id: build.build_id,
                workspace_name: build.workspace_name.clone(),
                state: build.state.unwrap_or_default(),
                rich_parameter_values: build
                    .parameter_names
                    .into_iter()
                    .zip(build.parameter_values)
                    .map(|(name, value)| RichParameterValue { name, value })
                    .collect(),
                variable_values: serde_json::from_value(build.user_variable_values)
                    .unwrap_or_default(),
                metadata: Metadata {
                    coder_url: access_url,
                    workspace_transition: transition,
                    workspace_name: build.workspace_name,
                    workspace_owner: build.owner_username,
                    workspace_owner_id: build.owner_id.to_string(),
                    workspace_owner_email: build.owner_email,
                    workspace_owner_name: build.owner_name,
                    workspace_owner_session_token: owner_token,
                    workspace_id: build.workspace_id.to_string(),
                    workspace_build_id: build.build_id.to_string(),
                    template_id: build.template_id.to_string(),
                    template_name: build.template_name,
                    template_version: build.version_name,
                    workspace_owner_groups: Vec::new(),
                    prebuilt_workspace_build_stage,
                    task_id,
                    task_prompt,
                },
            }
        }
        other => {
            return Err(PayloadError::Input(format!(
                "unsupported job type {other:?}"
            )));
        }
    };
    Ok(Described {
        job: AcquiredJob {
            job_id: job.id,
            created_at: job.created_at,
            provisioner: job.provisioner.clone(),
            template_source_archive: archive,
            kind,
        },
        facts,
    })
}
