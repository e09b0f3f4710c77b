//! Where the deployment's workspace apps live: the app settings (path apps, the wildcard access
//! URL, the key sealing app tokens), the app host names of the wildcard scheme ([`host`]) and
//! an app's subdomain as every front door shows it. The proxy that serves these URLs is the
//! relay crate's; the domain layer renders the names, so they live below both.

pub mod host;

use std::sync::Arc;

use oauth_client::KeyRing;

pub use host::{AppHost, AppName, Wildcard};

/// The deployment's app settings.
#[derive(Clone)]
pub struct Settings {
    /// `--disable-path-apps`: apps only on subdomains.
    pub disable_path_apps: bool,
    /// `--dangerous-allow-path-app-sharing`: path apps keep their sharing level (otherwise
    /// owner-only: they share the dashboard's origin).
    pub allow_path_app_sharing: bool,
    /// `--dangerous-allow-path-app-site-owner-access`: site owners may open others' path apps.
    pub allow_path_app_site_owner_access: bool,
    /// `--wildcard-access-url`: where subdomain apps live; without it they are unavailable.
    pub wildcard: Option<Wildcard>,
    /// Seal app tokens and the keys handed to app hosts. [`AppState::start`] replaces the
    /// default (a key of this process's own) with the deployment's key from the database, so
    /// every replica opens what another sealed, and a restart keeps browsers signed in.
    pub keys: Arc<KeyRing>,
    /// How long an app may take to send its response's head (its body may stream for as long
    /// as it likes): a hung app must not pin a request forever.
    pub response_timeout: std::time::Duration,
}

/// Where the deployment's app key is kept (`site_configs`).
const KEY_NAME: &str = "app_signing_key";

/// The deployment's app key, created by the first replica that asks.
pub async fn deployment_keys(store: &coderd_store::Store) -> Result<KeyRing, coderd_store::Error> {
    let secret = store.site_secret(KEY_NAME, KeyRing::generate_key).await?;
    Ok(KeyRing::from_base64(&[secret]).unwrap_or_else(|e| {
        // Only a hand-edited database gets here; apps still open through this replica.
        tracing::error!(error = %e, "the stored app key is damaged; using a temporary one");
        KeyRing::ephemeral()
    }))
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            disable_path_apps: false,
            allow_path_app_sharing: false,
            allow_path_app_site_owner_access: false,
            wildcard: None,
            keys: Arc::new(KeyRing::ephemeral()),
            response_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("disable_path_apps", &self.disable_path_apps)
            .field("allow_path_app_sharing", &self.allow_path_app_sharing)
            .field(
                "allow_path_app_site_owner_access",
                &self.allow_path_app_site_owner_access,
            )
            .field("wildcard", &self.wildcard.as_ref().map(ToString::to_string))
            .finish_non_exhaustive()
    }
}

/// The subdomain of an app, as the API shows it (`None` without a wildcard access URL).
pub fn subdomain_name(
    settings: &Settings,
    slug: &str,
    agent: &str,
    workspace: &str,
    user: &str,
) -> Option<String> {
    settings.wildcard.as_ref()?;
    let host = AppHost {
        app: AppName::Slug(slug.to_ascii_lowercase()),
        agent: agent.to_ascii_lowercase(),
        workspace: workspace.to_ascii_lowercase(),
        user: user.to_ascii_lowercase(),
    };
    let label = host.label();
    // Names hosts cannot carry (a username with `_`) have no subdomain.
    (AppHost::parse(&label).as_ref() == Some(&host)).then_some(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_names_exist_only_with_a_wildcard_and_host_safe_names() {
        let mut s = Settings::default();
        assert_eq!(subdomain_name(&s, "code", "main", "dev", "alice"), None);
        s.wildcard =
            Some(Wildcard::parse("*.apps.example.com", "http").expect("test input is valid"));
        assert_eq!(
            subdomain_name(&s, "code", "main", "dev", "Alice").as_deref(),
            Some("code--main--dev--alice")
        );
        assert_eq!(subdomain_name(&s, "code", "main", "dev", "a_b"), None);
    }
}
