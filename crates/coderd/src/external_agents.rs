//! External agents (`coder_external_agent`): the agent of such a build runs on a machine its
//! owner provides, so the owner must be able to fetch what starts it.
//!
//! - When a build with external agents completes, each of its token agents' tokens is sealed
//!   with the deployment's keys (`crate::secrets`) and stored beside the agent; coderd keeps
//!   only hashes of every other agent's token.
//! - `GET /workspaces/{workspace}/external-agent/{agent}/credentials` opens it for whoever may
//!   connect to the workspace (its owner; owners of the deployment), as Coder's
//!   `ExternalAgentCredentials`: the token and a command that fetches
//!   `/api/v2/init-script/{os}/{arch}` (the agent's bootstrap script, the one terraform gets)
//!   and runs it with the token. Coder lets anyone who can read the workspace fetch them;
//!   coder-rs asks for the right to connect, since the token is the agent's identity. Others
//!   get 404, and so does a workspace without external agents or an agent of another kind.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use codersdk::externalagents::ExternalAgentCredentials;
use codersdk::proto::{AgentAuth, Resource};
use uuid::Uuid;

use crate::authz::Action;
use crate::domain::{self, resolve};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{Auth, Json, Path};
use crate::state::AppState;
use crate::store::SealedAgentToken;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{workspace}/external-agent/{agent}/credentials",
            get(credentials),
        )
        .route("/init-script/{os}/{arch}", get(init_script))
}

/// What a sealed token is bound to: its build's job and its agent.
fn purpose(job: Uuid, agent: &str) -> String {
    format!("external_agent:{job}:{agent}")
}

/// Seals the tokens of a completing build's agents. An agent whose token cannot be sealed
/// (the keys cannot be loaded) gets none: its credentials then say so, and the build still
/// completes.
pub(crate) async fn seal_tokens(
    state: &AppState,
    job: Uuid,
    resources: &[Resource],
) -> Vec<SealedAgentToken> {
    let mut sealed = Vec::new();
    for agent in resources.iter().flat_map(|r| &r.agents) {
        let AgentAuth::Token(token) = &agent.auth else {
            continue;
        };
        if token.is_empty() {
            continue;
        }
        match crate::secrets::seal_value(state, &purpose(job, &agent.name), token).await {
            Ok(value) => sealed.push(SealedAgentToken {
                agent_name: agent.name.clone(),
                sealed: value,
            }),
            Err(e) => {
                tracing::warn!(job = %job, agent = %agent.name, error = %e,
                    "external agents: sealing a token");
            }
        }
    }
    sealed
}

fn not_found(message: String) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, message)
}

#[utoipa::path(get, path = "/api/v2/workspaces/{workspace}/external-agent/{agent}/credentials",
    tag = "Enterprise",
    params(("workspace" = Uuid, Path), ("agent" = String, Path, description = "Agent name")),
    responses((status = 200, body = ExternalAgentCredentials)))]
pub(crate) async fn credentials(
    State(state): State<AppState>,
    auth: Auth,
    Path((workspace, agent)): Path<(Uuid, String)>,
) -> ApiResult<Json<ExternalAgentCredentials>> {
    let workspace =
        resolve::workspace(&state, &auth.subject, workspace, Action::Connect, false).await?;
    let build = state
        .store
        .latest_build_external(workspace.id)
        .await
        .map_err(domain::Error::from)?;
    if !build.has_external_agent {
        return Err(not_found(
            "Workspace does not have an external agent.".into(),
        ));
    }
    let row = state
        .store
        .build_agent_by_name(build.job_id, &agent)
        .await
        .map_err(domain::Error::from)?
        .ok_or_else(|| not_found(format!("External agent '{agent}' not found in workspace.")))?;
    if row.auth_instance_id.is_some() {
        return Err(not_found(
            "External agent is authenticated with an instance ID.".into(),
        ));
    }
    let sealed = row.sealed_token.ok_or_else(|| {
        not_found(format!(
            "External agent '{agent}' has no token coderd can hand out."
        ))
    })?;
    let token = crate::secrets::open_value(&state, &purpose(row.job_id, &agent), &sealed)
        .await
        .map_err(ApiError::internal)?;
    let url = format!(
        "{}/api/v2/init-script/{}/{}",
        state.options.access_url.as_str().trim_end_matches('/'),
        row.operating_system,
        row.architecture
    );
    let command = if row.operating_system == "windows" {
        format!("$env:CODER_AGENT_TOKEN={token:?}; iwr -useb {url:?} | iex")
    } else {
        format!("curl -fsSL {url:?} | CODER_AGENT_TOKEN={token:?} sh")
    };
    Ok(Json(ExternalAgentCredentials {
        agent_token: token,
        command,
    }))
}

/// The bootstrap script of an agent on `os`/`arch`, for token authentication, with this
/// deployment's URL: what terraform would have put in the agent's `init_script`.
#[utoipa::path(get, path = "/api/v2/init-script/{os}/{arch}", tag = "InitScript",
    params(("os" = String, Path), ("arch" = String, Path)),
    responses((status = 200, body = String, content_type = "text/plain")),
    security(()))]
pub(crate) async fn init_script(
    State(state): State<AppState>,
    Path((os, arch)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let script = provisioner_terraform::agent_scripts::script(&os, &arch).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Unknown os/arch: {os}/{arch}. Use linux, darwin or windows with amd64, arm64 or \
             armv7."
        ))
    })?;
    let mut access_url = state.options.access_url.as_str().to_owned();
    if !access_url.ends_with('/') {
        access_url.push('/');
    }
    let script = script
        .replace("${ACCESS_URL}", &access_url)
        .replace("${AUTH_TYPE}", "token");
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        script,
    ))
}
