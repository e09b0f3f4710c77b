//! The deployment's appearance: its name, logo, banners and support links (Premium in Coder,
//! free here). Kept as one JSON value in `site_configs`; every replica reads the same.

use codersdk::ValidationError;
use codersdk::appearance::{AppearanceConfig, LinkConfig, UpdateAppearanceConfig};

use super::{Error, Result};
use crate::state::AppState;
use coderd_authz::{Action, Object, Resource, Subject};

const KEY: &str = "appearance";
const DOCS_URL: &str = "https://coder.com/docs";
/// The longest application name: it is shown in page titles and the plugins' headers.
const MAX_NAME: usize = 64;

/// The appearance everyone sees (signed in or not: the sign-in page shows it too).
pub async fn get(state: &AppState) -> Result<AppearanceConfig> {
    let saved: UpdateAppearanceConfig = match state.store.site_config(KEY).await? {
        Some(json) => serde_json::from_str(&json).map_err(Error::internal)?,
        None => UpdateAppearanceConfig::default(),
    };
    Ok(AppearanceConfig {
        application_name: saved.application_name,
        logo_url: saved.logo_url,
        docs_url: DOCS_URL.into(),
        hide_codernauts: saved.hide_codernauts,
        service_banner: saved.service_banner,
        announcement_banners: saved.announcement_banners,
        support_links: vec![
            LinkConfig {
                name: "Documentation".into(),
                target: DOCS_URL.into(),
                icon: "docs".into(),
                location: "navbar".into(),
            },
            LinkConfig {
                name: "Report a bug".into(),
                target: "https://github.com/coder-rs/coder-rs/issues".into(),
                icon: "bug".into(),
                location: "navbar".into(),
            },
        ],
    })
}

/// Replaces the appearance; deployment administrators only.
pub async fn update(
    state: &AppState,
    subject: &Subject,
    update: &UpdateAppearanceConfig,
) -> Result<AppearanceConfig> {
    // Everyone sees the appearance, so a refusal is a 403, not a 404.
    if !subject.can(Action::Update, &Object::site(Resource::DeploymentConfig)) {
        return Err(Error::forbidden(
            "Only deployment administrators may change the appearance.",
        ));
    }
    let invalid = validate(update);
    if !invalid.is_empty() {
        return Err(Error::Validation(invalid));
    }
    let json = serde_json::to_string(update).map_err(Error::internal)?;
    state.store.set_site_config(KEY, &json).await?;
    get(state).await
}

fn validate(update: &UpdateAppearanceConfig) -> Vec<ValidationError> {
    let mut invalid = Vec::new();
    let mut refuse = |field: String, detail: &str| {
        invalid.push(ValidationError {
            field,
            detail: detail.into(),
        })
    };
    if update.application_name.chars().count() > MAX_NAME {
        refuse(
            "application_name".into(),
            "must be at most 64 characters long",
        );
    }
    if !update.logo_url.is_empty() && !is_image_url(&update.logo_url) {
        refuse(
            "logo_url".into(),
            "must be an http(s) URL or a path on this deployment",
        );
    }
    let banners = std::iter::once(("service_banner".to_string(), &update.service_banner)).chain(
        update
            .announcement_banners
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("announcement_banners[{i}]"), b)),
    );
    for (field, banner) in banners {
        if !banner.background_color.is_empty() && !is_hex_colour(&banner.background_color) {
            refuse(
                format!("{field}.background_color"),
                "must be a colour like #004852",
            );
        }
    }
    invalid
}

fn is_image_url(url: &str) -> bool {
    url.starts_with('/') || url.starts_with("https://") || url.starts_with("http://")
}

fn is_hex_colour(colour: &str) -> bool {
    colour
        .strip_prefix('#')
        .is_some_and(|hex| hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use codersdk::appearance::BannerConfig;

    use super::*;

    #[test]
    fn names_urls_and_colours_are_checked() {
        let good = UpdateAppearanceConfig {
            application_name: "Acme Dev".into(),
            logo_url: "https://acme.example/logo.svg".into(),
            service_banner: BannerConfig {
                enabled: true,
                message: "maintenance at 6".into(),
                background_color: "#00aa4F".into(),
            },
            ..Default::default()
        };
        assert!(validate(&good).is_empty());
        let bad = UpdateAppearanceConfig {
            application_name: "x".repeat(65),
            logo_url: "javascript:alert(1)".into(),
            announcement_banners: vec![BannerConfig {
                enabled: true,
                message: "hi".into(),
                background_color: "red".into(),
            }],
            ..Default::default()
        };
        let fields: Vec<_> = validate(&bad).into_iter().map(|v| v.field).collect();
        assert_eq!(
            fields,
            [
                "application_name",
                "logo_url",
                "announcement_banners[0].background_color"
            ]
        );
    }
}
