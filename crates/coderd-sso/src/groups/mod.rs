//! Groups: users grouped per organization (Coder's `/organizations/{org}/groups` and
//! `/groups/{group}`), each organization's implicit Everyone group, templates' access lists for
//! users and groups (`/templates/{template}/acl`), and OIDC group sync (`sync`). The decisions
//! live here, as functions of the core and a subject; `routes` is the JSON front door. Access
//! lists are enforced by `authz` (see `authz::Object::template`); this module only edits them.

pub mod routes;
pub use coderd_core::sso_providers::group_sync as sync;

use std::collections::HashMap;

use codersdk::ValidationError;
use codersdk::groups::{
    ACLAvailable, CreateGroupRequest, Group, GroupSource, PatchGroupRequest, ReducedUser,
    TemplateACL, TemplateGroup, TemplateRole, TemplateUser, UpdateTemplateACL,
};
use codersdk::users::{LoginType, SlimRole, User, UserStatus};
use uuid::Uuid;

use codersdk::audit::{AuditAction, ResourceType};

use coderd_authz::{self as authz, AclRole, Action, Object, Resource, Subject};
use coderd_core::audit;
use coderd_core::domain::{Error, Result, resolve};
use coderd_core::state::AppState;
use coderd_store::{
    self as store, AclChange, GroupChanges, GroupMemberRow, GroupRow, NewGroup, UserRow,
};

pub use routes::routes;

pub use coderd_core::sso_providers::group_sync::EVERYONE;
/// Coder's limit (a UUID fits).
pub const GROUP_NAME_MAX: usize = 36;

fn group_object(org: Uuid) -> Object {
    Object::in_org(Resource::Group, org)
}

fn is_everyone(row: &GroupRow) -> bool {
    row.id == row.organization_id
}

/// Group names: letters, digits and single inner hyphens, at most 36 characters, never
/// `Everyone` (nor the route words `new` and `create`).
pub fn group_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > GROUP_NAME_MAX {
        return Err(format!("must be 1 to {GROUP_NAME_MAX} characters"));
    }
    if name.eq_ignore_ascii_case(EVERYONE) || name == "new" || name == "create" {
        return Err(format!("{name:?} is a reserved group name"));
    }
    let valid = name
        .split('-')
        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()));
    if valid {
        Ok(())
    } else {
        Err("may contain only letters, digits and single hyphens between them".into())
    }
}

fn invalid(field: &str, detail: impl Into<String>) -> Error {
    Error::Validation(vec![ValidationError {
        field: field.into(),
        detail: detail.into(),
    }])
}

fn reduced_user(row: &GroupMemberRow) -> ReducedUser {
    ReducedUser {
        id: row.id,
        username: row.username.clone(),
        name: row.name.clone(),
        email: row.email.clone(),
        created_at: row.created_at,
        updated_at: row.updated_at,
        last_seen_at: row.last_seen_at,
        status: row.status.parse().unwrap_or(UserStatus::Active),
        login_type: row.login_type.parse().unwrap_or(LoginType::Password),
        avatar_url: row.avatar_url.clone(),
        theme_preference: String::new(),
    }
}

/// Groups as the API shows them, with their members.
async fn render(state: &AppState, rows: Vec<GroupRow>) -> Result<Vec<Group>> {
    let ids: Vec<Uuid> = rows.iter().map(|g| g.id).collect();
    let mut members: HashMap<Uuid, Vec<ReducedUser>> = HashMap::new();
    for m in state.store.group_members(&ids).await? {
        members
            .entry(m.group_id)
            .or_default()
            .push(reduced_user(&m));
    }
    Ok(rows
        .into_iter()
        .map(|g| {
            let members = members.remove(&g.id).unwrap_or_default();
            Group {
                id: g.id,
                total_member_count: members.len() as i64,
                members,
                source: if g.source == "oidc" {
                    GroupSource::Oidc
                } else {
                    GroupSource::User
                },
                display_name: g.display_name,
                name: g.name,
                organization_id: g.organization_id,
                avatar_url: g.avatar_url,
                quota_allowance: g.quota_allowance,
                organization_name: g.organization_name,
                organization_display_name: g.organization_display_name,
            }
        })
        .collect())
}

async fn render_one(state: &AppState, row: GroupRow) -> Result<Group> {
    render(state, vec![row])
        .await?
        .pop()
        .ok_or_else(|| Error::internal("a rendered group went missing"))
}

