//! A user's own settings: the dashboard's theme and terminal font, their profile (username and
//! display name), the values they gave a template's parameters before, and their quiet hours.
//! Each user may change their own; holders of `Update` on users may change anyone's.

use std::collections::HashMap;

use codersdk::ValidationError;
use codersdk::audit::{AuditAction, ResourceType};
use codersdk::usersettings::{
    TERMINAL_FONTS, THEME_MODES, THEMES, UpdateUserAppearanceSettingsRequest,
    UpdateUserPreferenceSettingsRequest, UpdateUserProfileRequest, UserAppearanceSettings,
    UserParameter, UserPreferenceSettings, UserQuietHoursScheduleResponse,
};
use uuid::Uuid;

use super::{Error, Result};
use crate::audit;
use crate::state::AppState;
use crate::validate;
use coderd_authz::{Action, Object, Subject};
use coderd_store::{self as store, UserRow};

const THEME: &str = "theme_preference";
const THEME_MODE: &str = "theme_mode";
const THEME_LIGHT: &str = "theme_light";
const THEME_DARK: &str = "theme_dark";
const TERMINAL_FONT: &str = "terminal_font";
const TASK_ALERT_DISMISSED: &str = "task_notification_alert_dismissed";
/// The themes a slot of `sync` mode may hold.
const SLOT_THEMES: &[&str] = &["dark", "light"];

/// Refuses a change to `user`'s settings unless the subject is that user or may update users.
fn authorize_personal(subject: &Subject, user: &UserRow) -> Result<()> {
    let object = Object::user(user.id);
    if subject.can(Action::Update, &object) {
        return Ok(());
    }
    Ok(coderd_authz::authorize(
        subject,
        Action::UpdatePersonal,
        &object,
    )?)
}

/// Refuses to show `user`'s own settings to anyone but them and who may update users; as
/// nothing about them is public, a refusal looks like a missing user.
pub fn authorize_read_personal(subject: &Subject, user: &UserRow) -> Result<()> {
    if user.id == subject.user_id || subject.can(Action::Update, &Object::user(user.id)) {
        Ok(())
    } else {
        Err(Error::NotFound)
    }
}

fn appearance_of(saved: &HashMap<String, String>) -> UserAppearanceSettings {
    let get = |key: &str| saved.get(key).cloned().unwrap_or_default();
    UserAppearanceSettings {
        theme_preference: get(THEME),
        theme_mode: get(THEME_MODE),
        theme_light: get(THEME_LIGHT),
        theme_dark: get(THEME_DARK),
        terminal_font: get(TERMINAL_FONT),
    }
}

/// `user`'s theme and terminal font.
pub async fn appearance(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
) -> Result<UserAppearanceSettings> {
    authorize_read_personal(subject, user)?;
    Ok(appearance_of(&state.store.user_configs(user.id).await?))
}

