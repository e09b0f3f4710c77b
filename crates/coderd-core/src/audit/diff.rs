//! Which fields of each audited resource are recorded, and the diff between two states.
//!
//! Every audited type lists its fields explicitly: a field added to a row later is not
//! recorded until someone decides whether it is secret. Timestamps that change on every write
//! (`updated_at`, `last_used`) are left out, so a diff shows what someone changed.

use serde_json::{Map, Value, json};

use coderd_store::{
    ApiKeyRow, GroupRow, KeyRow, MemberRow, NewApiKey, NewBuild, NewGroup, NewTemplate,
    NewTemplateVersion, NewUser, NewWorkspace, OrganizationRow, TemplateChanges, TemplateRow,
    TemplateScheduleRow, TemplateVersionRow, UserRow, WorkspaceRow,
};

/// One recorded field of a resource.
pub enum Field {
    /// Recorded as is.
    Plain(Value),
    /// Never recorded: only compared, so the diff can say *that* it changed. Callers may pass
    /// anything that changes with the secret (a hash, the secret itself); it is dropped after.
    Secret(Vec<u8>),
}

/// A resource the audit log can describe.
pub trait Auditable {
    fn audit_fields(&self) -> Vec<(&'static str, Field)>;
}

fn plain(v: impl serde::Serialize) -> Field {
    Field::Plain(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// `{field: {old, new, secret}}` for the fields that differ; secret fields carry empty strings.
pub(super) fn diff<T: Auditable + ?Sized>(old: Option<&T>, new: Option<&T>) -> Value {
    let old_fields = old.map(Auditable::audit_fields).unwrap_or_default();
    let new_fields = new.map(Auditable::audit_fields).unwrap_or_default();
    let mut names: Vec<&'static str> = old_fields
        .iter()
        .chain(&new_fields)
        .map(|(name, _)| *name)
        .collect();
    names.sort_unstable();
    names.dedup();
    let find = |fields: &[(&'static str, Field)], name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| match f {
                Field::Plain(v) => (v.clone(), false),
                Field::Secret(bytes) => (Value::String(hex_of(bytes)), true),
            })
    };
    let mut out = Map::new();
    for name in names {
        let (old_value, old_secret) = find(&old_fields, name).unwrap_or((Value::Null, false));
        let (new_value, new_secret) = find(&new_fields, name).unwrap_or((Value::Null, false));
        if old_value == new_value {
            continue;
        }
        let entry = if old_secret || new_secret {
            json!({"old": "", "new": "", "secret": true})
        } else {
            json!({"old": old_value, "new": new_value, "secret": false})
        };
        out.insert(name.to_owned(), entry);
    }
    Value::Object(out)
}

/// Secrets are compared through this in memory only; it never reaches the output.
fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A user's fields: `[email, username, name, hashed_password, status, login_type]`.
fn user_fields(
    id: uuid::Uuid,
    [email, username, name, hashed_password, status, login_type]: [&str; 6],
    roles: &[String],
    deleted: bool,
) -> Vec<(&'static str, Field)> {
    vec![
        ("id", plain(id)),
        ("email", plain(email)),
        ("username", plain(username)),
        ("name", plain(name)),
        (
            "hashed_password",
            Field::Secret(hashed_password.as_bytes().to_vec()),
        ),
        ("status", plain(status)),
        ("rbac_roles", plain(roles)),
        ("login_type", plain(login_type)),
        ("deleted", plain(deleted)),
    ]
}

impl Auditable for UserRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        let text = [
            self.email.as_str(),
            &self.username,
            &self.name,
            &self.hashed_password,
            &self.status,
            &self.login_type,
        ];
        user_fields(self.id, text, &self.rbac_roles, self.deleted)
    }
}

impl Auditable for NewUser {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        let text = [
            self.email.as_str(),
            &self.username,
            &self.name,
            &self.hashed_password,
            &self.status,
            &self.login_type,
        ];
        user_fields(self.id, text, &self.rbac_roles, false)
    }
}

