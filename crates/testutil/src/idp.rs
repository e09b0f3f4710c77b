//! A real OpenID provider on loopback for the tests (the certified `oidc-provider` npm package
//! under the machine's Node, installed by `scripts/setup.sh --tests`; see `idp/provider.mjs`),
//! and a cookie-keeping browser to walk sign-ins through it. The same provider is the OAuth 2.0
//! "git provider" of the external auth tests (device flow, introspection, revocation, short-lived
//! access tokens, and the token check behind `crate::gitserver::GitServer`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::cookie::{CookieStore, Jar};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use url::Url;

const SCRIPT: &str = include_str!("../idp/provider.mjs");

/// Where `scripts/setup.sh --tests` installs oidc-provider.
pub fn install_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CODER_TEST_IDP_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/coder-rs/oidc-provider")
}

/// How the next ID token is damaged on its way to coderd.
#[derive(Debug, Clone, Copy)]
pub enum Tamper {
    /// Re-signed with a key the provider does not publish (same key id).
    BadSignature,
    /// Re-signed by the provider's key for another client.
    WrongAudience,
    /// Re-signed by the provider's key, expired an hour ago.
    Expired,
}

/// How a client registered for external auth authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A confidential client with a secret, sent in HTTP Basic or in the form body (the provider
    /// takes either).
    Secret,
    /// A public client (`none`): the client id alone, as Coder's device flow sends it to
    /// github.com. The provider refuses a secret from such a client.
    Public,
}

/// The provider's OAuth 2.0 endpoints (the package's default routes), for an external auth
/// configuration.
#[derive(Debug, Clone)]
pub struct OAuth2Endpoints {
    pub authorize: Url,
    pub token: Url,
    /// RFC 8628 device authorization (Coder's `device_code_url`).
    pub device_authorization: Url,
    /// RFC 7009 revocation.
    pub revocation: Url,
    /// RFC 7662 introspection.
    pub introspection: Url,
    pub userinfo: Url,
    /// `GET` with `Authorization: Bearer <token>`: 200 while the access token is live, 401
    /// otherwise (Coder's `validate_url`).
    pub validate: Url,
}

/// What the provider counted since it started.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
pub struct IdpStats {
    /// Successful `grant_type=refresh_token` token responses.
    pub refreshes: u64,
    /// Device codes approved with [`TestIdp::approve_device`].
    pub device_approvals: u64,
    /// Git requests `/_test/git-auth` let through.
    pub git_auth_allowed: u64,
    /// Git requests `/_test/git-auth` refused.
    pub git_auth_denied: u64,
}

/// The provider process; killed when dropped.
pub struct TestIdp {
    pub issuer: Url,
    api: reqwest::Client,
    _child: Child,
}

