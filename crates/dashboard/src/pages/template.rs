//! A template's page (`/templates/{name}`: its description, README and the resources its active
//! version builds) and one version's page (`/templates/{name}/versions/{version}`: who pushed
//! it, its import's status and log — refreshed while the import runs — and the parameters it
//! declares). Who may read the template may read both; others get 404.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use coderd_core::domain::{parameters, views};
use coderd_core::state::AppState;
use coderd_store::{ResourceRow, TemplateRow, TemplateVersionRow};
use codersdk::proto::RichParameter;
use codersdk::templates::TemplateVersion;

use super::create::find_template;
use super::workspace::{LogLine, log_tail};
use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::{Chrome, capitalized};

/// Lines of an import log shown.
const LOG_LINES: usize = 1_000;

#[derive(Template, WebTemplate)]
#[template(path = "template.html")]
pub struct TemplatePage {
    chrome: Chrome,
    template: TemplateRow,
    active: TemplateVersion,
    resources: Vec<ResourceRow>,
}

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> PageResult<TemplatePage> {
    let template = find_template(&state, &viewer, &name).await?;
    let row = state
        .store
        .template_version_by_id(template.active_version_id)
        .await?;
    let active = views::version(&state, row).await?;
    // What a start of the active version builds, as its import planned it.
    let resources = state
        .store
        .resources_of_jobs(&[active.job.id])
        .await?
        .into_iter()
        .map(|tree| tree.resource)
        .filter(|r| r.transition == "start" && !r.hide)
        .collect();
    Ok(TemplatePage {
        chrome: Chrome::of(&viewer),
        template,
        active,
        resources,
    })
}

/// One version and its import, shared by the page and the log fragment it polls.
pub struct VersionView {
    v: TemplateVersion,
    status: String,
    class: &'static str,
    running: bool,
    log: Vec<LogLine>,
    truncated: bool,
}

impl VersionView {
    async fn load(state: &AppState, row: TemplateVersionRow) -> PageResult<Self> {
        let v = views::version(state, row).await?;
        let status = v.job.status.as_str().to_string();
        let class = match status.as_str() {
            "succeeded" => "ok",
            "failed" | "canceled" => "bad",
            _ => "busy",
        };
        let running = matches!(status.as_str(), "pending" | "running" | "canceling");
        let (log, _, truncated) = log_tail(state, v.job.id, LOG_LINES).await?;
        Ok(Self {
            status: capitalized(&status),
            v,
            class,
            running,
            log,
            truncated,
        })
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "template_version.html")]
pub struct VersionPage {
    chrome: Chrome,
    template: TemplateRow,
    version: VersionView,
    parameters: Vec<RichParameter>,
    base: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "template_version_import.html")]
pub struct ImportFragment {
    version: VersionView,
    base: String,
}

async fn find_version(
    state: &AppState,
    viewer: &Viewer,
    template: &str,
    version: &str,
) -> PageResult<(TemplateRow, TemplateVersionRow)> {
    let template = find_template(state, viewer, template).await?;
    // An unknown name is the store's NotFound, which answers 404.
    let row = state
        .store
        .template_version_by_name(template.id, version)
        .await?;
    Ok((template, row))
}

pub async fn version(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((template, version)): Path<(String, String)>,
) -> PageResult<VersionPage> {
    let (template, row) = find_version(&state, &viewer, &template, &version).await?;
    let parameters = parameters::declared(&row);
    let base = format!("/templates/{}/versions/{}", template.name, row.name);
    Ok(VersionPage {
        chrome: Chrome::of(&viewer),
        version: VersionView::load(&state, row).await?,
        template,
        parameters,
        base,
    })
}

/// The import's status and log alone, which the version page polls while the import runs.
pub async fn import_fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((template, version)): Path<(String, String)>,
) -> PageResult<ImportFragment> {
    let (template, row) = find_version(&state, &viewer, &template, &version).await?;
    let base = format!("/templates/{}/versions/{}", template.name, row.name);
    Ok(ImportFragment {
        version: VersionView::load(&state, row).await?,
        base,
    })
}
