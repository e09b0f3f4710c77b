//! Managing users: creating one, suspending or activating, deleting, changing site roles. The
//! JSON API's `/users…` handlers and the dashboard's `/deployment/users` share these rules
//! (who may do it, what one may not do to oneself, which roles one may grant). Field rules
//! (`validate::requests::create_user`) stay with each front door.

use codersdk::audit::{AuditAction, ResourceType};
use codersdk::users::{CreateUserRequest, LoginType, UserStatus};
use uuid::Uuid;

use super::{Error, Result};
use crate::audit::{Entry, actor};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{self as store, NewUser, UserDeletion, UserRow};

/// An entry for `action` by `subject` on the user `row`.
fn entry(subject: &Subject, row: &UserRow, action: AuditAction) -> Entry {
    Entry::new(
        actor(subject),
        ResourceType::User,
        row.id,
        &row.username,
        action,
    )
}

/// Creates a user (its fields already checked by `validate::requests::create_user`).
pub async fn create(
    state: &AppState,
    subject: &Subject,
    req: CreateUserRequest,
) -> Result<UserRow> {
    authz::authorize(subject, Action::Create, &Object::site(Resource::User))?;
    let login_type = req.login_type.unwrap_or(LoginType::Password);
    // An OIDC or GitHub user made in advance (signups closed) is linked on its first sign-in.
    if !matches!(
        login_type,
        LoginType::Password | LoginType::None | LoginType::Oidc | LoginType::Github
    ) {
        return Err(Error::bad_request("Unsupported login type.").with_detail(
            "users can be created with login_type \"password\", \"oidc\", \"github\" or \"none\"",
        ));
    }
    // `member` is implicit.
    let roles: Vec<String> = req.roles.into_iter().filter(|r| r != "member").collect();
    for role in &roles {
        if !subject.can_assign_site_role(role) {
            return Err(Error::forbidden(format!(
                "you may not assign the role {role:?}"
            )));
        }
    }
    let mut organization_ids = req.organization_ids.clone();
    organization_ids.extend(req.organization_id);
    if organization_ids.is_empty() {
        organization_ids.push(state.store.default_organization().await?.id);
    }
    for org in &organization_ids {
        let org = state
            .store
            .organization_by_id(*org)
            .await
            .map_err(|e| match e {
                store::Error::NotFound => Error::bad_request("Organization does not exist.")
                    .with_detail(format!("no organization {org}")),
                other => other.into(),
            })?;
        authz::authorize(
            subject,
            Action::Create,
            &Object::in_org(Resource::OrganizationMember, org.id),
        )?;
    }
    let hashed_password = if login_type == LoginType::Password {
        coderd_authz::auth::hash_password(req.password)
            .await
            .map_err(Error::internal)?
    } else {
        String::new()
    };
    let new = NewUser {
        id: Uuid::new_v4(),
        email: req.email,
        username: req.username,
        name: req.name,
        hashed_password,
        status: req
            .user_status
            .unwrap_or(UserStatus::Active)
            .as_str()
            .into(),
        rbac_roles: roles,
        login_type: login_type.as_str().into(),
        organization_ids,
    };
    let log = Entry::new(
        actor(subject),
        ResourceType::User,
        new.id,
        &new.username,
        AuditAction::Create,
    )
    .diff(None, Some(&new))
    .build();
    state
        .store
        .create_user(new, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { constraint } if constraint.contains("email") => {
                Error::conflict("A user with this email already exists.")
            }
            store::Error::Conflict { constraint } if constraint.contains("username") => {
                Error::conflict("A user with this username already exists.")
            }
            other => other.into(),
        })
}

/// Deletes a user (the row is kept, marked deleted). One who still owns workspaces is not
/// deleted: [`UserDeletion::OwnsWorkspaces`] says so, and each front door words it.
pub async fn delete(state: &AppState, subject: &Subject, row: &UserRow) -> Result<UserDeletion> {
    authz::authorize(subject, Action::Delete, &Object::user(row.id))?;
    if row.id == subject.user_id {
        return Err(Error::forbidden("You cannot delete yourself."));
    }
    let log = entry(subject, row, AuditAction::Delete)
        .diff(
            Some(row),
            Some(&UserRow {
                deleted: true,
                ..row.clone()
            }),
        )
        .build();
    Ok(state.store.delete_user(row.id, Some(&log)).await?)
}

/// Suspends or activates a user; a suspended user's keys stop working at once.
pub async fn set_status(
    state: &AppState,
    subject: &Subject,
    row: &UserRow,
    status: UserStatus,
) -> Result<UserRow> {
    authz::authorize(subject, Action::Update, &Object::user(row.id))?;
    if status == UserStatus::Suspended && row.id == subject.user_id {
        return Err(Error::bad_request("You cannot suspend yourself."));
    }
    let log = entry(subject, row, AuditAction::Write)
        .diff(
            Some(row),
            Some(&UserRow {
                status: status.as_str().into(),
                ..row.clone()
            }),
        )
        .build();
    let row = state
        .store
        .update_user_status(row.id, status.as_str(), Some(&log))
        .await?;
    tracing::info!(user = %row.username, status = status.as_str(), "user status changed");
    Ok(row)
}

/// Replaces a user's site roles (`member` is implicit); the subject must be allowed to grant
/// or remove each role that changes.
pub async fn set_roles(
    state: &AppState,
    subject: &Subject,
    row: &UserRow,
    roles: Vec<String>,
) -> Result<UserRow> {
    authz::authorize(subject, Action::Update, &Object::site(Resource::AssignRole))?;
    if row.id == subject.user_id {
        return Err(Error::bad_request("You cannot change your own roles."));
    }
    let mut wanted: Vec<String> = roles.into_iter().filter(|r| r != "member").collect();
    wanted.sort();
    wanted.dedup();
    let unknown: Vec<codersdk::ValidationError> = wanted
        .iter()
        .filter(|role| authz::site_role(role).is_none())
        .map(|role| codersdk::ValidationError {
            field: "roles".into(),
            detail: format!("{role:?} is not a site role"),
        })
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Validation(unknown));
    }
    let changed = wanted
        .iter()
        .filter(|r| !row.rbac_roles.contains(r))
        .chain(row.rbac_roles.iter().filter(|r| !wanted.contains(r)));
    for role in changed {
        if !subject.can_assign_site_role(role) {
            return Err(Error::forbidden(format!(
                "You may not assign or remove the role {role:?}."
            )));
        }
    }
    let log = entry(subject, row, AuditAction::Write)
        .diff(
            Some(row),
            Some(&UserRow {
                rbac_roles: wanted.clone(),
                ..row.clone()
            }),
        )
        .build();
    Ok(state
        .store
        .update_user_roles(row.id, &wanted, Some(&log))
        .await?)
}
