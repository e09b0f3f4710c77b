//! OpenID Connect relying party: discovery, the authorization-code flow with PKCE, `state` and
//! `nonce`, ID-token verification, userinfo, refresh. Verification is the `openidconnect`
//! crate's: the signature against the provider's published keys (RS/PS/ES/EdDSA only — never
//! `none`, never an HMAC keyed with our client secret), `iss` equal to the configured issuer,
//! our client id among the audiences and no untrusted other audience, `exp` in the future, our
//! `nonce`, and the access token's `at_hash` where present.

use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AccessToken, AccessTokenHash, AdditionalClaims, AuthorizationCode, ClaimsVerificationError,
    ClientId, ClientSecret, CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, IdTokenFields, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    SignatureVerificationError, StandardErrorResponse, StandardTokenResponse, TokenResponse,
};
use serde_json::{Map, Value};
use tokio::sync::RwLock;
use url::Url;

use crate::{Error, HttpClient, PendingAuth, Result, TokenSet};

/// Every claim the provider sent, beyond the standard ones the crate parses.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    rest: Map<String, Value>,
}
impl AdditionalClaims for ExtraClaims {}

type OidcTokenResponse = StandardTokenResponse<
    IdTokenFields<
        ExtraClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

type Client = openidconnect::Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    OidcTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Signature algorithms we accept on ID tokens: asymmetric ones only.
const ALGS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// The provider's keys are re-fetched at most this often when a token names an unknown key.
const REDISCOVER_AFTER: Duration = Duration::from_secs(30);

/// A relying party's settings.
#[derive(Clone)]
pub struct OidcConfig {
    pub issuer: Url,
    pub client_id: String,
    pub client_secret: String,
    /// Our callback, registered with the provider.
    pub redirect_url: Url,
    pub scopes: Vec<String>,
    /// Extra parameters of the authorization request (`access_type=offline`, `prompt`, ...).
    pub auth_url_params: Vec<(String, String)>,
    /// Use only the ID token's claims, never the userinfo endpoint's.
    pub ignore_userinfo: bool,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer.as_str())
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url.as_str())
            .field("scopes", &self.scopes)
            .field("auth_url_params", &self.auth_url_params)
            .field("ignore_userinfo", &self.ignore_userinfo)
            .finish()
    }
}

/// A verified sign-in: the provider's subject, every claim (ID token merged with userinfo,
/// userinfo winning, as Coder does), and the tokens.
#[derive(Debug, Clone)]
pub struct OidcIdentity {
    pub subject: String,
    pub claims: Map<String, Value>,
    pub tokens: TokenSet,
}

struct Discovered {
    client: Client,
    fetched_at: Instant,
}

/// An OpenID Connect provider. Discovery happens on first use (and again when the provider's
/// keys rotate), so coderd starts even while the provider is down.
pub struct OidcClient {
    config: OidcConfig,
    provider: String,
    http: HttpClient,
    discovered: RwLock<Option<Discovered>>,
}

