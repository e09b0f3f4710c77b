//! Read-only lists for those who manage the deployment: a template's versions
//! (`/templates/{name}/versions`) and an organization's daemons
//! (`/organizations/{org}/provisioners`). What a viewer sees is what the API would show them.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use coderd_authz::{Action, Object, Resource};
use coderd_core::domain::views;
use coderd_core::state::AppState;
use coderd_store::TemplateRow;
use codersdk::templates::TemplateVersion;

use super::create::find_template;
use super::provisioning::OrgTabs;
use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::{Chrome, capitalized, daemons_match, tags_text};

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

/// A pending job no online daemon can take: why, and the tags it asks for.
pub struct WaitingView {
    pub kind: &'static str,
    pub template: String,
    pub tags: String,
    pub reason: String,
    pub queued: String,
}

impl WaitingView {
    fn of(w: coderd_core::domain::jobs::WaitingJob) -> Self {
        use codersdk::provisioners::ProvisionerJobType as T;
        let reason = if w.matched.count == 0 {
            "No provisioner matches its tags".to_owned()
        } else {
            format!(
                "{} its tags, none is online",
                daemons_match(w.matched.count)
            )
        };
        Self {
            kind: match w.job.job_type {
                T::TemplateVersionImport => "Template import",
                T::TemplateVersionDryRun => "Dry run",
                T::WorkspaceBuild => "Workspace build",
            },
            template: w.template_name,
            tags: tags_text(&w.job.tags),
            reason,
            queued: w.job.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "provisioners.html")]
pub struct ProvisionersPage {
    chrome: Chrome,
    org: String,
    tabs: OrgTabs,
    daemons: Vec<DaemonView>,
    /// `None` for those who may not read the organization's jobs.
    waiting: Option<Vec<WaitingView>>,
}

/// `/organizations/{org}/provisioners`: the organization's daemons the viewer may see, with
/// the same visibility rules as the API (`domain::jobs::daemons`), and, for those who may read
/// its jobs, the pending ones no online daemon can take, so a stuck build explains itself.
pub async fn provisioners(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
) -> PageResult<ProvisionersPage> {
    use codersdk::provisioners::ProvisionerDaemonStatus as S;
    let org = coderd_core::domain::resolve::organization(&state, viewer.subject(), &org).await?;
    let daemons = coderd_core::domain::jobs::daemons(&state, viewer.subject(), org.id)
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
    let jobs = Object::in_org(Resource::ProvisionerJob, org.id);
    let waiting = if viewer.subject().can(Action::Read, &jobs) {
        let waiting = coderd_core::domain::jobs::waiting(&state, viewer.subject(), org.id).await?;
        Some(waiting.into_iter().map(WaitingView::of).collect())
    } else {
        None
    };
    Ok(ProvisionersPage {
        chrome: Chrome::of(&viewer),
        tabs: OrgTabs::new(viewer.subject(), &org, "provisioners"),
        org: org.name,
        daemons,
        waiting,
    })
}
