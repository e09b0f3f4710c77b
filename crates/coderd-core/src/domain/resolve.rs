//! Finding objects for a subject: each function returns the object only when the subject may
//! do the asked thing to it, and [`Error::NotFound`] both when it does not exist and when the
//! subject may not see it, so existence never leaks. Front doors resolve what their paths name
//! here (the API's `{user}`/`{workspace}`, the dashboard's `/@{user}/{workspace}`, the relay's
//! and the app proxy's agent) and act on the rows they get back.

use uuid::Uuid;

use super::{Error, Result};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{
    self as store, BuildRow, OrganizationRow, TemplateRow, TemplateVersionRow, UserRow,
    WorkspaceRow,
};

/// How a workspace is guarded: by its organization and owner.
pub fn workspace_object(row: &WorkspaceRow) -> Object {
    Object::owned(Resource::Workspace, Some(row.organization_id), row.owner_id)
}

fn template_object(org: Uuid) -> Object {
    Object::in_org(Resource::Template, org)
}

/// How a template is guarded: by its organization's roles and its access list.
pub async fn template_guard(state: &AppState, id: Uuid, org: Uuid) -> Result<Object> {
    Ok(Object::template(org, state.store.template_acl(id).await?))
}

/// A user named as front doors name them: `me`, an id, or a username.
pub async fn user(state: &AppState, subject: &Subject, param: &str) -> Result<UserRow> {
    let user = if param == "me" {
        state.store.user_by_id(subject.user_id).await?
    } else if let Ok(id) = param.parse::<Uuid>() {
        state.store.user_by_id(id).await?
    } else {
        state.store.user_by_username(param).await?
    };
    authz::authorize(subject, Action::Read, &Object::user(user.id))?;
    Ok(user)
}

