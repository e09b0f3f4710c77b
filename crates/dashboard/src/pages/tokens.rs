//! `/settings/tokens`: the signed-in user's API tokens (name, last used, expiry), a form to
//! create one — its secret shown once, on the page that answers the form, never again — and a
//! delete button per token. The rules are `domain::tokens`', the API's.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use coderd_core::domain::tokens;
use coderd_core::state::AppState;
use codersdk::apikeys::{ApiKey, CreateTokenRequest, NANOS_PER_SECOND};
use serde::Deserialize;

use super::{CsrfForm, FieldErrors};
use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::Chrome;

/// The lifetimes offered, in days (0: the deployment's default).
const LIFETIMES: &[(i64, &str)] = &[
    (0, "Deployment default"),
    (7, "7 days"),
    (30, "30 days"),
    (90, "90 days"),
    (365, "1 year"),
];

pub struct TokenRow {
    pub key: ApiKey,
    pub last_used: String,
    pub expires: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "tokens.html")]
pub struct TokensPage {
    chrome: Chrome,
    tokens: Vec<TokenRow>,
    lifetimes: &'static [(i64, &'static str)],
    /// The secret of the token just created: shown this once.
    created: String,
    name: String,
    errors: FieldErrors,
    other_errors: Vec<String>,
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    created: String,
    name: String,
    errors: FieldErrors,
) -> PageResult<TokensPage> {
    let keys = tokens::list(state, viewer.subject(), &viewer.session.user).await?;
    let tokens = keys
        .into_iter()
        .map(|key| TokenRow {
            // A key never used carries its creation time (Coder's zero time) as last use.
            last_used: if key.last_used <= key.created_at {
                "Never".to_owned()
            } else {
                key.last_used.format("%Y-%m-%d %H:%M UTC").to_string()
            },
            expires: key.expires_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            key,
        })
        .collect();
    let other_errors = errors.others(&["token_name", "lifetime"]);
    Ok(TokensPage {
        chrome: Chrome::of(viewer),
        tokens,
        lifetimes: LIFETIMES,
        created,
        name,
        errors,
        other_errors,
    })
}

pub async fn list(State(state): State<AppState>, viewer: Viewer) -> PageResult<TokensPage> {
    page(
        &state,
        &viewer,
        String::new(),
        String::new(),
        FieldErrors::default(),
    )
    .await
}

#[derive(Debug, Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    lifetime_days: i64,
}

pub async fn create(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<CreateForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    let req = CreateTokenRequest {
        lifetime: form.lifetime_days.saturating_mul(86_400 * NANOS_PER_SECOND),
        scope: String::new(),
        token_name: form.name.clone(),
    };
    let refused = match coderd_http::requests::create_token(&req) {
        Err(refused) => FieldErrors::from_validations(refused.body.validations),
        Ok(()) => {
            let user = &viewer.session.user;
            match tokens::create(
                &state,
                viewer.subject(),
                user,
                &req.token_name,
                req.lifetime,
            )
            .await
            {
                Ok(secret) => {
                    let page = page(
                        &state,
                        &viewer,
                        secret,
                        String::new(),
                        FieldErrors::default(),
                    )
                    .await?;
                    return Ok((StatusCode::CREATED, page).into_response());
                }
                Err(coderd_core::domain::Error::Validation(v)) => FieldErrors::from_validations(v),
                Err(coderd_core::domain::Error::Conflict { message, .. }) => {
                    let mut errors = FieldErrors::default();
                    errors.push("token_name", message);
                    let page = page(&state, &viewer, String::new(), form.name, errors).await?;
                    return Ok((StatusCode::CONFLICT, page).into_response());
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let page = page(&state, &viewer, String::new(), form.name, refused).await?;
    Ok((StatusCode::BAD_REQUEST, page).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    tokens::delete(&state, viewer.subject(), &viewer.session.user, &id).await?;
    Ok(Redirect::to("/settings/tokens").into_response())
}