impl TestIdp {
    /// Starts the provider. Not having it installed is a failure, never a skip.
    pub async fn start() -> anyhow::Result<Self> {
        let dir = install_dir();
        if !dir
            .join("node_modules/oidc-provider/package.json")
            .is_file()
        {
            bail!(
                "oidc-provider is not installed in {} (scripts/setup.sh --tests installs it with the machine's Node and npm)",
                dir.display()
            );
        }
        let mut child = Command::new("node")
            .args(["--input-type=module", "-e", SCRIPT])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting node (the test OpenID provider)")?;
        let stdout = child.stdout.take().context("provider stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("the test OpenID provider did not start within 30 s")??
            .context("the test OpenID provider exited before it was ready")?;
        let issuer = ready
            .strip_prefix("READY ")
            .with_context(|| format!("unexpected provider output {ready:?}"))?;
        // Keep reading so the pipe never fills.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            issuer: Url::parse(issuer)?,
            api: reqwest::Client::new(),
            _child: child,
        })
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .api
            .post(self.issuer.join(path)?)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("{path}: {status} {body}");
        }
        Ok(body)
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let response = self.api.get(self.issuer.join(path)?).send().await?;
        let status = response.status();
        let body: Value = response.json().await?;
        if !status.is_success() {
            bail!("{path}: {status} {body}");
        }
        Ok(body)
    }

    /// Registers a confidential client (RFC 7591 dynamic registration): `(id, secret)`.
    pub async fn register_client(&self, redirect_uri: &str) -> anyhow::Result<(String, String)> {
        let client = self
            .post(
                "/reg",
                json!({
                    "redirect_uris": [redirect_uri],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "client_secret_basic",
                }),
            )
            .await?;
        let field = |name: &str| {
            client[name]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("registration response without {name}: {client}"))
        };
        Ok((field("client_id")?, field("client_secret")?))
    }

    /// Stops the provider, as an outage would (its port stops answering).
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self._child.kill().await?;
        Ok(())
    }

    /// Registers a client for external auth (RFC 7591 dynamic registration) allowed the
    /// authorization code, refresh token and device code grants: `(id, secret)`, the secret
    /// `None` for a [`ClientAuth::Public`] client.
    pub async fn register_git_client(
        &self,
        redirect_uri: &str,
        auth: ClientAuth,
    ) -> anyhow::Result<(String, Option<String>)> {
        let method = match auth {
            ClientAuth::Secret => "client_secret_basic",
            ClientAuth::Public => "none",
        };
        let client = self
            .post(
                "/reg",
                json!({
                    "redirect_uris": [redirect_uri],
                    "grant_types": [
                        "authorization_code",
                        "refresh_token",
                        "urn:ietf:params:oauth:grant-type:device_code",
                    ],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": method,
                }),
            )
            .await?;
        let id = client["client_id"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("registration response without client_id: {client}"))?;
        let secret = match auth {
            ClientAuth::Secret => Some(
                client["client_secret"]
                    .as_str()
                    .map(str::to_string)
                    .with_context(|| {
                        format!("registration response without client_secret: {client}")
                    })?,
            ),
            ClientAuth::Public => None,
        };
        Ok((id, secret))
    }

    /// The provider's OAuth 2.0 endpoints.
    pub fn oauth2_endpoints(&self) -> anyhow::Result<OAuth2Endpoints> {
        Ok(OAuth2Endpoints {
            authorize: self.issuer.join("/auth")?,
            token: self.issuer.join("/token")?,
            device_authorization: self.issuer.join("/device/auth")?,
            revocation: self.issuer.join("/token/revocation")?,
            introspection: self.issuer.join("/token/introspection")?,
            userinfo: self.issuer.join("/me")?,
            validate: self.issuer.join("/_test/validate")?,
        })
    }

    /// How long access tokens issued from now on live (`None`: the package's default, an
    /// hour). Whole seconds, at least one.
    pub async fn set_access_token_ttl(&self, ttl: Option<Duration>) -> anyhow::Result<()> {
        let seconds = ttl.map(|ttl| ttl.as_secs().max(1));
        self.post(
            "/_test/config",
            json!({ "access_token_ttl_seconds": seconds }),
        )
        .await
        .map(|_| ())
    }

    /// What the provider counted since it started.
    pub async fn stats(&self) -> anyhow::Result<IdpStats> {
        Ok(serde_json::from_value(self.get("/_test/stats").await?)?)
    }

    /// Successful refresh-token grants served since the provider started.
    pub async fn refresh_count(&self) -> anyhow::Result<u64> {
        Ok(self.stats().await?.refreshes)
    }

    /// Revokes every grant of the account `sub` with its tokens, as a person removing the app at
    /// the provider: its access tokens stop working (introspection says inactive, the git server
    /// refuses them) and its refresh tokens are refused. Returns how many grants were revoked.
    /// The account's browser session stays, so the next authorization asks for consent anew.
    pub async fn revoke_grants(&self, sub: &str) -> anyhow::Result<u64> {
        let body = self
            .post("/_test/revoke_grants", json!({ "sub": sub }))
            .await?;
        body["revoked"]
            .as_u64()
            .with_context(|| format!("unexpected revoke_grants response {body}"))
    }

    /// Approves the pending device authorization `user_code` as the account `sub` (what the
    /// person does at the verification page); the next poll of the token endpoint gets tokens.
    pub async fn approve_device(&self, user_code: &str, sub: &str) -> anyhow::Result<()> {
        self.post(
            "/_test/device/approve",
            json!({ "user_code": user_code, "sub": sub }),
        )
        .await
        .map(|_| ())
    }

    /// Denies the pending device authorization `user_code`; the next poll gets `access_denied`.
    pub async fn deny_device(&self, user_code: &str) -> anyhow::Result<()> {
        self.post(
            "/_test/device/approve",
            json!({ "user_code": user_code, "deny": true }),
        )
        .await
        .map(|_| ())
    }

    /// Whether the provider takes `access_token` right now (issued by it, not expired, not
    /// revoked, its grant standing): the same check the git server's requests get.
    pub async fn access_token_active(&self, access_token: &str) -> anyhow::Result<bool> {
        let response = self
            .api
            .get(self.issuer.join("/_test/validate")?)
            .bearer_auth(access_token)
            .send()
            .await?;
        match response.status().as_u16() {
            200 => Ok(true),
            401 => Ok(false),
            status => bail!("/_test/validate: unexpected status {status}"),
        }
    }

    /// Creates (or replaces) an account with these claims.
    pub async fn add_account(&self, sub: &str, claims: Value) -> anyhow::Result<()> {
        self.post("/_test/account", json!({ "sub": sub, "claims": claims }))
            .await
            .map(|_| ())
    }

    /// The account that signs in at the next authorization request.
    pub async fn login_as(&self, sub: &str) -> anyhow::Result<()> {
        self.post("/_test/login_as", json!({ "sub": sub }))
            .await
            .map(|_| ())
    }

    /// Damages the next ID token the token endpoint returns.
    pub async fn tamper_next_id_token(&self, how: Tamper) -> anyhow::Result<()> {
        let mode = match how {
            Tamper::BadSignature => "bad_signature",
            Tamper::WrongAudience => "wrong_audience",
            Tamper::Expired => "expired",
        };
        self.post("/_test/tamper", json!({ "mode": mode }))
            .await
            .map(|_| ())
    }
}

