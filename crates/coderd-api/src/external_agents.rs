//! External agents (`coder_external_agent`): the agent of such a build runs on a machine its
//! owner provides, so the owner must be able to fetch what starts it.
//!
//! - When a build with external agents completes, each of its token agents' tokens is sealed
//!   with the deployment's keys (`coderd_core::secrets`) and stored beside the agent; coderd keeps
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
use uuid::Uuid;

use coderd_authz::Action;
use coderd_core::domain::{self, resolve};
use coderd_core::state::AppState;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{workspace}/external-agent/{agent}/credentials",
            get(credentials),
        )
        .route("/init-script/{os}/{arch}", get(init_script))
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
    let token = coderd_core::external_agents::open_token(&state, row.job_id, &agent, &sealed)
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