impl std::fmt::Debug for OidcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcClient")
            .field("provider", &self.provider)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OidcClient {
    /// `provider` names this sign-in in its pending-auth cookie ("oidc").
    pub fn new(provider: &str, config: OidcConfig, http: HttpClient) -> Self {
        Self {
            config,
            provider: provider.to_string(),
            http,
            discovered: RwLock::new(None),
        }
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Fetches the provider's metadata and keys (again if `stale_after` has passed).
    async fn discover(&self, stale_after: Option<Duration>) -> Result<Client> {
        if let Some(d) = self.discovered.read().await.as_ref()
            && stale_after.is_none_or(|age| d.fetched_at.elapsed() < age)
        {
            return Ok(d.client.clone());
        }
        let mut slot = self.discovered.write().await;
        if let Some(d) = slot.as_ref()
            && stale_after.is_none_or(|age| d.fetched_at.elapsed() < age)
        {
            return Ok(d.client.clone());
        }
        let issuer = IssuerUrl::new(self.config.issuer.as_str().trim_end_matches('/').into())
            .map_err(|e| Error::Config(format!("issuer URL: {e}")))?;
        let adapter = self.http.adapter();
        let metadata = CoreProviderMetadata::discover_async(issuer, &adapter)
            .await
            .map_err(|e| {
                Error::Unavailable(format!(
                    "discovering {}: {}",
                    self.config.issuer,
                    error_chain(&e)
                ))
            })?;
        let redirect = RedirectUrl::from_url(self.config.redirect_url.clone());
        let client = Client::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            Some(ClientSecret::new(self.config.client_secret.clone())),
        )
        .set_redirect_uri(redirect);
        *slot = Some(Discovered {
            client: client.clone(),
            fetched_at: Instant::now(),
        });
        Ok(client)
    }

    /// Checks the provider is reachable and well configured (for a startup warning).
    pub async fn check(&self) -> Result<()> {
        self.discover(None).await.map(|_| ())
    }

    /// Where to send the browser, and what to remember until it comes back.
    pub async fn begin(&self, redirect: &str) -> Result<(Url, PendingAuth)> {
        let client = self.discover(None).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.config.scopes {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        for (name, value) in &self.config.auth_url_params {
            request = request.add_extra_param(name.clone(), value.clone());
        }
        let (url, state, nonce) = request.url();
        let pending = PendingAuth::new(
            &self.provider,
            state.secret().clone(),
            Some(nonce.secret().clone()),
            verifier.secret().clone(),
            redirect,
        );
        Ok((url, pending))
    }

    /// Exchanges the code the browser brought back, verifies the ID token, and reads userinfo.
    /// `pending` must come from [`PendingAuth::open`], which checked the state.
    pub async fn finish(&self, pending: &PendingAuth, code: &str) -> Result<OidcIdentity> {
        let client = self.discover(None).await?;
        let adapter = self.http.adapter();
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| Error::Config(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&adapter)
            .await
            .map_err(token_error)?;
        let nonce = Nonce::new(pending.nonce.clone().unwrap_or_default());
        let mut claims = match self.verify(&client, &response, &nonce) {
            Err(Error::InvalidToken(_)) if self.unknown_key(&client, &response) => {
                // The provider may have rotated its keys since we fetched them.
                let fresh = self.discover(Some(REDISCOVER_AFTER)).await?;
                self.verify(&fresh, &response, &nonce)?
            }
            other => other?,
        };
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !self.config.ignore_userinfo {
            for (k, v) in self
                .userinfo(&client, response.access_token(), &subject)
                .await?
            {
                if k != "sub" {
                    claims.insert(k, v);
                }
            }
        }
        Ok(OidcIdentity {
            subject,
            claims,
            tokens: TokenSet::from_response(&response),
        })
    }

    fn unknown_key(&self, client: &Client, response: &OidcTokenResponse) -> bool {
        let verifier = client.id_token_verifier();
        response.id_token().is_some_and(|t| {
            matches!(
                t.signing_key(&verifier),
                Err(SignatureVerificationError::NoMatchingKey)
            )
        })
    }

    fn verify(
        &self,
        client: &Client,
        response: &OidcTokenResponse,
        nonce: &Nonce,
    ) -> Result<Map<String, Value>> {
        let id_token = response.id_token().ok_or_else(|| {
            Error::InvalidToken(
                "the token response has no ID token (is the openid scope granted?)".into(),
            )
        })?;
        let verifier = client.id_token_verifier().set_allowed_algs(ALGS);
        let claims = id_token
            .claims(&verifier, nonce)
            .map_err(|e| Error::InvalidToken(describe_claims_error(&e)))?;
        if let Some(expected) = claims.access_token_hash() {
            let alg = id_token
                .signing_alg()
                .map_err(|e| Error::InvalidToken(e.to_string()))?;
            let key = id_token
                .signing_key(&verifier)
                .map_err(|e| Error::InvalidToken(e.to_string()))?;
            let actual = AccessTokenHash::from_token(response.access_token(), alg, key)
                .map_err(|e| Error::InvalidToken(e.to_string()))?;
            if &actual != expected {
                return Err(Error::InvalidToken(
                    "the ID token does not belong to the access token issued with it (at_hash)"
                        .into(),
                ));
            }
        }
        match serde_json::to_value(claims) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(Error::InvalidToken(
                "the ID token's claims are not an object".into(),
            )),
        }
    }

    async fn userinfo(
        &self,
        client: &Client,
        access_token: &AccessToken,
        subject: &str,
    ) -> Result<Map<String, Value>> {
        let Ok(request) = client.user_info(
            access_token.clone(),
            Some(openidconnect::SubjectIdentifier::new(subject.to_string())),
        ) else {
            // The provider has no userinfo endpoint: the ID token is all there is.
            return Ok(Map::new());
        };
        let adapter = self.http.adapter();
        let info: openidconnect::UserInfoClaims<ExtraClaims, CoreGenderClaim> = request
            .request_async(&adapter)
            .await
            .map_err(|e| Error::Unavailable(format!("userinfo: {}", error_chain(&e))))?;
        match serde_json::to_value(info) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Ok(Map::new()),
        }
    }

    /// Trades a refresh token for fresh tokens. A provider that rotates refresh tokens sends a
    /// new one; one that does not keeps the old one valid.
    pub async fn refresh(&self, tokens: &TokenSet) -> Result<TokenSet> {
        let refresh = tokens
            .refresh_token
            .as_ref()
            .ok_or_else(|| Error::Refused("no refresh token was issued".into()))?;
        let client = self.discover(None).await?;
        let adapter = self.http.adapter();
        let token = RefreshToken::new(refresh.clone());
        let response = client
            .exchange_refresh_token(&token)
            .map_err(|e| Error::Config(e.to_string()))?
            .request_async(&adapter)
            .await
            .map_err(token_error)?;
        Ok(TokenSet::from_response(&response).keep_refresh_token_from(tokens))
    }
}

