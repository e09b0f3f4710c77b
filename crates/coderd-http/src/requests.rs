//! The field rules of each request body, checked before a handler reads the database, and the
//! same rules as the OpenAPI document states them ([`DOCUMENTED`]).
//!
//! A handler calls the function for its body and gets one 400 listing every invalid field.
//! Rules that need the database or the caller (does the template exist, may this caller assign
//! that role) stay in the handlers.

use codersdk::apikeys::CreateTokenRequest;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::provisionerd::Tags;
use codersdk::templates::{
    CreateTemplateRequest, CreateTemplateVersionRequest, TemplateAutostartRequirement,
    TemplateAutostopRequirement, UpdateTemplateMeta,
};
use codersdk::users::{CreateFirstUserRequest, CreateUserRequest, LoginWithPasswordRequest};
use codersdk::workspaces::{
    CreateWorkspaceBuildRequest, CreateWorkspaceRequest, UpdateWorkspaceAutomaticUpdatesRequest,
    UpdateWorkspaceAutostartRequest, UpdateWorkspaceTTLRequest, WorkspaceBuildParameter,
};

use crate::error::{ApiResult, Validator};
use coderd_core::provisioners::tags;
use coderd_core::validate::*;

/// Ours: free text Coder leaves unbounded (organization descriptions, deprecation messages).
pub const LONG_TEXT_MAX: usize = 4096;
/// Ours: names of template variables and rich parameters (Terraform identifiers are short).
pub const PARAMETER_NAME_MAX: usize = 256;

pub use coderd_core::validate::{AUTOMATIC_UPDATES, BUILD_REASONS};

pub const PROVISIONERS: &[&str] = &["terraform", "echo"];
pub const STORAGE_METHODS: &[&str] = &["file"];
pub const TOKEN_SCOPES: &[&str] = &["all"];
pub const TRANSITIONS: &[&str] = &["start", "stop", "delete"];
pub const LOG_LEVELS: &[&str] = &["debug"];

/// Empty means "the default" for these.
fn empty_or_one_of(s: &str, allowed: &[&str]) -> Result<(), String> {
    if s.is_empty() {
        Ok(())
    } else {
        one_of(s, allowed)
    }
}

pub fn first_user(req: &CreateFirstUserRequest) -> ApiResult<()> {
    Validator::default()
        .push("email", email(&req.email))
        .push("username", name(&req.username))
        .push("name", real_name(&req.name))
        .push(
            "password",
            password_for(&req.password, &req.username, &req.email),
        )
        .finish()
}

/// The fields of a new user; `password` only when it logs in with one. Roles must exist
/// (whether the caller may grant them is the handler's 403).
pub fn create_user(req: &CreateUserRequest, needs_password: bool) -> ApiResult<()> {
    let mut v = Validator::default();
    v.push("email", email(&req.email))
        .push("username", name(&req.username))
        .push("name", real_name(&req.name));
    if needs_password {
        v.push(
            "password",
            password_for(&req.password, &req.username, &req.email),
        );
    }
    for role in &req.roles {
        v.check(
            role == "member" || coderd_authz::site_role(role).is_some(),
            "roles",
            format!("{role:?} is not a site role"),
        );
    }
    v.finish()
}

pub fn login(req: &LoginWithPasswordRequest) -> ApiResult<()> {
    Validator::default()
        .push("email", email(&req.email))
        .check(!req.password.is_empty(), "password", "is required")
        .finish()
}

pub fn create_token(req: &CreateTokenRequest) -> ApiResult<()> {
    Validator::default()
        .check(req.lifetime >= 0, "lifetime", "must not be negative")
        .push("scope", empty_or_one_of(&req.scope, TOKEN_SCOPES))
        .push(
            "token_name",
            line(&req.token_name, TOKEN_NAME_MAX).and_then(|()| trimmed(&req.token_name)),
        )
        .finish()
}

pub fn create_organization(req: &CreateOrganizationRequest) -> ApiResult<()> {
    Validator::default()
        .push("name", name(&req.name))
        .push("display_name", display_name(&req.display_name))
        .push("description", text(&req.description, LONG_TEXT_MAX))
        .push("icon", line(&req.icon, ICON_MAX))
        .finish()
}

fn provisioner_tags(v: &mut Validator, field: &str, given: &Tags) {
    v.push(field, tags::validate(given).map_err(|e| e.to_string()));
}

