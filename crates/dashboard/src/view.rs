//! What pages show: the askama templates' data, and the small presentational decisions shared by
//! pages and live fragments (a status's words and mark), so a badge sent over the live socket is
//! the same markup the page rendered.

use askama::Template;
use axum::response::Html;
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::{Workspace, WorkspaceAgent, WorkspaceApp, WorkspaceStatus};

use crate::session::Viewer;

/// Renders a template to an HTML response body.
pub fn html(page: &impl Template) -> Result<Html<String>, askama::Error> {
    page.render().map(Html)
}

/// What every page's frame needs: who is signed in, their form token, the asset URLs.
pub struct Chrome {
    pub user: Option<String>,
    /// Whether to link the provisioners page (only those who may read daemons).
    pub provisioners: bool,
    /// Whether to link the health report and the deployment overview (only those who may read
    /// the deployment's config).
    pub health: bool,
    pub csrf: String,
    pub css: String,
    pub htmx: String,
    pub live: String,
}

impl Chrome {
    pub fn anonymous() -> Self {
        Self {
            user: None,
            provisioners: false,
            health: false,
            csrf: String::new(),
            css: crate::assets::url("dashboard.css"),
            htmx: crate::assets::url("htmx-2.0.11.min.js"),
            live: crate::assets::url("live.js"),
        }
    }

    pub fn of(viewer: &Viewer) -> Self {
        let daemons = viewer
            .subject()
            .filter(coderd_authz::Resource::ProvisionerDaemon);
        Self {
            user: Some(viewer.username().to_owned()),
            provisioners: daemons.all || !daemons.orgs.is_empty(),
            health: viewer.subject().can(
                coderd_authz::Action::Read,
                &coderd_authz::Object::site(coderd_authz::Resource::DeploymentConfig),
            ),
            csrf: viewer.csrf.clone(),
            ..Self::anonymous()
        }
    }
}

/// A status as words (never colour alone) with a CSS class for its colour.
#[derive(Debug, Clone)]
pub struct Status {
    pub label: String,
    pub class: &'static str,
    /// Why it waits (queue position, no matching provisioner), if it does.
    pub detail: String,
}

impl Status {
    pub fn of(ws: &Workspace) -> Self {
        let build = &ws.latest_build;
        let status = build.status;
        let class = match status {
            WorkspaceStatus::Running => "ok",
            WorkspaceStatus::Failed => "bad",
            WorkspaceStatus::Stopped | WorkspaceStatus::Deleted | WorkspaceStatus::Canceled => {
                "off"
            }
            _ => "busy",
        };
        let mut detail = String::new();
        if build.job.status == ProvisionerJobStatus::Pending {
            let tags = tags_text(&build.job.tags);
            detail = match build.matched_provisioners.as_ref() {
                Some(m) if m.count == 0 => format!("No provisioner matches these tags: {tags}"),
                Some(m) if m.available == 0 => {
                    format!(
                        "{} these tags ({tags}), none is online",
                        daemons_match(m.count)
                    )
                }
                _ if build.job.queue_position > 0 => {
                    format!("Position in queue: {}", build.job.queue_position)
                }
                _ => String::new(),
            };
        } else if status == WorkspaceStatus::Failed && !build.job.error.is_empty() {
            detail = build.job.error.clone();
        }
        Self {
            label: capitalized(status.as_str()),
            class,
            detail,
        }
    }
}

pub fn tags_text(tags: &std::collections::BTreeMap<String, String>) -> String {
    tags.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "1 provisioner matches" / "3 provisioners match": the start of why a job waits.
pub fn daemons_match(count: i64) -> String {
    if count == 1 {
        "1 provisioner matches".to_owned()
    } else {
        format!("{count} provisioners match")
    }
}

pub fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The actions a workspace offers in its status, as Coder's dashboard does.
#[derive(Debug, Clone, Default)]
pub struct Actions {
    pub start: bool,
    pub stop: bool,
    pub restart: bool,
    pub cancel: bool,
    pub delete: bool,
    pub retry: bool,
}

impl Actions {
    pub fn of(ws: &Workspace) -> Self {
        use WorkspaceStatus as S;
        match ws.latest_build.status {
            S::Running => Self {
                stop: true,
                restart: true,
                delete: true,
                ..Self::default()
            },
            S::Stopped | S::Canceled => Self {
                start: true,
                delete: true,
                ..Self::default()
            },
            S::Failed => Self {
                retry: true,
                delete: true,
                ..Self::default()
            },
            S::Pending | S::Starting | S::Stopping | S::Deleting => Self {
                cancel: ws.template_allow_user_cancel_workspace_jobs,
                ..Self::default()
            },
            S::Canceling | S::Deleted => Self::default(),
        }
    }
}

/// The live region of a workspace's page: status, actions, agents (re-sent whole on change).
#[derive(Template)]
#[template(path = "workspace_live.html")]
pub struct WorkspaceLive<'a> {
    pub ws: &'a Workspace,
    pub status: Status,
    pub actions: Actions,
    pub csrf: &'a str,
    pub base: String,
}

impl<'a> WorkspaceLive<'a> {
    pub fn new(ws: &'a Workspace, csrf: &'a str) -> Self {
        Self {
            status: Status::of(ws),
            actions: Actions::of(ws),
            base: format!("/@{}/{}", ws.owner_name, ws.name),
            ws,
            csrf,
        }
    }
}

impl WorkspaceLive<'_> {
    /// Where an app's link goes (empty: no link), as Coder's dashboard decides.
    pub fn app_href(&self, agent: &WorkspaceAgent, app: &WorkspaceApp) -> String {
        let agent_base = format!("{}.{}", self.base, agent.name);
        app_link(
            &agent_base,
            &app.slug,
            app.url.as_deref(),
            app.external,
            app.command.as_deref(),
        )
    }
}

/// An external app opens its own URL (any scheme, as editors register theirs, but never one
/// that runs script); a command app opens the terminal running its command; every other app
/// goes through coderd's path-based proxy.
fn app_link(
    agent_base: &str,
    slug: &str,
    url: Option<&str>,
    external: bool,
    command: Option<&str>,
) -> String {
    let url = url.unwrap_or("").trim();
    if external {
        let scheme = url
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        let scripted = ["javascript", "data", "vbscript"].contains(&scheme.as_str());
        return if scripted || scheme.is_empty() {
            String::new()
        } else {
            url.to_owned()
        };
    }
    match command.filter(|c| !c.is_empty()) {
        Some(command) if url.is_empty() => {
            let query = serde_urlencoded::to_string([("command", command)]).unwrap_or_default();
            format!("{agent_base}/terminal?{query}")
        }
        _ => format!("{agent_base}/apps/{slug}/"),
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub chrome: Chrome,
    pub title: String,
    pub message: String,
    pub status: u16,
}

#[cfg(test)]
mod tests {
    use super::app_link;

    #[test]
    fn app_links_follow_the_kind_of_app() {
        let base = "/@alice/dev.main";
        assert_eq!(
            app_link(base, "code", Some("http://localhost:8080"), false, None),
            "/@alice/dev.main/apps/code/"
        );
        assert_eq!(
            app_link(base, "top", None, false, Some("htop -d 5")),
            "/@alice/dev.main/terminal?command=htop+-d+5"
        );
        assert_eq!(
            app_link(base, "x", Some("vscode://open"), true, None),
            "vscode://open"
        );
        for bad in [
            "javascript:alert(1)",
            " JavaScript:alert(1)",
            "data:text/html,x",
            "",
        ] {
            assert_eq!(app_link(base, "x", Some(bad), true, None), "", "{bad}");
        }
    }
}
