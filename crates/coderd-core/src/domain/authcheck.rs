//! Coder's `POST /authcheck`: the dashboard asks, before it shows a control, whether the caller
//! may do something. Every check is answered by the same RBAC engine that guards the action
//! itself, over the same object (loaded when the check names one), so the two cannot disagree.

use std::collections::HashMap;

use codersdk::ValidationError;
use codersdk::deployment::{AuthorizationCheck, AuthorizationRequest};
use uuid::Uuid;

use super::{Error, Result, resolve};
use crate::state::AppState;
use coderd_authz::{Action, Object, Resource, Subject};
use coderd_store as store;

/// More checks than Coder's dashboard ever sends at once; bounds the work of one request.
const MAX_CHECKS: usize = 256;
/// Checks naming an object by id each load it; Coder allows this many per request.
const MAX_BY_ID: usize = 10;
/// The resources a check may name by id.
const BY_ID: &[&str] = &["workspace", "template", "user", "group"];

/// Coder's resource names for those this deployment guards. Names of resources it has no
/// objects of (licenses, workspace proxies, …) are valid and always answer false.
fn resource(name: &str) -> Option<Resource> {
    Some(match name {
        "user" => Resource::User,
        "api_key" => Resource::ApiKey,
        "organization" => Resource::Organization,
        "organization_member" => Resource::OrganizationMember,
        "assign_role" => Resource::AssignRole,
        "assign_org_role" => Resource::AssignOrgRole,
        "template" => Resource::Template,
        "file" => Resource::File,
        "workspace" | "workspace_dormant" | "prebuilt_workspace" => Resource::Workspace,
        "provisioner_daemon" => Resource::ProvisionerDaemon,
        "provisioner_jobs" => Resource::ProvisionerJob,
        "deployment_config" | "deployment_stats" | "debug_info" => Resource::DeploymentConfig,
        "audit_log" => Resource::AuditLog,
        "group" | "group_member" => Resource::Group,
        _ => return None,
    })
}

/// Coder's action names, as this engine's actions. `None` for actions it has no rule for.
fn action(name: &str, resource: Resource) -> Option<Action> {
    Some(match name {
        "create" => Action::Create,
        "read" => Action::Read,
        "update" => Action::Update,
        "delete" => Action::Delete,
        "read_personal" => Action::Read,
        "update_personal" => Action::UpdatePersonal,
        "use" => Action::Use,
        "ssh" | "application_connect" => Action::Connect,
        "view_insights" if resource == Resource::Template => Action::Update,
        "start" | "stop" if resource == Resource::Workspace => Action::Update,
        "assign" | "unassign"
            if matches!(resource, Resource::AssignRole | Resource::AssignOrgRole) =>
        {
            Action::Update
        }
        _ => return None,
    })
}

/// Every action name Coder's RBAC knows; anything else is a mistake in the request.
const ACTIONS: &[&str] = &[
    "application_connect",
    "assign",
    "create",
    "create_agent",
    "delete",
    "delete_agent",
    "read",
    "read_personal",
    "share",
    "ssh",
    "start",
    "stop",
    "unassign",
    "update",
    "update_agent",
    "update_personal",
    "use",
    "view_insights",
];

fn validate(name: &str, check: &AuthorizationCheck) -> Result<()> {
    let refuse = |field: &str, detail: String| {
        Err(Error::Validation(vec![ValidationError {
            field: format!("checks.{name}.{field}"),
            detail,
        }]))
    };
    if !ACTIONS.contains(&check.action.as_str()) {
        return refuse("action", format!("unknown action {:?}", check.action));
    }
    let o = &check.object;
    if o.resource_type.is_empty() {
        return refuse("object.resource_type", "is required".into());
    }
    if o.resource_id.as_deref().is_some_and(|id| !id.is_empty())
        && !BY_ID.contains(&o.resource_type.as_str())
    {
        return refuse(
            "object.resource_id",
            format!("{:?} objects cannot be named by id", o.resource_type),
        );
    }
    Ok(())
}

