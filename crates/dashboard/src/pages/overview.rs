//! `/deployment/overview`: the server's options, their values and where each came from
//! (`domain::deployment_config`), for those who may read the deployment's configuration; others
//! get 404, as they cannot tell the page exists.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use coderd_core::deployment_options::{DeploymentOption, ValueSource};
use coderd_core::domain::deployment_config;
use coderd_core::state::AppState;

use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::Chrome;

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    chrome: Chrome,
    options: Vec<DeploymentOption>,
}

/// How the page names a source.
pub fn source_label(source: &ValueSource) -> &'static str {
    match source {
        ValueSource::None => "unset",
        ValueSource::Default => "default",
        ValueSource::Flag => "flag",
        ValueSource::Env => "environment",
    }
}

pub async fn show(State(state): State<AppState>, viewer: Viewer) -> PageResult<OverviewPage> {
    let options = deployment_config::options(&state, viewer.subject()).map_err(|e| match e {
        coderd_core::domain::Error::Forbidden { .. } => PageError::NotFound,
        other => other.into(),
    })?;
    Ok(OverviewPage {
        chrome: Chrome::of(&viewer),
        // Hidden options are tuning for tests and operators, not part of `--help` either.
        options: options.into_iter().filter(|o| !o.hidden).collect(),
    })
}