/// An organization named by id or name, or `default` for the default organization (unless one
/// is named so), as Coder's API does. No authorisation: see [`organization`].
pub async fn find_organization(state: &AppState, param: &str) -> Result<OrganizationRow> {
    let found = if let Ok(id) = param.parse::<Uuid>() {
        state.store.organization_by_id(id).await
    } else {
        state.store.organization_by_name(param).await
    };
    match found {
        Ok(org) => Ok(org),
        Err(store::Error::NotFound) if param == "default" => {
            Ok(state.store.default_organization().await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// An organization the subject may see.
pub async fn organization(
    state: &AppState,
    subject: &Subject,
    param: &str,
) -> Result<OrganizationRow> {
    let org = find_organization(state, param).await?;
    authz::authorize(
        subject,
        Action::Read,
        &Object::in_org(Resource::Organization, org.id),
    )?;
    Ok(org)
}

/// A workspace by id, for `action` (deleted ones only when asked for).
pub async fn workspace(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
    action: Action,
    include_deleted: bool,
) -> Result<WorkspaceRow> {
    let row = state.store.workspace_by_id(id, include_deleted).await?;
    authz::authorize(subject, action, &workspace_object(&row))?;
    Ok(row)
}

/// Whether `subject` may change `workspace`'s settings (its schedule, name, policies).
pub fn authorize_update(subject: &Subject, workspace: &WorkspaceRow) -> Result<()> {
    authz::authorize(
        subject,
        Action::Update,
        &Object::owned(
            Resource::Workspace,
            Some(workspace.organization_id),
            workspace.owner_id,
        ),
    )?;
    Ok(())
}

/// A workspace by its owner (`me`, an id or a username) and name, for `action`.
pub async fn workspace_by_name(
    state: &AppState,
    subject: &Subject,
    owner: &str,
    name: &str,
    action: Action,
) -> Result<WorkspaceRow> {
    let owner = user(state, subject, owner).await?;
    let row = state
        .store
        .workspace_by_owner_and_name(owner.id, name)
        .await?;
    authz::authorize(subject, action, &workspace_object(&row))?;
    Ok(row)
}

/// A build by id with its workspace (deleted ones too: their history stays readable), when
/// the subject may read the workspace.
pub async fn build(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
) -> Result<(BuildRow, WorkspaceRow)> {
    let build = state.store.build_by_id(id).await?;
    let workspace = workspace(state, subject, build.workspace_id, Action::Read, true).await?;
    Ok((build, workspace))
}

/// A build by number of a workspace named by owner and name.
pub async fn build_by_number(
    state: &AppState,
    subject: &Subject,
    owner: &str,
    name: &str,
    number: i32,
) -> Result<(BuildRow, WorkspaceRow)> {
    let workspace = workspace_by_name(state, subject, owner, name, Action::Read).await?;
    let build = state
        .store
        .builds_of(workspace.id, i64::MAX, 0)
        .await?
        .into_iter()
        .find(|b| b.build_number == number)
        .ok_or(Error::NotFound)?;
    Ok((build, workspace))
}

/// A template by id the subject may read.
pub async fn template(state: &AppState, subject: &Subject, id: Uuid) -> Result<TemplateRow> {
    let (row, acl) = state.store.template_with_acl(id).await?;
    authz::authorize(
        subject,
        Action::Read,
        &Object::template(row.organization_id, acl),
    )?;
    Ok(row)
}

/// A template by organization and name the subject may read.
pub async fn template_by_name(
    state: &AppState,
    subject: &Subject,
    org: Uuid,
    name: &str,
) -> Result<TemplateRow> {
    let row = state.store.template_by_name(org, name).await?;
    let object = template_guard(state, row.id, row.organization_id).await?;
    authz::authorize(subject, Action::Read, &object)?;
    Ok(row)
}

/// A template version the subject may see: through its template, or — not yet attached to one
/// — as its creator or one who may create templates in its organization.
pub async fn version(state: &AppState, subject: &Subject, id: Uuid) -> Result<TemplateVersionRow> {
    let row = state.store.template_version_by_id(id).await?;
    let object = template_object(row.organization_id);
    let visible = if let Some(template) = row.template_id {
        let guarded = template_guard(state, template, row.organization_id).await?;
        subject.can(Action::Read, &guarded)
    } else {
        row.created_by == subject.user_id || subject.can(Action::Create, &object)
    };
    if visible {
        Ok(row)
    } else {
        Err(Error::NotFound)
    }
}

/// An agent and the workspace it runs in, resolved for one action on that workspace.
#[derive(Debug, Clone)]
pub struct AgentTarget {
    pub agent_id: Uuid,
    pub workspace: WorkspaceRow,
    /// Whether the agent belongs to its workspace's latest build (only those are reachable).
    pub current: bool,
}

/// An agent for `action` on its workspace: [`Action::Read`] to show it, [`Action::Connect`] to
/// open a connection into it (ssh, port-forward, a terminal, an app). Connections are refused
/// to anyone but the owner when the deployment disables owner access to others' workspaces
/// ([`Error::Forbidden`]), and to agents of a deleted workspace or an older build
/// ([`Error::BadRequest`]): their workspace has moved on.
pub async fn agent(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
    action: Action,
) -> Result<AgentTarget> {
    let context = state.store.agent_context(id).await?;
    // Deleted workspaces stay readable (their history), never connectable.
    let workspace = workspace(
        state,
        subject,
        context.workspace_id,
        action,
        action == Action::Read,
    )
    .await?;
    if action == Action::Connect
        && state.options.disable_owner_workspace_access
        && workspace.owner_id != subject.user_id
    {
        return Err(Error::forbidden(
            "This deployment does not let anyone but a workspace's owner connect to it \
             (--disable-owner-workspace-access).",
        ));
    }
    let current = context.build_number == context.latest_build_number;
    if action == Action::Connect && !current {
        return Err(
            Error::bad_request("The agent belongs to an old build of its workspace.").with_detail(
                format!(
                    "it is of build {}; the workspace's latest build is {}",
                    context.build_number, context.latest_build_number
                ),
            ),
        );
    }
    Ok(AgentTarget {
        agent_id: id,
        workspace,
        current,
    })
}
