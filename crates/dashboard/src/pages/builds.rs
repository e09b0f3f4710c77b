//! A workspace's builds: `/@{owner}/{workspace}/builds` (the history, newest first) and
//! `/@{owner}/{workspace}/builds/{n}` (one build: transition, initiator, reason, status,
//! duration and its log). Who may read the workspace may read its builds; others get the same
//! 404 as for a workspace that does not exist.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use coderd_core::domain::{resolve, views};
use coderd_core::state::AppState;
use codersdk::workspaces::WorkspaceBuild;
use serde::Deserialize;

use super::workspace::{LogLine, log_tail, lookup};
use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::{Chrome, capitalized};

/// Builds per history page.
const HISTORY_PAGE: i64 = 25;
/// Lines of a build's log shown.
const LOG_LINES: usize = 10_000;

/// A build as a row or a heading shows it.
pub struct BuildView {
    pub b: WorkspaceBuild,
    pub status: String,
    pub class: &'static str,
    pub started: String,
    pub duration: String,
}

impl BuildView {
    fn of(b: WorkspaceBuild) -> Self {
        use codersdk::workspaces::WorkspaceStatus as S;
        let class = match b.status {
            S::Running => "ok",
            S::Failed => "bad",
            S::Stopped | S::Deleted | S::Canceled => "off",
            _ => "busy",
        };
        let duration = match (b.job.started_at, b.job.completed_at) {
            (Some(start), Some(end)) => seconds((end - start).num_seconds()),
            (Some(_), None) => "still running".to_owned(),
            _ => "not started".to_owned(),
        };
        Self {
            status: capitalized(b.status.as_str()),
            class,
            started: b.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            duration,
            b,
        }
    }
}

fn seconds(total: i64) -> String {
    let total = total.max(0);
    if total < 60 {
        format!("{total} s")
    } else {
        format!("{} min {} s", total / 60, total % 60)
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "build.html")]
pub struct BuildPage {
    chrome: Chrome,
    base: String,
    build: BuildView,
    log: Vec<LogLine>,
    truncated: bool,
}

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((owner, name, number)): Path<(String, String, String)>,
) -> PageResult<BuildPage> {
    let owner = owner.strip_prefix('@').ok_or(PageError::NotFound)?;
    let number: i32 = number.parse().map_err(|_| PageError::NotFound)?;
    let (row, ws) =
        resolve::build_by_number(&state, viewer.subject(), owner, &name, number).await?;
    let build = views::build(&state, row).await?;
    let (log, _, truncated) = log_tail(&state, build.job.id, LOG_LINES).await?;
    Ok(BuildPage {
        chrome: Chrome::of(&viewer),
        base: format!("/@{}/{}", build.workspace_owner_name, ws.name),
        build: BuildView::of(build),
        log,
        truncated,
    })
}

#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    page: Option<i64>,
}

#[derive(Template, WebTemplate)]
#[template(path = "builds.html")]
pub struct HistoryPage {
    chrome: Chrome,
    base: String,
    workspace: String,
    builds: Vec<BuildView>,
    page: i64,
    more: bool,
}

pub async fn history(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Query(q): Query<HistoryQuery>,
) -> PageResult<HistoryPage> {
    let row = lookup(&state, &viewer, &owner, &name).await?;
    let page = q.page.unwrap_or(1).max(1);
    // One more than shown says whether there is a next page.
    let rows = state
        .store
        .builds_of(
            row.id,
            HISTORY_PAGE + 1,
            (page - 1).saturating_mul(HISTORY_PAGE),
        )
        .await?;
    let more = rows.len() as i64 > HISTORY_PAGE;
    let rows = rows.into_iter().take(HISTORY_PAGE as usize).collect();
    let builds = views::builds(&state, rows)
        .await?
        .into_iter()
        .map(BuildView::of)
        .collect();
    Ok(HistoryPage {
        chrome: Chrome::of(&viewer),
        base: format!("/{owner}/{}", row.name),
        workspace: row.name,
        builds,
        page,
        more,
    })
}