impl Auditable for NewApiKey {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(&self.id)),
            ("hashed_secret", Field::Secret(self.hashed_secret.clone())),
            ("user_id", plain(self.user_id)),
            ("login_type", plain(&self.login_type)),
            ("token_name", plain(&self.token_name)),
            ("scope", plain(&self.scope)),
            ("lifetime_seconds", plain(self.lifetime_seconds)),
            ("expires_at", plain(self.expires_at)),
        ]
    }
}

impl Auditable for ApiKeyRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(&self.id)),
            ("hashed_secret", Field::Secret(self.hashed_secret.clone())),
            ("user_id", plain(self.user_id)),
            ("login_type", plain(&self.login_type)),
            ("token_name", plain(&self.token_name)),
            ("scope", plain(&self.scope)),
            ("lifetime_seconds", plain(self.lifetime_seconds)),
            ("expires_at", plain(self.expires_at)),
        ]
    }
}

fn group_fields(
    id: uuid::Uuid,
    org: uuid::Uuid,
    text: [&str; 3],
    quota_allowance: i32,
) -> Vec<(&'static str, Field)> {
    let [name, display_name, avatar_url] = text;
    vec![
        ("id", plain(id)),
        ("organization_id", plain(org)),
        ("name", plain(name)),
        ("display_name", plain(display_name)),
        ("avatar_url", plain(avatar_url)),
        ("quota_allowance", plain(quota_allowance)),
    ]
}

impl Auditable for NewGroup {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        let text = [self.name.as_str(), &self.display_name, &self.avatar_url];
        group_fields(self.id, self.organization_id, text, self.quota_allowance)
    }
}

impl Auditable for GroupRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        let text = [self.name.as_str(), &self.display_name, &self.avatar_url];
        group_fields(self.id, self.organization_id, text, self.quota_allowance)
    }
}

/// A template's recorded fields, whether it is a row or about to be one: both impls below
/// fill this, so a field is recorded the same way at creation and at every later change.
struct TemplateFields<'a> {
    id: uuid::Uuid,
    organization_id: uuid::Uuid,
    text: [&'a str; 5],
    active_version_id: uuid::Uuid,
    created_by: uuid::Uuid,
    deprecated: &'a str,
    allow_user_cancel_workspace_jobs: bool,
    require_active_version: bool,
    levels: [&'a str; 2],
    schedule: TemplateScheduleRow,
    deleted: bool,
}

impl TemplateFields<'_> {
    fn fields(self) -> Vec<(&'static str, Field)> {
        let [name, display_name, description, icon, provisioner] = self.text;
        let [max_port_share_level, cors_behavior] = self.levels;
        let s = self.schedule;
        vec![
            ("id", plain(self.id)),
            ("organization_id", plain(self.organization_id)),
            ("name", plain(name)),
            ("display_name", plain(display_name)),
            ("description", plain(description)),
            ("icon", plain(icon)),
            ("provisioner", plain(provisioner)),
            ("active_version_id", plain(self.active_version_id)),
            ("created_by", plain(self.created_by)),
            ("deprecated", plain(self.deprecated)),
            (
                "allow_user_cancel_workspace_jobs",
                plain(self.allow_user_cancel_workspace_jobs),
            ),
            ("require_active_version", plain(self.require_active_version)),
            ("max_port_share_level", plain(max_port_share_level)),
            ("cors_behavior", plain(cors_behavior)),
            ("default_ttl_ms", plain(s.default_ttl_ms)),
            ("activity_bump_ms", plain(s.activity_bump_ms)),
            ("allow_user_autostart", plain(s.allow_user_autostart)),
            ("allow_user_autostop", plain(s.allow_user_autostop)),
            ("autostart_allowed_days", plain(s.autostart_allowed_days)),
            (
                "autostop_requirement_days_of_week",
                plain(s.autostop_requirement_days_of_week),
            ),
            (
                "autostop_requirement_weeks",
                plain(s.autostop_requirement_weeks),
            ),
            ("failure_ttl_ms", plain(s.failure_ttl_ms)),
            ("time_til_dormant_ms", plain(s.time_til_dormant_ms)),
            (
                "time_til_dormant_autodelete_ms",
                plain(s.time_til_dormant_autodelete_ms),
            ),
            ("deleted", plain(self.deleted)),
        ]
    }
}