pub fn create_template_version(req: &CreateTemplateVersionRequest) -> ApiResult<()> {
    let mut v = Validator::default();
    v.push("name", version_name(&req.name))
        .push("message", text(&req.message, VERSION_MESSAGE_MAX))
        .push("provisioner", one_of(&req.provisioner, PROVISIONERS))
        .push(
            "storage_method",
            empty_or_one_of(&req.storage_method, STORAGE_METHODS),
        );
    provisioner_tags(&mut v, "tags", &req.tags);
    for (i, var) in req.user_variable_values.iter().enumerate() {
        v.push(
            &format!("user_variable_values[{i}].name"),
            parameter_name(&var.name),
        );
    }
    v.finish()
}

fn parameter_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is required".into());
    }
    line(s, PARAMETER_NAME_MAX)
}

fn parameter_values(v: &mut Validator, values: &[WorkspaceBuildParameter]) {
    for (i, p) in values.iter().enumerate() {
        v.push(
            &format!("rich_parameter_values[{i}].name"),
            parameter_name(&p.name),
        );
    }
}

/// A template's schedule settings, as create and edit requests carry them (`None`: unchanged
/// or the default).
struct ScheduleFields<'a> {
    activity_bump_ms: Option<i64>,
    autostop_requirement: Option<&'a TemplateAutostopRequirement>,
    autostart_requirement: Option<&'a TemplateAutostartRequirement>,
    thresholds: [(&'static str, Option<i64>); 3],
    max_port_share_level: Option<&'a str>,
    cors_behavior: Option<&'a str>,
}

fn schedule_fields(v: &mut Validator, f: ScheduleFields<'_>) {
    if let Some(ms) = f.activity_bump_ms {
        v.push("activity_bump_ms", activity_bump_ms(ms));
    }
    if let Some(r) = f.autostop_requirement {
        v.push(
            "autostop_requirement.days_of_week",
            weekdays(&r.days_of_week),
        )
        .push("autostop_requirement.weeks", autostop_weeks(r.weeks));
    }
    if let Some(r) = f.autostart_requirement {
        v.push(
            "autostart_requirement.days_of_week",
            weekdays(&r.days_of_week),
        );
    }
    for (field, ms) in f.thresholds {
        if let Some(ms) = ms {
            v.push(field, threshold_ms(ms));
        }
    }
    if let Some(level) = f.max_port_share_level {
        v.push("max_port_share_level", one_of(level, PORT_SHARE_LEVELS));
    }
    if let Some(behavior) = f.cors_behavior {
        v.push("cors_behavior", one_of(behavior, CORS_BEHAVIORS));
    }
}

pub fn create_template(req: &CreateTemplateRequest) -> ApiResult<()> {
    let mut v = Validator::default();
    v.push("name", name(&req.name))
        .push("display_name", display_name(&req.display_name))
        .push(
            "description",
            text(&req.description, TEMPLATE_DESCRIPTION_MAX),
        )
        .push("icon", line(&req.icon, ICON_MAX))
        .push(
            "default_ttl_ms",
            default_ttl_ms(req.default_ttl_ms.unwrap_or(0)),
        );
    schedule_fields(
        &mut v,
        ScheduleFields {
            activity_bump_ms: req.activity_bump_ms,
            autostop_requirement: req.autostop_requirement.as_ref(),
            autostart_requirement: req.autostart_requirement.as_ref(),
            thresholds: [
                ("failure_ttl_ms", req.failure_ttl_ms),
                ("dormant_ttl_ms", req.dormant_ttl_ms),
                ("delete_ttl_ms", req.delete_ttl_ms),
            ],
            max_port_share_level: req.max_port_share_level.as_deref(),
            cors_behavior: req.cors_behavior.as_deref(),
        },
    );
    v.finish()
}

pub fn update_template(req: &UpdateTemplateMeta) -> ApiResult<()> {
    let mut v = Validator::default();
    if let Some(s) = &req.name {
        v.push("name", name(s));
    }
    if let Some(s) = &req.display_name {
        v.push("display_name", display_name(s));
    }
    if let Some(s) = &req.description {
        v.push("description", text(s, TEMPLATE_DESCRIPTION_MAX));
    }
    if let Some(s) = &req.icon {
        v.push("icon", line(s, ICON_MAX));
    }
    if let Some(ms) = req.default_ttl_ms {
        v.push("default_ttl_ms", default_ttl_ms(ms));
    }
    if let Some(s) = &req.deprecation_message {
        v.push("deprecation_message", text(s, LONG_TEXT_MAX));
    }
    schedule_fields(
        &mut v,
        ScheduleFields {
            activity_bump_ms: req.activity_bump_ms,
            autostop_requirement: req.autostop_requirement.as_ref(),
            autostart_requirement: req.autostart_requirement.as_ref(),
            thresholds: [
                ("failure_ttl_ms", req.failure_ttl_ms),
                ("time_til_dormant_ms", req.time_til_dormant_ms),
                (
                    "time_til_dormant_autodelete_ms",
                    req.time_til_dormant_autodelete_ms,
                ),
            ],
            max_port_share_level: req.max_port_share_level.as_deref(),
            cors_behavior: req.cors_behavior.as_deref(),
        },
    );
    v.finish()
}

pub fn create_workspace(req: &CreateWorkspaceRequest) -> ApiResult<()> {
    let mut v = Validator::default();
    v.push("name", name(&req.name))
        .push("ttl_ms", workspace_ttl_ms(req.ttl_ms.unwrap_or(0)))
        .check(
            req.template_id.is_some() || req.template_version_id.is_some(),
            "template_id",
            "a template_id or template_version_id is required",
        );
    if let Some(s) = req.autostart_schedule.as_deref().filter(|s| !s.is_empty()) {
        v.push("autostart_schedule", schedule(s));
    }
    if let Some(updates) = &req.automatic_updates {
        v.push("automatic_updates", one_of(updates, AUTOMATIC_UPDATES));
    }
    parameter_values(&mut v, &req.rich_parameter_values);
    v.finish()
}

/// An empty schedule turns autostart off.
pub fn update_autostart(req: &UpdateWorkspaceAutostartRequest) -> ApiResult<()> {
    let mut v = Validator::default();
    if let Some(s) = req.schedule.as_deref().filter(|s| !s.is_empty()) {
        v.push("schedule", schedule(s));
    }
    v.finish()
}

pub fn update_ttl(req: &UpdateWorkspaceTTLRequest) -> ApiResult<()> {
    Validator::default()
        .push("ttl_ms", workspace_ttl_ms(req.ttl_ms.unwrap_or(0)))
        .finish()
}

pub fn update_automatic_updates(req: &UpdateWorkspaceAutomaticUpdatesRequest) -> ApiResult<()> {
    Validator::default()
        .push(
            "automatic_updates",
            one_of(&req.automatic_updates, AUTOMATIC_UPDATES),
        )
        .finish()
}

pub fn create_build(req: &CreateWorkspaceBuildRequest) -> ApiResult<()> {
    let mut v = Validator::default();
    v.push("transition", one_of(&req.transition, TRANSITIONS))
        .push("log_level", empty_or_one_of(&req.log_level, LOG_LEVELS))
        .push("reason", empty_or_one_of(&req.reason, BUILD_REASONS));
    parameter_values(&mut v, &req.rich_parameter_values);
    v.finish()
}

/// A limit as the OpenAPI document states it.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// A string of at most `max` characters (and at least `min`), matching `pattern`.
    Text {
        min: usize,
        max: usize,
        pattern: Option<&'static str>,
    },
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// One of these strings (or empty, when `empty` is true).
    OneOf {
        values: &'static [&'static str],
        empty: bool,
    },
}