/// The groups of an organization the subject may see.
pub async fn list(state: &AppState, subject: &Subject, org: &str) -> Result<Vec<Group>> {
    let org = resolve::organization(state, subject, org).await?;
    authz::authorize(subject, Action::Read, &group_object(org.id))?;
    render(state, state.store.groups_in_org(org.id).await?).await
}

/// A group by id, for `action`.
async fn find(state: &AppState, subject: &Subject, id: Uuid, action: Action) -> Result<GroupRow> {
    let row = state.store.group_by(Some(id), None).await?;
    authz::authorize(subject, action, &group_object(row.organization_id))?;
    Ok(row)
}

pub async fn get(state: &AppState, subject: &Subject, id: Uuid) -> Result<Group> {
    let row = find(state, subject, id, Action::Read).await?;
    render_one(state, row).await
}

pub async fn get_by_name(
    state: &AppState,
    subject: &Subject,
    org: &str,
    name: &str,
) -> Result<Group> {
    let org = resolve::organization(state, subject, org).await?;
    authz::authorize(subject, Action::Read, &group_object(org.id))?;
    let row = state.store.group_by(None, Some((org.id, name))).await?;
    render_one(state, row).await
}

fn check_fields(
    name: Option<&str>,
    display_name: Option<&str>,
    avatar_url: Option<&str>,
    quota: Option<i32>,
) -> Result<()> {
    let mut problems = Vec::new();
    let mut push = |field: &str, r: std::result::Result<(), String>| {
        if let Err(detail) = r {
            problems.push(ValidationError {
                field: field.into(),
                detail,
            });
        }
    };
    if let Some(name) = name {
        push("name", group_name(name));
    }
    if let Some(d) = display_name {
        push("display_name", coderd_core::validate::display_name(d));
    }
    if let Some(a) = avatar_url {
        push(
            "avatar_url",
            coderd_core::validate::line(a, coderd_core::validate::ICON_MAX),
        );
    }
    if quota.is_some_and(|q| q < 0) {
        push("quota_allowance", Err("must not be negative".into()));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Validation(problems))
    }
}

fn name_taken(e: store::Error) -> Error {
    match e {
        store::Error::Conflict { .. } => {
            Error::conflict("A group with this name already exists in this organization.")
        }
        other => other.into(),
    }
}

pub async fn create(
    state: &AppState,
    subject: &Subject,
    org: &str,
    req: &CreateGroupRequest,
) -> Result<Group> {
    let org = resolve::organization(state, subject, org).await?;
    authz::authorize(subject, Action::Create, &group_object(org.id))?;
    check_fields(
        Some(&req.name),
        Some(&req.display_name),
        Some(&req.avatar_url),
        Some(req.quota_allowance),
    )?;
    let group = NewGroup {
        id: Uuid::new_v4(),
        organization_id: org.id,
        name: req.name.clone(),
        display_name: req.display_name.clone(),
        avatar_url: req.avatar_url.clone(),
        quota_allowance: req.quota_allowance,
    };
    let log = group_entry(subject, group.id, &group.name, org.id, AuditAction::Create)
        .diff(None, Some(&group))
        .build();
    let row = state
        .store
        .create_group(&group, Some(&log))
        .await
        .map_err(name_taken)?;
    render_one(state, row).await
}