impl Auditable for TemplateRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        TemplateFields {
            id: self.id,
            organization_id: self.organization_id,
            text: [
                &self.name,
                &self.display_name,
                &self.description,
                &self.icon,
                &self.provisioner,
            ],
            active_version_id: self.active_version_id,
            created_by: self.created_by,
            deprecated: &self.deprecated,
            allow_user_cancel_workspace_jobs: self.allow_user_cancel_workspace_jobs,
            require_active_version: self.require_active_version,
            levels: [&self.max_port_share_level, &self.cors_behavior],
            schedule: self.schedule(),
            deleted: self.deleted,
        }
        .fields()
    }
}

impl Auditable for NewTemplate {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        TemplateFields {
            id: self.id,
            organization_id: self.organization_id,
            text: [
                &self.name,
                &self.display_name,
                &self.description,
                &self.icon,
                &self.provisioner,
            ],
            active_version_id: self.active_version_id,
            created_by: self.created_by,
            deprecated: "",
            allow_user_cancel_workspace_jobs: self.allow_user_cancel_workspace_jobs,
            require_active_version: self.require_active_version,
            levels: [&self.max_port_share_level, &self.cors_behavior],
            schedule: self.schedule,
            deleted: false,
        }
        .fields()
    }
}

impl Auditable for NewTemplateVersion {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        // `user_variable_values` are left out: template variables may be sensitive.
        vec![
            ("id", plain(self.id)),
            ("template_id", plain(self.template_id)),
            ("organization_id", plain(self.organization_id)),
            ("name", plain(&self.name)),
            ("message", plain(&self.message)),
            ("created_by", plain(self.created_by)),
            ("job_id", plain(self.job.id)),
        ]
    }
}

impl Auditable for TemplateVersionRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(self.id)),
            ("template_id", plain(self.template_id)),
            ("organization_id", plain(self.organization_id)),
            ("name", plain(&self.name)),
            ("message", plain(&self.message)),
            ("archived", plain(self.archived)),
            ("created_by", plain(self.created_by)),
            ("job_id", plain(self.job_id)),
        ]
    }
}

impl Auditable for NewWorkspace {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(self.id)),
            ("owner_id", plain(self.owner_id)),
            ("organization_id", plain(self.organization_id)),
            ("template_id", plain(self.template_id)),
            ("name", plain(&self.name)),
            ("autostart_schedule", plain(&self.autostart_schedule)),
            ("ttl", plain(self.ttl_ms)),
            ("automatic_updates", plain(&self.automatic_updates)),
        ]
    }
}

impl Auditable for WorkspaceRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(self.id)),
            ("owner_id", plain(self.owner_id)),
            ("organization_id", plain(self.organization_id)),
            ("template_id", plain(self.template_id)),
            ("name", plain(&self.name)),
            ("autostart_schedule", plain(&self.autostart_schedule)),
            ("ttl", plain(self.ttl_ms)),
            ("automatic_updates", plain(&self.automatic_updates)),
            ("dormant_at", plain(self.dormant_at)),
            ("deleted", plain(self.deleted)),
        ]
    }
}

impl Auditable for NewBuild {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        // Parameter values are left out: they may hold secrets.
        vec![
            ("id", plain(self.id)),
            ("workspace_id", plain(self.workspace_id)),
            ("template_version_id", plain(self.template_version_id)),
            ("transition", plain(&self.transition)),
            ("initiator_id", plain(self.initiator_id)),
            ("reason", plain(&self.reason)),
            ("job_id", plain(self.job.id)),
        ]
    }
}