const fn max(max: usize) -> Limit {
    Limit::Text {
        min: 0,
        max,
        pattern: None,
    }
}

const fn between(min: usize, max: usize) -> Limit {
    Limit::Text {
        min,
        max,
        pattern: None,
    }
}

const fn int(min: i64, max: i64) -> Limit {
    Limit::Int { min, max }
}

const fn enumeration(values: &'static [&'static str]) -> Limit {
    Limit::OneOf {
        values,
        empty: false,
    }
}

const fn enumeration_or_empty(values: &'static [&'static str]) -> Limit {
    Limit::OneOf {
        values,
        empty: true,
    }
}

const NAME: Limit = Limit::Text {
    min: 1,
    max: NAME_MAX,
    pattern: Some(NAME_PATTERN),
};
const VERSION_NAME: Limit = Limit::Text {
    min: 0,
    max: VERSION_NAME_MAX,
    pattern: Some(VERSION_NAME_PATTERN),
};
const PASSWORD: Limit = between(PASSWORD_MIN, PASSWORD_MAX);
const PARAMETER_NAME: Limit = between(1, PARAMETER_NAME_MAX);
const TTL: Limit = int(0, TTL_MAX_MS);
const THRESHOLD: Limit = int(0, THRESHOLD_MAX_MS);

