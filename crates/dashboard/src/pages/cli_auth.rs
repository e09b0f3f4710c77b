//! `/cli-auth`: Coder's way for `coder login` to get a session on a deployment that signs in
//! through an identity provider. The CLI prints this page's URL; the person signs in in the
//! browser (the page sends them through `/login` and back), presses the button, and pastes the
//! session token shown into the CLI. The token is minted by a POST carrying the session's form
//! token, so another site cannot make a browser mint one, and is shown once.

use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::State;
use axum::http::HeaderMap;
use coderd_core::domain::tokens;
use coderd_core::state::AppState;
use codersdk::users::LoginType;
use serde::Deserialize;

use crate::error::PageResult;
use crate::session::Viewer;
use crate::view::Chrome;

#[derive(Template, WebTemplate)]
#[template(path = "cli_auth.html")]
pub struct CliAuthPage {
    chrome: Chrome,
    csrf: String,
    /// The new session token, once minted.
    token: String,
}

pub async fn page(viewer: Viewer) -> CliAuthPage {
    CliAuthPage {
        chrome: Chrome::of(&viewer),
        csrf: viewer.csrf.clone(),
        token: String::new(),
    }
}

#[derive(Debug, Deserialize)]
pub struct CliAuthForm {
    #[serde(default)]
    csrf: String,
}

pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    viewer: Viewer,
    Form(form): Form<CliAuthForm>,
) -> PageResult<CliAuthPage> {
    viewer.check_form(&headers, &form.csrf)?;
    // A session like the browser's own: the same login type, the deployment's session length.
    let login_type = viewer
        .session
        .key
        .login_type
        .parse()
        .unwrap_or(LoginType::Password);
    let token =
        tokens::create_session(&state, viewer.subject(), &viewer.session.user, login_type).await?;
    Ok(CliAuthPage {
        chrome: Chrome::of(&viewer),
        csrf: viewer.csrf.clone(),
        token,
    })
}
