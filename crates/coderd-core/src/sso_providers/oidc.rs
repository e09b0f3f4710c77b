//! The OIDC login's settings, resolved from Coder's `CODER_OIDC_*` options (see
//! `config::ServerConfig`), with Coder's defaults.

use oauth_client::oidc::OidcConfig;
use url::Url;

/// Where the provider sends the browser back (registered with the provider).
pub const CALLBACK_PATH: &str = "/api/v2/users/oidc/callback";

/// How the deployment signs people in through an OpenID provider.
#[derive(Clone)]
pub struct OidcSettings {
    pub issuer: Url,
    pub client_id: String,
    pub client_secret: String,
    /// Only emails in these domains may sign in (empty: any).
    pub email_domains: Vec<String>,
    /// Create users on their first sign-in (else an administrator creates them first).
    pub allow_signups: bool,
    pub scopes: Vec<String>,
    /// Accept emails the provider says are not verified.
    pub ignore_email_verified: bool,
    /// The claims the username, email and display name are read from.
    pub username_field: String,
    pub email_field: String,
    pub name_field: String,
    /// Extra parameters of the authorization request.
    pub auth_url_params: Vec<(String, String)>,
    /// Use only the ID token's claims, never the userinfo endpoint's.
    pub ignore_userinfo: bool,
    /// The login button's text and icon.
    pub sign_in_text: String,
    pub icon_url: String,
    /// Group sync from a claim (off unless its field is set).
    pub groups: super::group_sync::GroupSyncSettings,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer.as_str())
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("email_domains", &self.email_domains)
            .field("allow_signups", &self.allow_signups)
            .field("scopes", &self.scopes)
            .field("ignore_email_verified", &self.ignore_email_verified)
            .field("username_field", &self.username_field)
            .field("email_field", &self.email_field)
            .field("name_field", &self.name_field)
            .field("auth_url_params", &self.auth_url_params)
            .field("ignore_userinfo", &self.ignore_userinfo)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl OidcSettings {
    /// A provider with Coder's defaults for everything else.
    pub fn new(issuer: Url, client_id: String, client_secret: String) -> Self {
        Self {
            issuer,
            client_id,
            client_secret,
            email_domains: Vec::new(),
            allow_signups: true,
            scopes: ["openid", "profile", "email"].map(String::from).to_vec(),
            ignore_email_verified: false,
            username_field: "preferred_username".into(),
            email_field: "email".into(),
            name_field: "name".into(),
            auth_url_params: vec![("access_type".into(), "offline".into())],
            ignore_userinfo: false,
            sign_in_text: "OpenID Connect".into(),
            icon_url: String::new(),
            groups: Default::default(),
        }
    }

    /// The relying party's configuration, with our callback under `access_url`.
    pub(super) fn client_config(&self, access_url: &Url) -> OidcConfig {
        let mut redirect_url = access_url.clone();
        redirect_url.set_path(CALLBACK_PATH);
        redirect_url.set_query(None);
        OidcConfig {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            redirect_url,
            scopes: self.scopes.clone(),
            auth_url_params: self.auth_url_params.clone(),
            ignore_userinfo: self.ignore_userinfo,
        }
    }
}
