//! Who may open which app: an app (or a port) named by user, workspace, agent and name is
//! resolved against the workspace's latest build, its sharing level applied, and the agent's
//! connection checked. The rows are read without RBAC filtering because sharing levels reach
//! beyond it (a public app is open to people who may not see the workspace); what a caller
//! may not open is answered exactly as what does not exist.

use uuid::Uuid;

pub use super::cors::Cors;
use super::host::AppName;
use super::pages::AppError;
use coderd_authz::Action;
use coderd_core::domain::{self, session::Session};
use coderd_core::state::AppState;
use coderd_store as store;

/// What an app request names, however its URL spelled it.
#[derive(Debug, Clone)]
pub struct AppRef {
    pub user: String,
    pub workspace: String,
    pub agent: Option<String>,
    pub app: AppName,
    /// A path app (on the dashboard's origin): owner-only unless the operator opted in.
    pub path_based: bool,
}

/// Where an authorised request goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub workspace_id: Uuid,
    pub agent_id: Uuid,
    /// On the agent's loopback.
    pub port: u16,
    /// The app URL's path, which the request's path is appended to.
    pub base_path: String,
    /// The app speaks https (see [`super::tls`]).
    pub tls: bool,
    /// The template's `cors_behavior`.
    pub cors: Cors,
}

/// Sharing levels, from the narrowest (an organization is narrower than every signed-in user).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sharing {
    Owner,
    Organization,
    Authenticated,
    Public,
}

impl Sharing {
    pub fn parse(s: &str) -> Self {
        match s {
            "public" => Self::Public,
            "authenticated" => Self::Authenticated,
            "organization" => Self::Organization,
            // Unknown levels are the narrowest, never the widest.
            _ => Self::Owner,
        }
    }
}

fn internal(e: impl std::fmt::Display) -> AppError {
    tracing::error!(error = %e, "resolving a workspace app");
    AppError::Internal
}

/// The `cors_behavior` of the template of `user`'s `workspace` (`simple` when there is no
/// such workspace: the stricter answer, and the same one whether or not it exists).
pub async fn cors_of(state: &AppState, user: &str, workspace: &str) -> Cors {
    let Ok(owner) = state.store.user_by_username(user).await else {
        return Cors::Simple;
    };
    let Ok(workspace) = state
        .store
        .workspace_by_owner_and_name(owner.id, workspace)
        .await
    else {
        return Cors::Simple;
    };
    match state.store.template_by_id(workspace.template_id).await {
        Ok(template) => Cors::parse(&template.cors_behavior),
        Err(_) => Cors::Simple,
    }
}

/// Resolves and authorises `app` for `session` (`None`: anonymous).
pub async fn resolve(
    state: &AppState,
    session: Option<&Session>,
    app: &AppRef,
    start_link: impl FnOnce() -> String,
) -> Result<Target, AppError> {
    // What a caller who may not see the app gets: a login when anonymous, else not found.
    let hidden = || match session {
        Some(_) => AppError::NotFound,
        None => AppError::LoginRequired {
            redirect: String::new(),
        },
    };
    let hide = |e: store::Error| match e {
        store::Error::NotFound => hidden(),
        e => internal(e),
    };
    let owner = state
        .store
        .user_by_username(&app.user)
        .await
        .map_err(hide)?;
    let workspace = state
        .store
        .workspace_by_owner_and_name(owner.id, &app.workspace)
        .await
        .map_err(hide)?;
    let may_read = session.is_some_and(|s| {
        s.subject
            .can(Action::Read, &domain::resolve::workspace_object(&workspace))
    });
    let build = state
        .store
        .latest_builds(&[workspace.id])
        .await
        .map_err(internal)?
        .pop()
        .ok_or_else(hidden)?;
    if build.transition != "start" {
        // A stopped workspace has no agents to find the app's sharing level on: only those
        // who may see the workspace learn that it is stopped.
        return Err(if may_read {
            AppError::WorkspaceStopped {
                start_link: start_link(),
            }
        } else {
            hidden()
        });
    }
    let trees = state
        .store
        .resources_of_jobs(&[build.job_id])
        .await
        .map_err(internal)?;
    let mut agents = trees.into_iter().flat_map(|t| t.agents);
    let tree = match &app.agent {
        Some(name) => agents.find(|a| a.agent.name.eq_ignore_ascii_case(name)),
        None => {
            let first = agents.next();
            match (first, agents.next()) {
                (Some(only), None) => Some(only),
                (Some(_), Some(_)) if may_read => {
                    return Err(AppError::unavailable(
                        "The workspace has several agents.",
                        "Name the agent in the URL: /@<user>/<workspace>.<agent>/apps/<app>/",
                    ));
                }
                _ => None,
            }
        }
    }
    .ok_or_else(hidden)?;

    let template = state
        .store
        .template_by_id(workspace.template_id)
        .await
        .map_err(internal)?;
    let (sharing, port, base_path, tls) = match &app.app {
        AppName::Port { port, https } => {
            // A port is the owner's unless shared, and never beyond the template's maximum
            // (read now, so lowering it narrows existing shares at once).
            let share = state
                .store
                .port_share(workspace.id, &tree.agent.name, i32::from(*port))
                .await
                .map_err(internal)?;
            let sharing = match share {
                Some(share) => Sharing::parse(&share.share_level)
                    .min(Sharing::parse(&template.max_port_share_level)),
                None => Sharing::Owner,
            };
            (sharing, *port, "/".to_string(), *https)
        }
        AppName::Slug(slug) => {
            let row = tree
                .apps
                .iter()
                .find(|a| &a.slug == slug)
                .ok_or_else(hidden)?;
            let sharing = Sharing::parse(&row.sharing_level);
            let upstream = match (&row.url, row.external) {
                // Subdomain apps expect an origin of their own (absolute links, cookies).
                (Some(_), false) if row.subdomain && app.path_based => {
                    Err(subdomain_only(state, &row.slug, &tree.agent.name, app))
                }
                (Some(url), false) => upstream(url),
                _ => Err(AppError::unavailable(
                    "This application is not served through Coder.",
                    "It is an external or command application; open it from the dashboard.",
                )),
            };
            match upstream {
                Ok(Upstream { port, base, tls }) => (sharing, port, base, tls),
                // Details are for those who may open the app.
                Err(e) => {
                    authorize(state, session, &workspace, tree.agent.id, sharing, app).await?;
                    return Err(e);
                }
            }
        }
    };
    authorize(state, session, &workspace, tree.agent.id, sharing, app).await?;
    if state.agents.connection(tree.agent.id).is_none() {
        return Err(AppError::AgentNotConnected {
            status: domain::render::agent_status(&tree.agent).to_string(),
        });
    }
    Ok(Target {
        workspace_id: workspace.id,
        agent_id: tree.agent.id,
        port,
        base_path,
        tls,
        cors: Cors::parse(&template.cors_behavior),
    })
}

