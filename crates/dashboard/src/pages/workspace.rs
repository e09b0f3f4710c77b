//! `/@{owner}/{workspace}`: status, the actions its status allows (as POST forms), the latest
//! build's log and the agents with their apps. Members asking for another's workspace get the
//! same 404 as for one that does not exist (`domain::resolve`).

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use coderd_authz::Action;
use coderd_core::domain::builds::{self, BuildReason, BuildRequest};
use coderd_core::domain::logs::{JobLogTail, LogTail};
use coderd_core::domain::{resolve, views};
use coderd_core::state::AppState;
use coderd_store::WorkspaceRow;
use codersdk::provisionerd::Transition;
use codersdk::workspaces::Workspace;
use serde::Deserialize;

use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::{self, Chrome, WorkspaceLive};

/// Lines of the build log shown at first (the rest by download, later).
const LOG_TAIL: usize = 1000;

/// The workspace named by a `/@owner/name` URL, if the viewer may read it.
pub async fn lookup(
    state: &AppState,
    viewer: &Viewer,
    owner: &str,
    name: &str,
) -> PageResult<WorkspaceRow> {
    let owner = owner.strip_prefix('@').ok_or(PageError::NotFound)?;
    Ok(resolve::workspace_by_name(state, viewer.subject(), owner, name, Action::Read).await?)
}

pub struct LogLine {
    pub id: i64,
    pub text: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "workspace.html")]
pub struct WorkspacePage {
    chrome: Chrome,
    ws: Workspace,
    live: String,
    log: Vec<LogLine>,
    after: i64,
    error: String,
    /// The owner's links with the providers the build's template version needs (shown to the
    /// owner only: the links are theirs).
    external_auth: Vec<codersdk::externalauth::TemplateVersionExternalAuth>,
}

/// Formats a log line as the CLI does: stage, then output.
pub fn line_text(row: &coderd_store::LogRow) -> String {
    if row.stage.is_empty() {
        row.output.clone()
    } else {
        format!("[{}] {}", row.stage, row.output)
    }
}

/// The last `max` lines of a job's log, the id of the last one, and whether earlier lines were
/// left out.
pub async fn log_tail(
    state: &AppState,
    job: uuid::Uuid,
    max: usize,
) -> PageResult<(Vec<LogLine>, i64, bool)> {
    let rows = state.store.job_logs_after(job, 0).await?;
    let skip = rows.len().saturating_sub(max);
    let lines = rows
        .iter()
        .skip(skip)
        .map(|r| LogLine {
            id: r.id,
            text: line_text(r),
        })
        .collect();
    let after = rows.last().map(|r| r.id).unwrap_or(0);
    Ok((lines, after, skip > 0))
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    row: WorkspaceRow,
    error: String,
) -> PageResult<WorkspacePage> {
    let ws = views::workspace(state, row).await?;
    let (log, after, _) = log_tail(state, ws.latest_build.job.id, LOG_TAIL).await?;
    let live = WorkspaceLive::new(&ws, &viewer.csrf).render()?;
    let external_auth = if ws.owner_id == viewer.session.user.id {
        let version = coderd_core::domain::resolve::version(
            state,
            viewer.subject(),
            ws.latest_build.template_version_id,
        )
        .await?;
        let wanted: Vec<codersdk::proto::ExternalAuthProviderResource> =
            serde_json::from_value(version.external_auth_providers).unwrap_or_default();
        coderd_core::external_auth::for_template_version(state, ws.owner_id, &wanted).await?
    } else {
        Vec::new()
    };
    Ok(WorkspacePage {
        external_auth,
        chrome: Chrome::of(viewer),
        live,
        ws,
        log,
        after,
        error,
    })
}

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
) -> PageResult<WorkspacePage> {
    let row = lookup(&state, &viewer, &owner, &name).await?;
    page(&state, &viewer, row, String::new()).await
}

/// The live region alone: htmx's polling fallback when the socket cannot open.
pub async fn fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
) -> PageResult<Response> {
    let row = lookup(&state, &viewer, &owner, &name).await?;
    let ws = views::workspace(&state, row).await?;
    Ok(view::html(&WorkspaceLive::new(&ws, &viewer.csrf))?.into_response())
}

#[derive(Debug, Deserialize)]
pub struct BuildForm {
    #[serde(default)]
    csrf: String,
    transition: String,
    #[serde(default)]
    confirm: String,
}

fn back(owner: &str, name: &str) -> Response {
    Redirect::to(&format!("/{owner}/{name}")).into_response()
}

pub async fn build(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<BuildForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let row = lookup(&state, &viewer, &owner, &name).await?;
    let transition = match form.transition.as_str() {
        "start" => Transition::Start,
        "stop" | "restart" => Transition::Stop,
        "delete" => Transition::Delete,
        other => return Err(PageError::BadRequest(format!("Unknown action {other:?}."))),
    };
    if transition == Transition::Delete && form.confirm != row.name {
        let error = "Type the workspace's name to confirm deleting it.".to_owned();
        let page = page(&state, &viewer, row, error).await?;
        return Ok((axum::http::StatusCode::BAD_REQUEST, page).into_response());
    }
    let subject = viewer.subject().clone();
    let stop = builds::create_build(
        &state,
        &subject,
        &row,
        BuildRequest::new(transition, BuildReason::Dashboard),
    )
    .await?;
    if form.transition == "restart" {
        // A restart is a stop, then a start once the stop has finished (as Coder's dashboard
        // does it); the start is made here so the person need not wait on the page for it.
        let state = state.clone();
        tokio::spawn(async move {
            let mut tail = JobLogTail::new(&state, stop.job_id, i64::MAX);
            while let Ok(Some(_)) = tail.next().await {}
            let Ok(row) = state.store.workspace_by_id(row.id, false).await else {
                return;
            };
            let start = BuildRequest::new(Transition::Start, BuildReason::Dashboard);
            if let Err(e) = builds::create_build(&state, &subject, &row, start).await {
                tracing::warn!(error = %e, workspace = %row.id, "restart: starting after the stop failed");
            }
        });
    }
    if transition == Transition::Delete {
        return Ok(Redirect::to("/workspaces").into_response());
    }
    Ok(back(&owner, &name))
}

#[derive(Debug, Deserialize)]
pub struct CancelForm {
    #[serde(default)]
    csrf: String,
}

pub async fn cancel(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    Form(form): Form<CancelForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let row = lookup(&state, &viewer, &owner, &name).await?;
    let latest = state.store.latest_builds(&[row.id]).await?;
    let build = latest.into_iter().next().ok_or(PageError::NotFound)?;
    builds::cancel_build(&state, viewer.subject(), &build, &row).await?;
    Ok(back(&owner, &name))
}