/// A browser: keeps cookies, follows redirects itself so a test can stop before one.
pub struct Browser {
    pub http: reqwest::Client,
    jar: Arc<Jar>,
}

/// Where a navigation ended.
pub enum Landing {
    /// The final response (not a redirect), and its URL.
    Page(reqwest::Response, Url),
    /// A redirect to a URL starting with the `stop_before` prefix, not followed.
    Stopped(Url),
}

impl Default for Browser {
    fn default() -> Self {
        Self::new()
    }
}

impl Browser {
    pub fn new() -> Self {
        let jar = Arc::new(Jar::default());
        Self {
            http: reqwest::Client::builder()
                .cookie_provider(jar.clone())
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            jar,
        }
    }

    /// Sets a cookie for `url`, as a site the browser visited would have.
    pub fn set_cookie(&self, url: &Url, name: &str, value: &str) {
        self.jar
            .add_cookie_str(&format!("{name}={value}; Path=/"), url);
    }

    /// The value of the cookie `name` this browser would send to `url`.
    pub fn cookie(&self, url: &Url, name: &str) -> Option<String> {
        let header = self.jar.cookies(url)?;
        header
            .to_str()
            .ok()?
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }

    /// GETs `url` and follows redirects, stopping before any URL starting with `stop_before`.
    pub async fn navigate(&self, url: Url, stop_before: Option<&str>) -> anyhow::Result<Landing> {
        let mut url = url;
        for _ in 0..20 {
            let response = self.http.get(url.clone()).send().await?;
            if !response.status().is_redirection() {
                return Ok(Landing::Page(response, url));
            }
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .context("redirect without a location")?;
            let next = url.join(location)?;
            if stop_before.is_some_and(|prefix| next.as_str().starts_with(prefix)) {
                return Ok(Landing::Stopped(next));
            }
            url = next;
        }
        bail!("more than 20 redirects")
    }
}
