//! `/health`: the deployment's health report (`domain::health`), for those who may read the
//! deployment's configuration; others get 404, as they cannot tell the page exists.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use coderd_core::domain::health::{self, Report, Severity};
use coderd_core::state::AppState;

use crate::error::{PageError, PageResult};
use crate::session::Viewer;
use crate::view::Chrome;

#[derive(Template, WebTemplate)]
#[template(path = "health.html")]
pub struct HealthPage {
    chrome: Chrome,
    report: Report,
}

/// The badge class and words of a severity.
pub fn badge(severity: &Severity) -> (&'static str, &'static str) {
    match severity {
        Severity::Ok => ("ok", "Healthy"),
        Severity::Warning => ("warn", "Warning"),
        Severity::Error => ("bad", "Unhealthy"),
    }
}

pub async fn show(State(state): State<AppState>, viewer: Viewer) -> PageResult<HealthPage> {
    let report = health::report(&state, viewer.subject())
        .await
        .map_err(|e| match e {
            // Not an owner: the page is not theirs to know about.
            coderd_core::domain::Error::Forbidden { .. } => PageError::NotFound,
            other => other.into(),
        })?;
    Ok(HealthPage {
        chrome: Chrome::of(&viewer),
        report,
    })
}
