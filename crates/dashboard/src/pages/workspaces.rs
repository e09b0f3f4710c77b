//! `/workspaces`: Coder's query language in `?filter=` (default `owner:me`), 25 a page, counted
//! and paged in SQL by `domain::search` so members only ever count what they may see.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use coderd_core::domain::{search, views};
use coderd_core::state::AppState;
use codersdk::workspaces::Workspace;
use serde::Deserialize;

use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::{Chrome, Status};

const PAGE_SIZE: i64 = 25;

/// The presets Coder's list offers, as (label, query).
const PRESETS: &[(&str, &str)] = &[
    ("My workspaces", "owner:me"),
    ("All workspaces", ""),
    ("Running", "status:running"),
    ("Failed", "status:failed"),
];

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    filter: Option<String>,
    page: Option<i64>,
}

pub struct Row {
    pub ws: Workspace,
    pub status: Status,
    pub href: String,
    pub last_used: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "workspaces.html")]
pub struct ListPage {
    chrome: Chrome,
    filter: String,
    error: String,
    rows: Vec<Row>,
    count: i64,
    page: i64,
    pages: i64,
    prev: String,
    next: String,
    /// This page's URL, which htmx re-fetches to refresh the table (statuses, queue positions).
    self_url: String,
    presets: Vec<(String, String, bool)>,
}

fn page_url(filter: &str, page: i64) -> String {
    let q = serde_urlencoded::to_string([("filter", filter), ("page", &page.to_string())])
        .unwrap_or_default();
    format!("/workspaces?{q}")
}

pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<ListQuery>,
) -> PageResult<ListPage> {
    let filter = q.filter.unwrap_or_else(|| "owner:me".into());
    let page = q.page.unwrap_or(1).max(1);
    let offset = (page - 1).saturating_mul(PAGE_SIZE);
    let (rows, count, error) =
        match search::workspaces(&state, viewer.subject(), &filter, PAGE_SIZE, offset).await {
            Ok((ids, count)) => {
                let rows = state
                    .store
                    .workspaces_by_ids(&ids)
                    .await
                    .map_err(|e| PageError::from(coderd_core::domain::Error::from(e)))?;
                (views::workspaces(&state, rows).await?, count, String::new())
            }
            // A query that does not parse is shown beside the search box, not as an error page.
            Err(coderd_core::domain::Error::BadRequest { message, detail }) => {
                (Vec::new(), 0, format!("{message} {detail}"))
            }
            Err(e) => return Err(e.into()),
        };
    let rows = rows
        .into_iter()
        .map(|ws| Row {
            status: Status::of(&ws),
            href: format!("/@{}/{}", ws.owner_name, ws.name),
            last_used: ws.last_used_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            ws,
        })
        .collect();
    let pages = ((count + PAGE_SIZE - 1) / PAGE_SIZE).max(1);
    let presets = PRESETS
        .iter()
        .map(|(label, query)| {
            (
                (*label).to_owned(),
                page_url(query, 1),
                filter.trim() == *query,
            )
        })
        .collect();
    Ok(ListPage {
        chrome: Chrome::of(&viewer),
        self_url: page_url(&filter, page),
        prev: if page > 1 {
            page_url(&filter, page - 1)
        } else {
            String::new()
        },
        next: if page < pages {
            page_url(&filter, page + 1)
        } else {
            String::new()
        },
        filter,
        error,
        rows,
        count,
        page,
        pages,
        presets,
    })
}