/// For every request body (by schema name), the limit of each bounded property: `openapi`
/// writes them into the document.
pub const DOCUMENTED: &[(&str, &[(&str, Limit)])] = &[
    (
        "CreateFirstUserRequest",
        &[
            ("email", max(EMAIL_MAX)),
            ("username", NAME),
            ("name", max(REAL_NAME_MAX)),
            ("password", PASSWORD),
        ],
    ),
    (
        "CreateUserRequest",
        &[
            ("email", max(EMAIL_MAX)),
            ("username", NAME),
            ("name", max(REAL_NAME_MAX)),
            ("password", max(PASSWORD_MAX)),
        ],
    ),
    ("LoginWithPasswordRequest", &[("email", max(EMAIL_MAX))]),
    ("UpdateUserPasswordRequest", &[("password", PASSWORD)]),
    (
        "CreateTokenRequest",
        &[
            ("lifetime", int(0, i64::MAX)),
            ("scope", enumeration_or_empty(TOKEN_SCOPES)),
            ("token_name", max(TOKEN_NAME_MAX)),
        ],
    ),
    (
        "CreateOrganizationRequest",
        &[
            ("name", NAME),
            ("display_name", max(DISPLAY_NAME_MAX)),
            ("description", max(LONG_TEXT_MAX)),
            ("icon", max(ICON_MAX)),
        ],
    ),
    (
        "CreateTemplateVersionRequest",
        &[
            ("name", VERSION_NAME),
            ("message", max(VERSION_MESSAGE_MAX)),
            ("provisioner", enumeration(PROVISIONERS)),
            ("storage_method", enumeration_or_empty(STORAGE_METHODS)),
        ],
    ),
    (
        "CreateTemplateRequest",
        &[
            ("name", NAME),
            ("display_name", max(DISPLAY_NAME_MAX)),
            ("description", max(TEMPLATE_DESCRIPTION_MAX)),
            ("icon", max(ICON_MAX)),
            ("default_ttl_ms", TTL),
            ("activity_bump_ms", TTL),
            ("failure_ttl_ms", THRESHOLD),
            ("dormant_ttl_ms", THRESHOLD),
            ("delete_ttl_ms", THRESHOLD),
            ("max_port_share_level", enumeration(PORT_SHARE_LEVELS)),
            ("cors_behavior", enumeration(CORS_BEHAVIORS)),
        ],
    ),
    (
        "UpdateTemplateMeta",
        &[
            ("name", NAME),
            ("display_name", max(DISPLAY_NAME_MAX)),
            ("description", max(TEMPLATE_DESCRIPTION_MAX)),
            ("icon", max(ICON_MAX)),
            ("default_ttl_ms", TTL),
            ("deprecation_message", max(LONG_TEXT_MAX)),
            ("activity_bump_ms", TTL),
            ("failure_ttl_ms", THRESHOLD),
            ("time_til_dormant_ms", THRESHOLD),
            ("time_til_dormant_autodelete_ms", THRESHOLD),
            ("max_port_share_level", enumeration(PORT_SHARE_LEVELS)),
            ("cors_behavior", enumeration(CORS_BEHAVIORS)),
        ],
    ),
    (
        "TemplateAutostopRequirement",
        &[("weeks", int(0, AUTOSTOP_WEEKS_MAX))],
    ),
    (
        "UpdateWorkspaceAutostartRequest",
        &[("schedule", max(SCHEDULE_MAX))],
    ),
    ("UpdateWorkspaceTTLRequest", &[("ttl_ms", TTL)]),
    (
        "UpdateWorkspaceAutomaticUpdatesRequest",
        &[("automatic_updates", enumeration(AUTOMATIC_UPDATES))],
    ),
    (
        "CreateWorkspaceRequest",
        &[
            ("name", NAME),
            ("ttl_ms", TTL),
            ("autostart_schedule", max(SCHEDULE_MAX)),
            ("automatic_updates", enumeration(AUTOMATIC_UPDATES)),
        ],
    ),
    (
        "CreateWorkspaceBuildRequest",
        &[
            ("transition", enumeration(TRANSITIONS)),
            ("log_level", enumeration_or_empty(LOG_LEVELS)),
            ("reason", enumeration_or_empty(BUILD_REASONS)),
        ],
    ),
    ("WorkspaceBuildParameter", &[("name", PARAMETER_NAME)]),
    ("VariableValue", &[("name", PARAMETER_NAME)]),
];
