//! The dashboard's pages, one module per area; each handler parses its input, calls coderd's
//! domain layer with the viewer's subject, and renders a template.

pub mod admin;
pub mod auth;
pub mod builds;
pub mod cli_auth;
pub mod create;
pub mod git;
pub mod health;
pub mod overview;
pub mod provisioning;
pub mod template;
pub mod templates;
pub mod terminal;
pub mod tokens;
pub mod users;
pub mod workspace;
pub mod workspaces;

use axum::response::Redirect;
use serde::Deserialize;

use crate::error::PageError;

/// `/` is the workspace list, as in Coder.
pub async fn root() -> Redirect {
    Redirect::to("/workspaces")
}

pub async fn not_found() -> PageError {
    PageError::NotFound
}

/// A form that carries nothing but its CSRF token (a button that changes something).
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// Field errors shown beside their inputs, by field name.
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<(String, String)>);

impl FieldErrors {
    pub fn from_validations(validations: Vec<codersdk::ValidationError>) -> Self {
        Self(
            validations
                .into_iter()
                .map(|v| (v.field, v.detail))
                .collect(),
        )
    }

    pub fn push(&mut self, field: &str, detail: impl Into<String>) {
        self.0.push((field.to_owned(), detail.into()));
    }

    /// The message for `field`, or "" (templates test emptiness).
    pub fn get(&self, field: &str) -> &str {
        self.0
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, d)| d.as_str())
            .unwrap_or("")
    }

    /// Errors not tied to a field the form shows.
    pub fn others(&self, shown: &[&str]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(f, _)| !shown.contains(&f.as_str()))
            .map(|(f, d)| format!("{f}: {d}"))
            .collect()
    }
}
