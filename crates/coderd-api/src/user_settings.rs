//! A user's own settings: `/users/{user}/appearance`, `…/profile`, `…/login-type`,
//! `…/keys/tokens/tokenconfig`, `…/autofill-parameters`, `…/quiet-hours`, `…/preferences`,
//! `/users/oidc-claims` and `POST /users/validate-password`.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post, put};
use codersdk::users::User;
use codersdk::usersettings::{
    OIDCClaimsResponse, TokenConfig, UpdateUserAppearanceSettingsRequest,
    UpdateUserPreferenceSettingsRequest, UpdateUserProfileRequest,
    UpdateUserQuietHoursScheduleRequest, UserAppearanceSettings, UserLoginType, UserParameter,
    UserPreferenceSettings, UserQuietHoursScheduleResponse, ValidateUserPasswordRequest,
    ValidateUserPasswordResponse,
};
use uuid::Uuid;

use super::AppState;
use super::users::user_response;
use coderd_core::domain::user_settings;
use coderd_core::validate;
use coderd_http::error::{ApiError, ApiResult};
use coderd_http::extract::{Auth, Json, Path, Query, resolve_user};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/validate-password", post(validate_password))
        .route(
            "/users/{user}/appearance",
            get(get_appearance).put(update_appearance),
        )
        .route("/users/{user}/profile", put(update_profile))
        .route("/users/{user}/login-type", get(login_type))
        .route("/users/{user}/keys/tokens/tokenconfig", get(token_config))
        .route(
            "/users/{user}/autofill-parameters",
            get(autofill_parameters),
        )
        .route(
            "/users/{user}/quiet-hours",
            get(get_quiet_hours).put(update_quiet_hours),
        )
        .route(
            "/users/{user}/preferences",
            get(get_preferences).put(update_preferences),
        )
        .route("/users/oidc-claims", get(oidc_claims))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/appearance", tag = "Users",
    params(("user" = String, Path, description = "User ID, username, or me")),
    responses((status = 200, body = UserAppearanceSettings), (status = 404, body = codersdk::Response)))]
pub(super) async fn get_appearance(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<UserAppearanceSettings>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        user_settings::appearance(&state, &auth.subject, &row).await?,
    ))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/appearance", tag = "Users",
    params(("user" = String, Path)), request_body = UpdateUserAppearanceSettingsRequest,
    responses((status = 200, body = UserAppearanceSettings), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_appearance(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<UpdateUserAppearanceSettingsRequest>,
) -> ApiResult<Json<UserAppearanceSettings>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        user_settings::update_appearance(&state, &auth.subject, &row, &req).await?,
    ))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/profile", tag = "Users",
    params(("user" = String, Path)), request_body = UpdateUserProfileRequest,
    responses((status = 200, body = User), (status = 400, body = codersdk::Response),
        (status = 409, body = codersdk::Response, description = "The username is taken")))]
pub(super) async fn update_profile(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<UpdateUserProfileRequest>,
) -> ApiResult<Json<User>> {
    let row = resolve_user(&state, &auth, &user).await?;
    let row = user_settings::update_profile(&state, &auth.subject, &row, &req).await?;
    Ok(Json(user_response(&state, row).await?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/login-type", tag = "Users",
    params(("user" = String, Path)),
    responses((status = 200, body = UserLoginType), (status = 404, body = codersdk::Response)))]
pub(super) async fn login_type(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<UserLoginType>> {
    let row = resolve_user(&state, &auth, &user).await?;
    user_settings::authorize_read_personal(&auth.subject, &row)?;
    let login_type = row
        .login_type
        .parse()
        .map_err(|e: String| ApiError::internal(format!("user {}: {e}", row.id)))?;
    Ok(Json(UserLoginType { login_type }))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/keys/tokens/tokenconfig", tag = "Users",
    params(("user" = String, Path)),
    responses((status = 200, body = TokenConfig), (status = 404, body = codersdk::Response)))]
pub(super) async fn token_config(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<TokenConfig>> {
    let row = resolve_user(&state, &auth, &user).await?;
    user_settings::authorize_read_personal(&auth.subject, &row)?;
    let nanos = i64::try_from(state.options.max_token_lifetime.as_nanos()).unwrap_or(i64::MAX);
    Ok(Json(TokenConfig {
        max_token_lifetime: nanos,
    }))
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct AutofillParams {
    template_id: Option<Uuid>,
}

#[utoipa::path(get, path = "/api/v2/users/{user}/autofill-parameters", tag = "Users",
    params(("user" = String, Path), ("template_id" = Uuid, Query)),
    responses((status = 200, body = [UserParameter]), (status = 400, body = codersdk::Response)))]
pub(super) async fn autofill_parameters(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Query(params): Query<AutofillParams>,
) -> ApiResult<Json<Vec<UserParameter>>> {
    let Some(template) = params.template_id else {
        return Err(ApiError::validation(vec![codersdk::ValidationError {
            field: "template_id".into(),
            detail: "is required".into(),
        }]));
    };
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        user_settings::autofill_parameters(&state, &auth.subject, &row, template).await?,
    ))
}