impl Auditable for KeyRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(self.id)),
            ("organization_id", plain(self.organization_id)),
            ("name", plain(&self.name)),
            ("hashed_secret", Field::Secret(self.hashed_secret.clone())),
            ("tags", plain(&self.tags)),
        ]
    }
}

impl Auditable for OrganizationRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("id", plain(self.id)),
            ("name", plain(&self.name)),
            ("display_name", plain(&self.display_name)),
            ("description", plain(&self.description)),
            ("icon", plain(&self.icon)),
            ("is_default", plain(self.is_default)),
        ]
    }
}

impl Auditable for MemberRow {
    fn audit_fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("organization_id", plain(self.organization_id)),
            ("user_id", plain(self.user_id)),
            ("roles", plain(&self.roles)),
        ]
    }
}

/// What `before` becomes once `c` is applied (so an update's entry can be written in its
/// transaction, before the row is read back).
pub fn template_after(before: &TemplateRow, c: &TemplateChanges) -> TemplateRow {
    let mut after = before.clone();
    let pick = |new: &Option<String>, old: &mut String| {
        if let Some(v) = new {
            old.clone_from(v);
        }
    };
    pick(&c.name, &mut after.name);
    pick(&c.display_name, &mut after.display_name);
    pick(&c.description, &mut after.description);
    pick(&c.icon, &mut after.icon);
    pick(&c.deprecated, &mut after.deprecated);
    pick(&c.max_port_share_level, &mut after.max_port_share_level);
    pick(&c.cors_behavior, &mut after.cors_behavior);
    if let Some(v) = c.allow_user_cancel_workspace_jobs {
        after.allow_user_cancel_workspace_jobs = v;
    }
    if let Some(v) = c.require_active_version {
        after.require_active_version = v;
    }
    if let Some(s) = c.schedule {
        after.default_ttl_ms = s.default_ttl_ms;
        after.activity_bump_ms = s.activity_bump_ms;
        after.autostop_requirement_days_of_week = s.autostop_requirement_days_of_week;
        after.autostop_requirement_weeks = s.autostop_requirement_weeks;
        after.autostart_allowed_days = s.autostart_allowed_days;
        after.allow_user_autostart = s.allow_user_autostart;
        after.allow_user_autostop = s.allow_user_autostop;
        after.failure_ttl_ms = s.failure_ttl_ms;
        after.time_til_dormant_ms = s.time_til_dormant_ms;
        after.time_til_dormant_autodelete_ms = s.time_til_dormant_autodelete_ms;
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Thing {
        name: &'static str,
        secret: &'static str,
    }

    impl Auditable for Thing {
        fn audit_fields(&self) -> Vec<(&'static str, Field)> {
            vec![
                ("name", plain(self.name)),
                ("secret", Field::Secret(self.secret.as_bytes().to_vec())),
            ]
        }
    }

    #[test]
    fn unchanged_fields_are_left_out_and_secrets_only_say_they_changed() {
        let a = Thing {
            name: "a",
            secret: "hunter2",
        };
        let b = Thing {
            name: "a",
            secret: "swordfish",
        };
        let d = diff(Some(&a), Some(&b));
        assert_eq!(d, json!({"secret": {"old": "", "new": "", "secret": true}}));
        assert!(!d.to_string().contains("hunter2") && !d.to_string().contains("swordfish"));
        assert_eq!(diff(Some(&a), Some(&a)), json!({}));
    }

    #[test]
    fn creations_show_every_field_against_null() {
        let a = Thing {
            name: "a",
            secret: "s",
        };
        let d = diff(None, Some(&a));
        assert_eq!(
            d,
            json!({
                "name": {"old": null, "new": "a", "secret": false},
                "secret": {"old": "", "new": "", "secret": true},
            })
        );
    }
}
