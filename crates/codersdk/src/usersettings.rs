//! Each user's own settings: appearance, profile, quiet hours, and what the account page and
//! the token dialog ask the server (login type, token limits, password strength).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::users::LoginType;

/// The terminal fonts Coder's dashboard offers; `""` is the dashboard's default.
pub const TERMINAL_FONTS: &[&str] = &[
    "",
    "fira-code",
    "geist-mono",
    "ibm-plex-mono",
    "jetbrains-mono",
    "source-code-pro",
];

/// How the theme is chosen: one theme (`single`), or following the system's light or dark
/// preference (`sync`); `""` when never set.
pub const THEME_MODES: &[&str] = &["", "single", "sync"];

/// The themes a user may pick (`""`, never set, is read back but cannot be chosen); `auto`
/// is the older clients' way of following the system.
pub const THEMES: &[&str] = &["auto", "dark", "light"];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserAppearanceSettings {
    pub theme_preference: String,
    pub theme_mode: String,
    /// The theme while the system is light, in `sync` mode.
    pub theme_light: String,
    /// The theme while the system is dark, in `sync` mode.
    pub theme_dark: String,
    pub terminal_font: String,
}

/// An empty `theme_mode` leaves the mode and both slots as they are (older clients send only
/// `theme_preference`); in `single` mode an empty slot keeps what was saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUserAppearanceSettingsRequest {
    pub theme_preference: String,
    #[serde(default)]
    pub theme_mode: String,
    #[serde(default)]
    pub theme_light: String,
    #[serde(default)]
    pub theme_dark: String,
    #[serde(default)]
    pub terminal_font: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUserProfileRequest {
    pub username: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserLoginType {
    pub login_type: LoginType,
}

/// Limits of the tokens a user may create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenConfig {
    /// In nanoseconds, as Go encodes a duration.
    pub max_token_lifetime: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateUserPasswordRequest {
    pub password: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ValidateUserPasswordResponse {
    pub valid: bool,
    /// Why the password is refused; empty when it is valid.
    pub details: String,
}

/// A parameter value a user gave before, offered again when they create a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserParameter {
    pub name: String,
    pub value: String,
}

/// A user's quiet hours: the daily window in which a template's autostop requirement stops
/// their workspaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserQuietHoursScheduleResponse {
    /// A cron expression with `CRON_TZ=`, as given.
    pub raw_schedule: String,
    /// Whether the user chose it (otherwise it is the deployment's default).
    pub user_set: bool,
    pub user_can_set: bool,
    /// The start time, `HH:MM`.
    pub time: String,
    pub timezone: String,
    pub next: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUserQuietHoursScheduleRequest {
    /// A daily cron expression with `CRON_TZ=`, or `""` for the deployment's default.
    pub schedule: String,
}

/// The dashboard's per-user switches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserPreferenceSettings {
    pub task_notification_alert_dismissed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateUserPreferenceSettingsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_notification_alert_dismissed: Option<bool>,
}

/// What the identity provider said about the caller at their last sign-in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OIDCClaimsResponse {
    #[schema(value_type = Object)]
    pub claims: serde_json::Value,
}
