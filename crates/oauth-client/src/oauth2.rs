//! Plain OAuth2 (RFC 6749) for providers that issue no ID token, such as GitHub: the same
//! authorization-code flow with PKCE and `state` as OIDC, and refresh. Who the person is comes
//! from the provider's own API afterwards (see `github`).

use oauth2::basic::BasicClient;
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenUrl,
};
use url::Url;

use crate::{Error, HttpClient, PendingAuth, Result, TokenSet};

#[derive(Clone)]
pub struct OAuth2Config {
    pub auth_url: Url,
    pub token_url: Url,
    pub client_id: String,
    pub client_secret: String,
    pub redirect_url: Url,
    pub scopes: Vec<String>,
    pub auth_url_params: Vec<(String, String)>,
    /// Send the client credentials in the token request's body rather than as HTTP Basic
    /// authentication (what GitHub documents).
    pub credentials_in_body: bool,
}

impl std::fmt::Debug for OAuth2Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2Config")
            .field("auth_url", &self.auth_url.as_str())
            .field("token_url", &self.token_url.as_str())
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url.as_str())
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct OAuth2Client {
    config: OAuth2Config,
    provider: String,
    http: HttpClient,
}

type Configured = BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

impl OAuth2Client {
    pub fn new(provider: &str, config: OAuth2Config, http: HttpClient) -> Self {
        Self {
            config,
            provider: provider.to_string(),
            http,
        }
    }

    pub fn config(&self) -> &OAuth2Config {
        &self.config
    }

    fn client(&self) -> Configured {
        BasicClient::new(ClientId::new(self.config.client_id.clone()))
            .set_client_secret(ClientSecret::new(self.config.client_secret.clone()))
            .set_auth_uri(AuthUrl::from_url(self.config.auth_url.clone()))
            .set_token_uri(TokenUrl::from_url(self.config.token_url.clone()))
            .set_redirect_uri(RedirectUrl::from_url(self.config.redirect_url.clone()))
            .set_auth_type(if self.config.credentials_in_body {
                AuthType::RequestBody
            } else {
                AuthType::BasicAuth
            })
    }

    /// Where to send the browser, and what to remember until it comes back.
    pub fn begin(&self, redirect: &str) -> (Url, PendingAuth) {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let client = self.client();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge);
        for scope in &self.config.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        for (name, value) in &self.config.auth_url_params {
            request = request.add_extra_param(name.clone(), value.clone());
        }
        let (url, state) = request.url();
        let pending = PendingAuth::new(
            &self.provider,
            state.secret().clone(),
            None,
            verifier.secret().clone(),
            redirect,
        );
        (url, pending)
    }

    /// Exchanges the code the browser brought back (its state already checked).
    pub async fn finish(&self, pending: &PendingAuth, code: &str) -> Result<TokenSet> {
        let adapter = self.http.adapter();
        let response = self
            .client()
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&adapter)
            .await
            .map_err(crate::oidc::token_error)?;
        Ok(TokenSet::from_response(&response))
    }

    pub async fn refresh(&self, tokens: &TokenSet) -> Result<TokenSet> {
        let refresh = tokens
            .refresh_token
            .as_ref()
            .ok_or_else(|| Error::Refused("no refresh token was issued".into()))?;
        let adapter = self.http.adapter();
        let token = RefreshToken::new(refresh.clone());
        let response = self
            .client()
            .exchange_refresh_token(&token)
            .request_async(&adapter)
            .await
            .map_err(crate::oidc::token_error)?;
        Ok(TokenSet::from_response(&response).keep_refresh_token_from(tokens))
    }
}