/// Needs no session: the first-user setup and sign-up forms ask it before anyone is signed in.
#[utoipa::path(post, path = "/api/v2/users/validate-password", tag = "Authorization",
    request_body = ValidateUserPasswordRequest,
    responses((status = 200, body = ValidateUserPasswordResponse)))]
pub(super) async fn validate_password(
    Json(req): Json<ValidateUserPasswordRequest>,
) -> Json<ValidateUserPasswordResponse> {
    let verdict = validate::password(&req.password);
    Json(ValidateUserPasswordResponse {
        valid: verdict.is_ok(),
        details: verdict.err().unwrap_or_default(),
    })
}

#[utoipa::path(get, path = "/api/v2/users/{user}/quiet-hours", tag = "Enterprise",
    params(("user" = String, Path)),
    responses((status = 200, body = UserQuietHoursScheduleResponse), (status = 404, body = codersdk::Response)))]
pub(super) async fn get_quiet_hours(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<UserQuietHoursScheduleResponse>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(user_settings::quiet_hours(
        &state,
        &auth.subject,
        &row,
    )?))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/quiet-hours", tag = "Enterprise",
    params(("user" = String, Path)), request_body = UpdateUserQuietHoursScheduleRequest,
    responses((status = 403, body = codersdk::Response, description = "Users share the deployment's quiet hours.")))]
pub(super) async fn update_quiet_hours(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(_req): Json<UpdateUserQuietHoursScheduleRequest>,
) -> ApiResult<Json<UserQuietHoursScheduleResponse>> {
    let row = resolve_user(&state, &auth, &user).await?;
    user_settings::update_quiet_hours(&auth.subject, &row)?;
    Ok(Json(user_settings::quiet_hours(
        &state,
        &auth.subject,
        &row,
    )?))
}

#[utoipa::path(get, path = "/api/v2/users/{user}/preferences", tag = "Users",
    params(("user" = String, Path)),
    responses((status = 200, body = UserPreferenceSettings), (status = 404, body = codersdk::Response)))]
pub(super) async fn get_preferences(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
) -> ApiResult<Json<UserPreferenceSettings>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        user_settings::preferences(&state, &auth.subject, &row).await?,
    ))
}

#[utoipa::path(put, path = "/api/v2/users/{user}/preferences", tag = "Users",
    params(("user" = String, Path)), request_body = UpdateUserPreferenceSettingsRequest,
    responses((status = 200, body = UserPreferenceSettings), (status = 400, body = codersdk::Response)))]
pub(super) async fn update_preferences(
    State(state): State<AppState>,
    auth: Auth,
    Path(user): Path<String>,
    Json(req): Json<UpdateUserPreferenceSettingsRequest>,
) -> ApiResult<Json<UserPreferenceSettings>> {
    let row = resolve_user(&state, &auth, &user).await?;
    Ok(Json(
        user_settings::update_preferences(&state, &auth.subject, &row, &req).await?,
    ))
}

#[utoipa::path(get, path = "/api/v2/users/oidc-claims", tag = "Users",
    responses((status = 200, body = OIDCClaimsResponse), (status = 400, body = codersdk::Response)))]
pub(super) async fn oidc_claims(
    State(state): State<AppState>,
    auth: Auth,
) -> ApiResult<Json<OIDCClaimsResponse>> {
    Ok(Json(OIDCClaimsResponse {
        claims: user_settings::oidc_claims(&state, &auth.user).await?,
    }))
}