/// A person-readable reason for a refused ID token.
fn describe_claims_error(e: &ClaimsVerificationError) -> String {
    match e {
        ClaimsVerificationError::Expired(_) => "the ID token has expired".into(),
        ClaimsVerificationError::InvalidAudience(_) => {
            "the ID token was issued to another client (audience mismatch)".into()
        }
        ClaimsVerificationError::InvalidIssuer(_) => {
            "the ID token was issued by another issuer".into()
        }
        ClaimsVerificationError::InvalidNonce(_) => {
            "the ID token was issued for another sign-in attempt (nonce mismatch)".into()
        }
        ClaimsVerificationError::SignatureVerification(
            SignatureVerificationError::NoMatchingKey,
        ) => "the ID token is signed with a key the identity provider does not publish".into(),
        ClaimsVerificationError::SignatureVerification(inner) => {
            format!("the ID token's signature does not verify ({inner})")
        }
        other => other.to_string(),
    }
}

/// Token endpoint failures: the provider's own refusal (a reused or expired code) is told
/// apart from not reaching it.
pub(crate) fn token_error<RE, T>(e: RequestTokenError<RE, T>) -> Error
where
    RE: std::error::Error + 'static,
    T: openidconnect::ErrorResponse + 'static,
{
    match e {
        RequestTokenError::ServerResponse(resp) => Error::Refused(resp.to_string()),
        RequestTokenError::Parse(e, body) => {
            // GitHub answers a refused exchange with 200 and an error document.
            #[derive(serde::Deserialize)]
            struct Refusal {
                error: String,
                #[serde(default)]
                error_description: String,
            }
            match serde_json::from_slice::<Refusal>(&body) {
                Ok(r) => Error::Refused(format!("{}: {}", r.error, r.error_description)),
                Err(_) => Error::Unavailable(format!("unreadable token response: {e}")),
            }
        }
        other => Error::Unavailable(error_chain(&other)),
    }
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