fn subdomain_only(state: &AppState, slug: &str, agent: &str, app: &AppRef) -> AppError {
    let settings = &state.options.apps;
    let host =
        coderd_core::app_urls::subdomain_name(settings, slug, agent, &app.workspace, &app.user);
    match (&settings.wildcard, host) {
        (Some(wildcard), Some(label)) => AppError::unavailable(
            "This application is served on its own subdomain.",
            format!("Open {}/", wildcard.origin(&label)),
        ),
        _ => AppError::unavailable(
            "This application is unavailable: it is a subdomain app.",
            "The deployment has no wildcard access URL (--wildcard-access-url), so subdomain \
             apps cannot be served.",
        ),
    }
}

/// Where on the agent's loopback an app's URL points.
#[derive(Debug, PartialEq, Eq)]
struct Upstream {
    port: u16,
    base: String,
    tls: bool,
}

/// The port, path and protocol of an app's URL; only the agent's loopback is reachable.
fn upstream(url: &str) -> Result<Upstream, AppError> {
    let parsed = url::Url::parse(url).map_err(|_| {
        AppError::unavailable("The application's URL is invalid.", format!("{url:?}"))
    })?;
    let tls = match parsed.scheme() {
        "http" => false,
        "https" => true,
        other => {
            return Err(AppError::unavailable(
                "The application's URL has an unsupported scheme.",
                other.to_string(),
            ));
        }
    };
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    };
    if !loopback {
        return Err(AppError::unavailable(
            "The application's host is not reachable through the agent.",
            "Apps are proxied to the workspace's loopback (localhost/127.0.0.1).",
        ));
    }
    let port = parsed
        .port_or_known_default()
        .unwrap_or(if tls { 443 } else { 80 });
    Ok(Upstream {
        port,
        base: parsed.path().to_string(),
        tls,
    })
}

/// Applies `sharing` (path apps are forced to owner unless the operator allowed sharing).
async fn authorize(
    state: &AppState,
    session: Option<&Session>,
    workspace: &store::WorkspaceRow,
    agent: Uuid,
    sharing: Sharing,
    app: &AppRef,
) -> Result<(), AppError> {
    let settings = &state.options.apps;
    let sharing = if app.path_based && !settings.allow_path_app_sharing {
        Sharing::Owner
    } else {
        sharing
    };
    if sharing == Sharing::Public {
        return Ok(());
    }
    let Some(session) = session else {
        return Err(AppError::LoginRequired {
            redirect: String::new(),
        });
    };
    match sharing {
        Sharing::Authenticated => return Ok(()),
        Sharing::Organization
            if session
                .subject
                .orgs
                .contains_key(&workspace.organization_id) =>
        {
            return Ok(());
        }
        _ => {}
    }
    // Owner level: the owner, and those RBAC lets connect (site owners), except that on the
    // dashboard's origin only the owner unless the operator allowed site owners too.
    if app.path_based
        && session.subject.user_id != workspace.owner_id
        && !settings.allow_path_app_site_owner_access
    {
        return Err(AppError::NotFound);
    }
    match domain::resolve::agent(state, &session.subject, agent, Action::Connect).await {
        Ok(_) => Ok(()),
        Err(domain::Error::Internal(e)) => Err(internal(e)),
        Err(_) => Err(AppError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_on_the_loopback_are_proxied() {
        let up = |port, base: &str, tls| {
            Some(Upstream {
                port,
                base: base.into(),
                tls,
            })
        };
        assert_eq!(
            upstream("http://localhost:8080/x/").ok(),
            up(8080, "/x/", false)
        );
        assert_eq!(upstream("http://127.0.0.1").ok(), up(80, "/", false));
        assert_eq!(
            upstream("https://localhost:8443/").ok(),
            up(8443, "/", true)
        );
        assert_eq!(upstream("https://[::1]").ok(), up(443, "/", true));
        assert!(upstream("http://example.com:80").is_err());
        assert!(upstream("https://example.com").is_err());
        assert!(upstream("file:///etc/passwd").is_err());
        assert_eq!(Sharing::parse("bogus"), Sharing::Owner);
    }
}
