//! Plain OAuth2 (RFC 6749) for providers that issue no ID token — GitHub sign-in and the git
//! providers of external auth: the same authorization-code flow with PKCE and `state` as
//! OIDC, and refresh. Who the person is comes from the provider's own API afterwards (see
//! `github`). The device flow and revocation are in `device` and `revoke`.

use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, ExtraTokenFields,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenUrl,
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
    /// Send a PKCE challenge (S256); off only for providers that reject one.
    pub pkce: bool,
    /// Fields of the token response, beyond the standard ones, to keep with the tokens
    /// (external auth's `EXTRA_TOKEN_KEYS`).
    pub extra_token_keys: Vec<String>,
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

/// Whatever a token response carries beyond RFC 6749's fields (serialised back with the
/// response, so the configured extra keys can be picked from the whole of it).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ExtraFields {
    #[serde(flatten)]
    fields: serde_json::Map<String, serde_json::Value>,
}

impl ExtraTokenFields for ExtraFields {}

type TokenResponse = StandardTokenResponse<ExtraFields, BasicTokenType>;

type Configured = oauth2::Client<
    BasicErrorResponse,
    TokenResponse,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
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

    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    pub(crate) fn credentials(&self) -> crate::http::ClientCredentials<'_> {
        crate::http::ClientCredentials {
            id: &self.config.client_id,
            secret: &self.config.client_secret,
            in_body: self.config.credentials_in_body,
        }
    }

    /// Tokens from a successful token response read by hand (the device flow's).
    pub(crate) fn tokens_from_json(&self, body: &[u8]) -> Result<TokenSet> {
        let response: TokenResponse = serde_json::from_slice(body)
            .map_err(|e| Error::Unavailable(format!("the token response is not valid: {e}")))?;
        Ok(self.with_extra(TokenSet::from_response(&response), &response))
    }

    fn client(&self) -> Configured {
        oauth2::Client::new(ClientId::new(self.config.client_id.clone()))
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
        let client = self.client();
        let mut request = client.authorize_url(CsrfToken::new_random);
        let mut verifier_secret = String::new();
        if self.config.pkce {
            let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
            request = request.set_pkce_challenge(challenge);
            verifier_secret = verifier.secret().clone();
        }
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
            verifier_secret,
            redirect,
        );
        (url, pending)
    }

    /// Exchanges the code the browser brought back (its state already checked).
    pub async fn finish(&self, pending: &PendingAuth, code: &str) -> Result<TokenSet> {
        let adapter = self.http.adapter();
        let client = self.client();
        let mut request = client.exchange_code(AuthorizationCode::new(code.to_string()));
        if !pending.pkce_verifier.is_empty() {
            request =
                request.set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()));
        }
        let response = request
            .request_async(&adapter)
            .await
            .map_err(crate::oidc::token_error)?;
        Ok(self.with_extra(TokenSet::from_response(&response), &response))
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
        Ok(self
            .with_extra(TokenSet::from_response(&response), &response)
            .keep_refresh_token_from(tokens))
    }

    /// Keeps the configured fields of a token response (standard ones like `scope` included).
    fn with_extra(&self, mut tokens: TokenSet, response: &TokenResponse) -> TokenSet {
        if self.config.extra_token_keys.is_empty() {
            return tokens;
        }
        let all = match serde_json::to_value(response) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        };
        tokens.extra = self
            .config
            .extra_token_keys
            .iter()
            .filter_map(|key| all.get(key).map(|v| (key.clone(), v.clone())))
            .collect();
        tokens
    }
}