pub async fn update_appearance(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    update: &UpdateUserAppearanceSettingsRequest,
) -> Result<UserAppearanceSettings> {
    authorize_personal(subject, user)?;
    let mut invalid = Vec::new();
    let mut refuse = |field: &str, detail: String| {
        invalid.push(ValidationError {
            field: field.into(),
            detail,
        })
    };
    if !THEMES.contains(&update.theme_preference.as_str()) {
        refuse(
            "theme_preference",
            format!("must be one of {}", quoted(THEMES)),
        );
    }
    if !THEME_MODES.contains(&update.theme_mode.as_str()) {
        refuse(
            "theme_mode",
            format!("must be one of {}", quoted(THEME_MODES)),
        );
    }
    for (field, slot) in [
        ("theme_light", &update.theme_light),
        ("theme_dark", &update.theme_dark),
    ] {
        if slot.is_empty() && update.theme_mode == "sync" {
            refuse(field, "is required when theme_mode is \"sync\"".into());
        } else if !slot.is_empty() && !SLOT_THEMES.contains(&slot.as_str()) {
            refuse(field, format!("must be one of {}", quoted(SLOT_THEMES)));
        }
    }
    if !TERMINAL_FONTS.contains(&update.terminal_font.as_str()) {
        refuse(
            "terminal_font",
            format!("must be one of {}", quoted(TERMINAL_FONTS)),
        );
    }
    if !invalid.is_empty() {
        return Err(Error::Validation(invalid));
    }
    let mut values: Vec<(&str, &str)> = vec![
        (THEME, &update.theme_preference),
        (TERMINAL_FONT, &update.terminal_font),
    ];
    if !update.theme_mode.is_empty() {
        values.push((THEME_MODE, &update.theme_mode));
        // An empty slot keeps what was saved.
        if !update.theme_light.is_empty() {
            values.push((THEME_LIGHT, &update.theme_light));
        }
        if !update.theme_dark.is_empty() {
            values.push((THEME_DARK, &update.theme_dark));
        }
    } else if update.theme_preference == "auto" {
        // An older client's "follow the system": the mode it knows nothing of is cleared.
        values.push((THEME_MODE, ""));
    }
    state.store.set_user_configs(user.id, &values).await?;
    appearance(state, subject, user).await
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Changes `user`'s username and display name.
pub async fn update_profile(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    update: &UpdateUserProfileRequest,
) -> Result<UserRow> {
    authorize_personal(subject, user)?;
    let mut invalid = Vec::new();
    if let Err(detail) = validate::name(&update.username) {
        invalid.push(ValidationError {
            field: "username".into(),
            detail,
        });
    }
    if let Err(detail) = validate::real_name(&update.name) {
        invalid.push(ValidationError {
            field: "name".into(),
            detail,
        });
    }
    if !invalid.is_empty() {
        return Err(Error::Validation(invalid));
    }
    if update.username == user.username && update.name == user.name {
        return Ok(user.clone());
    }
    let log = audit::Entry::new(
        audit::actor(subject),
        ResourceType::User,
        user.id,
        &user.username,
        AuditAction::Write,
    )
    .diff(
        Some(user),
        Some(&UserRow {
            username: update.username.clone(),
            name: update.name.clone(),
            ..user.clone()
        }),
    )
    .build();
    match state
        .store
        .update_user_profile(user.id, &update.username, &update.name, Some(&log))
        .await
    {
        Err(store::Error::Conflict { .. }) => Err(Error::conflict(format!(
            "A user with the username {:?} already exists.",
            update.username
        ))),
        other => Ok(other?),
    }
}

/// The values `user` last gave the parameters of `template`'s versions, newest first per name,
/// which the create-workspace form offers again.
pub async fn autofill_parameters(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    template: Uuid,
) -> Result<Vec<UserParameter>> {
    // Only the user (or who may update them) sees what they typed.
    authorize_read_personal(subject, user)?;
    Ok(state
        .store
        .recent_parameter_values(user.id, template)
        .await?
        .into_iter()
        .map(|(name, value)| UserParameter { name, value })
        .collect())
}

/// `user`'s quiet hours: the deployment's (`--default-quiet-hours-schedule`), which every
/// user shares, as Coder's are when its deployment does not allow custom ones.
pub fn quiet_hours(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
) -> Result<UserQuietHoursScheduleResponse> {
    authorize_read_personal(subject, user)?;
    let schedule = &state.options.quiet_hours;
    let next = schedule
        .next_after(state.options.clock.now())
        .ok_or_else(|| Error::internal("the quiet hours never start"))?;
    Ok(UserQuietHoursScheduleResponse {
        raw_schedule: schedule.to_string(),
        user_set: false,
        user_can_set: false,
        time: next
            .with_timezone(&schedule.zone())
            .format("%H:%M")
            .to_string(),
        timezone: schedule.zone().name().to_owned(),
        next,
    })
}

/// Users cannot choose their own quiet hours on this deployment; the answer says so.
pub fn update_quiet_hours(subject: &Subject, user: &UserRow) -> Result<()> {
    authorize_personal(subject, user)?;
    Err(Error::forbidden(
        "Users cannot set custom quiet hours schedules on this deployment; it uses \
         --default-quiet-hours-schedule for everyone.",
    ))
}

/// `user`'s dashboard switches.
pub async fn preferences(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
) -> Result<UserPreferenceSettings> {
    authorize_read_personal(subject, user)?;
    let saved = state.store.user_configs(user.id).await?;
    Ok(UserPreferenceSettings {
        task_notification_alert_dismissed: saved
            .get(TASK_ALERT_DISMISSED)
            .is_some_and(|v| v == "true"),
    })
}

/// Changes the switches the request names; the others stay.
pub async fn update_preferences(
    state: &AppState,
    subject: &Subject,
    user: &UserRow,
    update: &UpdateUserPreferenceSettingsRequest,
) -> Result<UserPreferenceSettings> {
    authorize_personal(subject, user)?;
    if let Some(dismissed) = update.task_notification_alert_dismissed {
        let value = if dismissed { "true" } else { "false" };
        state
            .store
            .set_user_configs(user.id, &[(TASK_ALERT_DISMISSED, value)])
            .await?;
    }
    preferences(state, subject, user).await
}

/// The claims the caller's identity provider sent at their last OIDC sign-in.
pub async fn oidc_claims(state: &AppState, user: &UserRow) -> Result<serde_json::Value> {
    if user.login_type != "oidc" {
        return Err(Error::bad_request("User is not an OIDC user."));
    }
    Ok(state
        .store
        .link_claims(user.id, "oidc")
        .await?
        .unwrap_or_else(|| serde_json::json!({})))
}
