//! `/templates`: the templates the viewer may see, each with a link to create a workspace.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use coderd_authz::Resource;
use coderd_core::domain::views;
use coderd_core::state::AppState;
use codersdk::templates::Template as SdkTemplate;

use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::Chrome;

#[derive(Template, WebTemplate)]
#[template(path = "templates.html")]
pub struct TemplatesPage {
    chrome: Chrome,
    templates: Vec<SdkTemplate>,
}

pub async fn list(State(state): State<AppState>, viewer: Viewer) -> PageResult<TemplatesPage> {
    let filter = viewer.subject().filter(Resource::Template);
    let rows = state
        .store
        .list_templates(&filter, None)
        .await
        .map_err(|e| PageError::from(coderd_core::domain::Error::from(e)))?;
    Ok(TemplatesPage {
        chrome: Chrome::of(&viewer),
        templates: views::templates(&state, rows).await?,
    })
}
