//! Read-only lists for those who manage the deployment: a template's versions
//! (`/templates/{name}/versions`) and an organization's daemons
//! (`/organizations/{org}/provisioners`). What a viewer sees is what the API would show them.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use coderd::domain::views;
use coderd::state::AppState;
use coderd::store::TemplateRow;
use codersdk::templates::TemplateVersion;

use super::create::find_template;
use super::provisioning::OrgTabs;
use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::{Chrome, capitalized};

#[derive(Template, WebTemplate)]
#[template(path = "versions.html")]
pub struct VersionsPage {
    chrome: Chrome,
    template: TemplateRow,
    versions: Vec<(TemplateVersion, String)>,
}

pub async fn versions(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> PageResult<VersionsPage> {
    let template = find_template(&state, &viewer, &name).await?;
    let rows = state.store.template_versions_of(template.id).await?;
    let mut versions = Vec::with_capacity(rows.len());
    // Newest first, as Coder lists them.
    for row in rows.into_iter().rev() {
        let v = views::version(&state, row).await?;
        let status = capitalized(v.job.status.as_str());
        versions.push((v, status));
    }
    Ok(VersionsPage {
        chrome: Chrome::of(&viewer),
        template,
        versions,
    })
}

/// A daemon row: the SDK view plus its status and tags as words.
pub struct DaemonView {
    pub d: codersdk::provisioners::ProvisionerDaemon,
    pub status: String,
    pub class: &'static str,
    pub tags: String,
    pub last_seen: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "provisioners.html")]
pub struct ProvisionersPage {
    chrome: Chrome,
    org: String,
    tabs: OrgTabs,
    daemons: Vec<DaemonView>,
}

/// `/organizations/{org}/provisioners`: the organization's daemons the viewer may see, with
/// the same visibility rules as the API (`domain::jobs::daemons`).
pub async fn provisioners(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
) -> PageResult<ProvisionersPage> {
    use codersdk::provisioners::ProvisionerDaemonStatus as S;
    let org = coderd::domain::resolve::organization(&state, viewer.subject(), &org).await?;
    let daemons = coderd::domain::jobs::daemons(&state, viewer.subject(), org.id)
        .await?
        .into_iter()
        .map(|d| DaemonView {
            status: capitalized(d.status.as_str()),
            class: match d.status {
                S::Idle => "ok",
                S::Busy => "busy",
                S::Offline => "off",
            },
            tags: d
                .tags
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            last_seen: d
                .last_seen_at
                .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default(),
            d,
        })
        .collect();
    Ok(ProvisionersPage {
        chrome: Chrome::of(&viewer),
        tabs: OrgTabs::new(viewer.subject(), &org, "provisioners"),
        org: org.name,
        daemons,
    })
}
