//! The configured providers, running: each with its long-lived OAuth2 client from
//! `oauth-client`, started with the core so every front door and the job payloads see the same
//! ones.

use std::sync::Arc;

use oauth_client::HttpClient;
use oauth_client::oauth2::{OAuth2Client, OAuth2Config};
use url::Url;

use super::config::ProviderSettings;

/// Where a provider sends the browser back: Coder's path, so an OAuth app registered for
/// Coder works unchanged.
pub fn callback_path(id: &str) -> String {
    format!("/external-auth/{id}/callback")
}

/// One provider and its client.
#[derive(Debug)]
pub struct Provider {
    pub settings: ProviderSettings,
    pub(super) client: OAuth2Client,
}

impl Provider {
    fn new(settings: ProviderSettings, access_url: &Url, http: HttpClient) -> Self {
        let redirect_url = access_url
            .join(&callback_path(&settings.id))
            .unwrap_or_else(|_| access_url.clone());
        let config = OAuth2Config {
            auth_url: settings.auth_url.clone(),
            token_url: settings.token_url.clone(),
            client_id: settings.client_id.clone(),
            client_secret: settings.client_secret.clone(),
            redirect_url,
            scopes: settings.scopes.clone(),
            // Coder asks for offline access so providers that gate refresh tokens on it
            // issue one.
            auth_url_params: vec![("access_type".into(), "offline".into())],
            credentials_in_body: false,
            pkce: settings.pkce,
            extra_token_keys: settings.extra_token_keys.clone(),
        };
        Self {
            client: OAuth2Client::new(&settings.id, config, http),
            settings,
        }
    }

    pub fn id(&self) -> &str {
        &self.settings.id
    }

    /// Where a person links this provider: the dashboard's page for it.
    pub fn authenticate_url(&self, access_url: &Url) -> String {
        format!(
            "{}/external-auth/{}",
            access_url.as_str().trim_end_matches('/'),
            self.settings.id
        )
    }

    /// What git sends as user name and password with this provider's token (Coder's mapping).
    pub fn git_credentials(&self, token: &str) -> (String, String) {
        match self.settings.r#type.as_str() {
            "gitlab" => ("oauth2".into(), token.into()),
            "bitbucket-cloud" | "bitbucket-server" => ("x-token-auth".into(), token.into()),
            _ => (token.into(), String::new()),
        }
    }
}

/// Every configured provider, in configuration order.
#[derive(Debug, Default, Clone)]
pub struct Providers {
    list: Arc<Vec<Provider>>,
}

impl Providers {
    pub fn start(
        settings: &[ProviderSettings],
        access_url: &Url,
    ) -> Result<Self, oauth_client::Error> {
        let http = HttpClient::new()?;
        Ok(Self {
            list: Arc::new(
                settings
                    .iter()
                    .map(|s| Provider::new(s.clone(), access_url, http.clone()))
                    .collect(),
            ),
        })
    }

    pub fn all(&self) -> &[Provider] {
        &self.list
    }

    pub fn get(&self, id: &str) -> Option<&Provider> {
        self.list.iter().find(|p| p.settings.id == id)
    }

    /// The provider for a git remote URL: the last whose regex matches, as in Coder.
    pub fn matching(&self, url: &str) -> Option<&Provider> {
        self.list
            .iter()
            .rev()
            .find(|p| p.settings.regex.is_match(url))
    }

    /// `id="regex"` for each provider, for the error that says none matched.
    pub fn describe_regexes(&self) -> String {
        self.list
            .iter()
            .map(|p| format!("{}={:?}", p.settings.id, p.settings.regex.as_str()))
            .collect::<Vec<_>>()
            .join(",")
    }
}
