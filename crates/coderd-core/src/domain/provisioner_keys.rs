//! Provisioner keys: named, organization-scoped secrets external daemons authenticate with.
//! The JSON API's `/organizations/{org}/provisionerkeys` and the dashboard's
//! `/organizations/{org}/provisioner-keys` list, create and delete them here.

use base64::Engine as _;
use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::provisionerd::{SCOPE_USER, TAG_SCOPE, Tags};
use codersdk::provisioners::ProvisionerKey;
use uuid::Uuid;

use super::{Error, Result};
use crate::audit::{Entry, actor};
use crate::provisioners::tags;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::{self as store, KeyRow, OrganizationRow};

/// Names the server gives its own kinds of daemon authentication.
const RESERVED: &[&str] = &["built-in", "user-auth", "psk"];

/// A key as front doors show it: never its secret.
pub fn render(row: KeyRow) -> ProvisionerKey {
    ProvisionerKey {
        id: row.id,
        created_at: row.created_at,
        organization: row.organization_id,
        name: row.name,
        tags: serde_json::from_value(row.tags).unwrap_or_default(),
    }
}

fn keys_of(org: &OrganizationRow) -> Object {
    Object::in_org(Resource::ProvisionerKey, org.id)
}

/// Coder answers 403, not 404, to a member asking for the organization's keys.
fn authorize(subject: &Subject, action: Action, org: &OrganizationRow) -> Result<()> {
    authz::authorize(subject, action, &keys_of(org)).map_err(|_| Error::forbidden(""))
}

fn entry(subject: &Subject, key: &KeyRow, action: AuditAction) -> Entry {
    Entry::new(
        actor(subject),
        ResourceType::ProvisionerKey,
        key.id,
        &key.name,
        action,
    )
    .org(key.organization_id)
}

/// The organization's keys.
pub async fn list(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
) -> Result<Vec<ProvisionerKey>> {
    authorize(subject, Action::Read, org)?;
    let rows = state.store.provisioner_keys(org.id).await?;
    Ok(rows.into_iter().map(render).collect())
}

/// Why a new key's name or tags are refused, per field.
fn check(name: &str, key_tags: &Tags) -> Vec<ValidationError> {
    let mut problems = Vec::new();
    let mut refuse = |field: &str, detail: String| {
        problems.push(ValidationError {
            field: field.into(),
            detail,
        })
    };
    if let Err(detail) = crate::validate::daemon_name(name) {
        refuse("name", detail);
    } else if RESERVED.contains(&name) {
        refuse("name", "is reserved".into());
    }
    if let Err(e) = tags::validate(key_tags) {
        refuse("tags", e.to_string());
    } else if key_tags.get(TAG_SCOPE).map(String::as_str) == Some(SCOPE_USER) {
        refuse(
            "tags",
            "provisioner keys are organization-scoped; scope=user is not allowed".into(),
        );
    }
    problems
}

/// Creates a key; returns the secret, shown once and stored only as a hash.
pub async fn create(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
    name: &str,
    key_tags: Tags,
) -> Result<String> {
    authz::authorize(subject, Action::Create, &keys_of(org))?;
    let problems = check(name, &key_tags);
    if !problems.is_empty() {
        return Err(Error::Validation(problems));
    }
    let secret = {
        let mut bytes = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut bytes);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    };
    let new = KeyRow {
        id: Uuid::new_v4(),
        organization_id: org.id,
        name: name.to_owned(),
        hashed_secret: coderd_authz::auth::hash_secret(&secret),
        tags: serde_json::to_value(tags::normalize(key_tags, None)).unwrap_or_default(),
        created_at: chrono::Utc::now(),
    };
    let log = entry(subject, &new, AuditAction::Create)
        .diff(None, Some(&new))
        .build();
    state
        .store
        .insert_provisioner_key(&new, Some(&log))
        .await
        .map_err(|e| match e {
            store::Error::Conflict { .. } => {
                Error::conflict(format!("A provisioner key named {name:?} already exists."))
            }
            other => other.into(),
        })?;
    Ok(secret)
}

/// Deletes the key named `name` (case-insensitively); daemons using it can no longer connect.
pub async fn delete(
    state: &AppState,
    subject: &Subject,
    org: &OrganizationRow,
    name: &str,
) -> Result<()> {
    authorize(subject, Action::Delete, org)?;
    let row = state
        .store
        .provisioner_keys(org.id)
        .await?
        .into_iter()
        .find(|k| k.name.eq_ignore_ascii_case(name))
        .ok_or(Error::NotFound)?;
    let log = entry(subject, &row, AuditAction::Delete)
        .diff(Some(&row), None)
        .build();
    state
        .store
        .delete_provisioner_key(org.id, name, Some(&log))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_and_user_scope_are_refused() {
        assert!(check("ci", &Tags::new()).is_empty());
        let reserved = check("psk", &Tags::new());
        assert_eq!(reserved[0].field, "name");
        assert_eq!(check("has space", &Tags::new())[0].field, "name");
        let user = Tags::from([(TAG_SCOPE.to_owned(), SCOPE_USER.to_owned())]);
        assert_eq!(check("ci", &user)[0].field, "tags");
    }
}