fn parse_id(field: String, value: &Option<String>) -> Result<Option<Uuid>> {
    match value.as_deref() {
        None | Some("") => Ok(None),
        Some(raw) => raw.parse().map(Some).map_err(|_| {
            Error::Validation(vec![ValidationError {
                field,
                detail: format!("{raw:?} is not a UUID"),
            }])
        }),
    }
}

/// Answers each named check.
pub async fn evaluate(
    state: &AppState,
    subject: &Subject,
    request: &AuthorizationRequest,
) -> Result<HashMap<String, bool>> {
    if request.checks.len() > MAX_CHECKS {
        return Err(Error::Validation(vec![ValidationError {
            field: "checks".into(),
            detail: format!("at most {MAX_CHECKS} checks per request"),
        }]));
    }
    let by_id = request
        .checks
        .values()
        .filter(|c| {
            c.object
                .resource_id
                .as_deref()
                .is_some_and(|id| !id.is_empty())
        })
        .count();
    if by_id > MAX_BY_ID {
        return Err(Error::Validation(vec![ValidationError {
            field: "checks".into(),
            detail: format!(
                "at most {MAX_BY_ID} checks may name an object by resource_id; found {by_id}"
            ),
        }]));
    }
    let mut answers = HashMap::with_capacity(request.checks.len());
    for (name, check) in &request.checks {
        validate(name, check)?;
        let allowed = allowed(state, subject, name, check).await?;
        answers.insert(name.clone(), allowed);
    }
    Ok(answers)
}

async fn allowed(
    state: &AppState,
    subject: &Subject,
    name: &str,
    check: &AuthorizationCheck,
) -> Result<bool> {
    let o = &check.object;
    let Some(resource) = resource(&o.resource_type) else {
        return Ok(false);
    };
    let Some(action) = action(&check.action, resource) else {
        return Ok(false);
    };
    let field = |f: &str| format!("checks.{name}.object.{f}");
    // `me` is the caller, as in Coder's paths.
    let owner = match o.owner_id.as_deref() {
        Some("me") => Some(subject.user_id),
        _ => parse_id(field("owner_id"), &o.owner_id)?,
    };
    let org = parse_id(field("organization_id"), &o.organization_id)?;
    if let Some(id) = parse_id(field("resource_id"), &o.resource_id)? {
        // The object's own organization and owner decide, not the ones the check gives; one
        // the caller cannot see (or that does not exist) is simply not allowed.
        return Ok(match named_object(state, resource, id).await? {
            Some(object) => subject.can(action, &object),
            None => false,
        });
    }
    if o.any_org == Some(true) {
        return Ok(subject
            .orgs
            .keys()
            .any(|org| subject.can(action, &object_of(resource, Some(*org), owner))));
    }
    Ok(subject.can(action, &object_of(resource, org, owner)))
}

fn object_of(resource: Resource, org: Option<Uuid>, owner: Option<Uuid>) -> Object {
    match (org, owner) {
        (org, Some(owner)) => Object::owned(resource, org, owner),
        (Some(org), None) => Object::in_org(resource, org),
        (None, None) => Object::site(resource),
    }
}

/// The object a check names by id, guarded as its own routes guard it; `None` when there is
/// no such object.
async fn named_object(state: &AppState, resource: Resource, id: Uuid) -> Result<Option<Object>> {
    let found = match resource {
        Resource::Workspace => state
            .store
            .workspace_by_id(id, false)
            .await
            .map(|w| resolve::workspace_object(&w)),
        Resource::Template => match state.store.template_by_id(id).await {
            Ok(t) => {
                return Ok(Some(
                    resolve::template_guard(state, t.id, t.organization_id).await?,
                ));
            }
            Err(e) => Err(e),
        },
        Resource::User => state.store.user_by_id(id).await.map(|u| Object::user(u.id)),
        Resource::Group => state
            .store
            .group_by(Some(id), None)
            .await
            .map(|g| Object::in_org(Resource::Group, g.organization_id)),
        _ => return Ok(None),
    };
    match found {
        Ok(object) => Ok(Some(object)),
        Err(store::Error::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