/// Parses user ids of a patch; each must be a member of the organization.
async fn member_ids(
    state: &AppState,
    org: Uuid,
    field: &str,
    ids: &[String],
    must_be_members: bool,
) -> Result<Vec<Uuid>> {
    let members: Vec<Uuid> = if must_be_members && !ids.is_empty() {
        state
            .store
            .organization_members(org)
            .await?
            .into_iter()
            .map(|m| m.user_id)
            .collect()
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(ids.len());
    for raw in ids {
        let id: Uuid = raw
            .parse()
            .map_err(|_| invalid(field, format!("{raw:?} is not a user id")))?;
        if must_be_members && !members.contains(&id) {
            return Err(invalid(
                field,
                format!("user {id} is not a member of the group's organization"),
            ));
        }
        out.push(id);
    }
    Ok(out)
}

pub async fn patch(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
    req: &PatchGroupRequest,
) -> Result<Group> {
    let row = find(state, subject, id, Action::Update).await?;
    let rename = (!req.name.is_empty() && req.name != row.name).then_some(req.name.as_str());
    if is_everyone(&row) {
        if !req.add_users.is_empty() || !req.remove_users.is_empty() {
            return Err(Error::bad_request(
                "Cannot add or remove users from the \"Everyone\" group.",
            )
            .with_detail("Its members are the organization's members."));
        }
        if rename.is_some() {
            return Err(Error::bad_request("Cannot rename the \"Everyone\" group."));
        }
    }
    check_fields(
        rename,
        req.display_name.as_deref(),
        req.avatar_url.as_deref(),
        req.quota_allowance,
    )?;
    let add_users = member_ids(
        state,
        row.organization_id,
        "add_users",
        &req.add_users,
        true,
    )
    .await?;
    let remove_users = member_ids(
        state,
        row.organization_id,
        "remove_users",
        &req.remove_users,
        false,
    )
    .await?;
    let changes = GroupChanges {
        name: rename.map(str::to_string),
        display_name: req.display_name.clone(),
        avatar_url: req.avatar_url.clone(),
        quota_allowance: req.quota_allowance,
        add_users,
        remove_users,
    };
    let after = GroupRow {
        name: changes.name.clone().unwrap_or_else(|| row.name.clone()),
        display_name: changes
            .display_name
            .clone()
            .unwrap_or_else(|| row.display_name.clone()),
        avatar_url: changes
            .avatar_url
            .clone()
            .unwrap_or_else(|| row.avatar_url.clone()),
        quota_allowance: changes.quota_allowance.unwrap_or(row.quota_allowance),
        ..row.clone()
    };
    let log = group_entry(
        subject,
        row.id,
        &after.name,
        row.organization_id,
        AuditAction::Write,
    )
    .diff(Some(&row), Some(&after))
    .field("add_users", serde_json::json!(changes.add_users))
    .field("remove_users", serde_json::json!(changes.remove_users))
    .build();
    let row = state
        .store
        .update_group(row.id, &changes, Some(&log))
        .await
        .map_err(name_taken)?;
    render_one(state, row).await
}

pub async fn delete(state: &AppState, subject: &Subject, id: Uuid) -> Result<()> {
    let row = find(state, subject, id, Action::Delete).await?;
    if is_everyone(&row) {
        return Err(Error::bad_request("Cannot delete the \"Everyone\" group."));
    }
    let log = group_entry(
        subject,
        row.id,
        &row.name,
        row.organization_id,
        AuditAction::Delete,
    )
    .diff(Some(&row), None)
    .build();
    state.store.delete_group(row.id, Some(&log)).await?;
    Ok(())
}

/// An audit entry about a group.
fn group_entry(
    subject: &Subject,
    id: Uuid,
    name: &str,
    org: Uuid,
    action: AuditAction,
) -> audit::Entry {
    audit::Entry::new(audit::actor(subject), ResourceType::Group, id, name, action).org(org)
}

/// An access list's changes as the audit log shows them: `{id: role or null}`.
fn acl_field(changes: &[AclChange]) -> serde_json::Value {
    changes
        .iter()
        .map(|(id, role)| (id.to_string(), serde_json::json!(role.map(|r| r.as_str()))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A template whose access list the subject may manage.
async fn managed_template(
    state: &AppState,
    subject: &Subject,
    template: Uuid,
) -> Result<(store::TemplateRow, authz::Acl)> {
    let row = resolve::template(state, subject, template).await?;
    let acl = state.store.template_acl(row.id).await?;
    authz::authorize(
        subject,
        Action::Update,
        &Object::template(row.organization_id, acl.clone()),
    )?;
    Ok((row, acl))
}

fn template_role(role: AclRole) -> TemplateRole {
    match role {
        AclRole::Use => TemplateRole::Use,
        AclRole::Admin => TemplateRole::Admin,
    }
}

fn full_user(row: UserRow, org: Uuid) -> User {
    let roles = row
        .rbac_roles
        .iter()
        .filter_map(|r| authz::site_role(r))
        .map(|r| SlimRole {
            name: r.name.into(),
            display_name: r.display_name.into(),
            organization_id: String::new(),
        })
        .collect();
    User {
        id: row.id,
        username: row.username,
        name: row.name,
        email: row.email,
        avatar_url: row.avatar_url,
        created_at: row.created_at,
        updated_at: row.updated_at,
        last_seen_at: row.last_seen_at,
        status: row.status.parse().unwrap_or(UserStatus::Active),
        login_type: row.login_type.parse().unwrap_or(LoginType::Password),
        organization_ids: vec![org],
        roles,
        theme_preference: String::new(),
        has_ai_seat: false,
    }
}

/// A template's access list, for those who may change the template.
pub async fn template_acl(
    state: &AppState,
    subject: &Subject,
    template: Uuid,
) -> Result<TemplateACL> {
    let (row, acl) = managed_template(state, subject, template).await?;
    let mut users = Vec::new();
    for (id, role) in &acl.users {
        match state.store.user_by_id(*id).await {
            Ok(user) if !user.deleted => users.push(TemplateUser {
                user: full_user(user, row.organization_id),
                role: template_role(*role),
            }),
            Ok(_) | Err(store::Error::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    users.sort_by(|a, b| a.user.username.cmp(&b.user.username));
    let all = state.store.groups_in_org(row.organization_id).await?;
    let roles: HashMap<Uuid, AclRole> = acl.groups.iter().copied().collect();
    let listed: Vec<GroupRow> = all
        .into_iter()
        .filter(|g| roles.contains_key(&g.id))
        .collect();
    let groups = render(state, listed)
        .await?
        .into_iter()
        .filter_map(|g| {
            let role = roles.get(&g.id).copied()?;
            Some(TemplateGroup {
                group: g,
                role: template_role(role),
            })
        })
        .collect();
    Ok(TemplateACL { users, groups })
}

/// Parses one side of an ACL update: ids that must name members (users) or groups of the
/// template's organization.
fn acl_changes(
    field: &str,
    perms: &std::collections::BTreeMap<String, TemplateRole>,
    known: &[Uuid],
    what: &str,
) -> Result<Vec<AclChange>> {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    for (raw, role) in perms {
        let Ok(id) = raw.parse::<Uuid>() else {
            problems.push(ValidationError {
                field: field.into(),
                detail: format!("{raw:?} is not a valid {what} id"),
            });
            continue;
        };
        let role = match role {
            TemplateRole::Use => Some(AclRole::Use),
            TemplateRole::Admin => Some(AclRole::Admin),
            TemplateRole::Deleted => None,
        };
        if role.is_some() && !known.contains(&id) {
            problems.push(ValidationError {
                field: field.into(),
                detail: format!("no {what} {id} in the template's organization"),
            });
            continue;
        }
        out.push((id, role));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(Error::Validation(problems))
    }
}

pub async fn update_template_acl(
    state: &AppState,
    subject: &Subject,
    template: Uuid,
    req: &UpdateTemplateACL,
) -> Result<()> {
    let (row, _) = managed_template(state, subject, template).await?;
    let members: Vec<Uuid> = state
        .store
        .organization_members(row.organization_id)
        .await?
        .into_iter()
        .map(|m| m.user_id)
        .collect();
    let groups: Vec<Uuid> = state
        .store
        .groups_in_org(row.organization_id)
        .await?
        .into_iter()
        .map(|g| g.id)
        .collect();
    let users = acl_changes("user_perms", &req.user_perms, &members, "user");
    let group_changes = acl_changes("group_perms", &req.group_perms, &groups, "group");
    let (users, group_changes) = match (users, group_changes) {
        (Ok(u), Ok(g)) => (u, g),
        (Err(Error::Validation(mut a)), Err(Error::Validation(b))) => {
            a.extend(b);
            return Err(Error::Validation(a));
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let log = audit::Entry::new(
        audit::actor(subject),
        ResourceType::Template,
        row.id,
        &row.name,
        AuditAction::Write,
    )
    .org(row.organization_id)
    .field("user_perms", acl_field(&users))
    .field("group_perms", acl_field(&group_changes))
    .build();
    state
        .store
        .update_template_acl(row.id, &users, &group_changes, Some(&log))
        .await?;
    Ok(())
}

/// Who may be added to a template's access list: its organization's members and groups.
pub async fn acl_available(
    state: &AppState,
    subject: &Subject,
    template: Uuid,
) -> Result<ACLAvailable> {
    let (row, _) = managed_template(state, subject, template).await?;
    let groups = render(state, state.store.groups_in_org(row.organization_id).await?).await?;
    let users = state
        .store
        .group_members(&[row.organization_id])
        .await?
        .iter()
        .map(reduced_user)
        .collect();
    Ok(ACLAvailable { users, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_follow_coders_rules() {
        for ok in ["devs", "a", "team-1", &"x".repeat(36)] {
            assert!(group_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Everyone",
            "everyone",
            "new",
            "create",
            "a--b",
            "-a",
            "a b",
            &"x".repeat(37),
        ] {
            assert!(group_name(bad).is_err(), "{bad}");
        }
    }
}
