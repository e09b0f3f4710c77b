//! The account's git settings, at Coder's URLs: `/settings/external-auth` (each provider, linked
//! or not, with link and unlink) and `/settings/ssh-keys` (the git SSH public key, with
//! regenerate). The rules are `coderd_core::external_auth`'s, the API's.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use coderd_core::external_auth::{self as external, LinkState};
use coderd_core::state::AppState;
use codersdk::externalauth::GitSshKey;

use super::CsrfForm;
use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::Chrome;

pub struct ProviderRow {
    pub id: String,
    pub name: String,
    pub icon: String,
    pub linked: bool,
    /// Why a link does not work, when it does not.
    pub problem: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "external_auth.html")]
pub struct ExternalAuthPage {
    chrome: Chrome,
    providers: Vec<ProviderRow>,
}

pub async fn external_auth(
    State(state): State<AppState>,
    viewer: Viewer,
) -> PageResult<ExternalAuthPage> {
    let user = viewer.session.user.id;
    let mut providers = Vec::new();
    for provider in state.external_auth.all() {
        let (linked, problem) = match external::links::token(&state, user, provider, true).await {
            Ok(LinkState::Valid(_)) => (true, String::new()),
            Ok(LinkState::NotLinked) => (false, String::new()),
            Ok(LinkState::Invalid(reason)) => (false, reason),
            Err(e) => (false, e.to_string()),
        };
        providers.push(ProviderRow {
            id: provider.settings.id.clone(),
            name: provider.settings.display_name.clone(),
            icon: provider.settings.display_icon.clone(),
            linked,
            problem,
        });
    }
    Ok(ExternalAuthPage {
        chrome: Chrome::of(&viewer),
        providers,
    })
}

pub async fn unlink(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    external::unlink(&state, viewer.session.user.id, &id).await?;
    Ok(Redirect::to("/settings/external-auth").into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "ssh_keys.html")]
pub struct SshKeysPage {
    chrome: Chrome,
    key: GitSshKey,
}

pub async fn ssh_keys(State(state): State<AppState>, viewer: Viewer) -> PageResult<SshKeysPage> {
    let key = external::gitsshkey::get(&state, viewer.session.user.id).await?;
    Ok(SshKeysPage {
        chrome: Chrome::of(&viewer),
        key,
    })
}

pub async fn regenerate_ssh_key(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> PageResult<Response> {
    viewer.check_form(&headers, &form.csrf)?;
    external::gitsshkey::regenerate(&state, viewer.session.user.id).await?;
    Ok(Redirect::to("/settings/ssh-keys").into_response())
}
