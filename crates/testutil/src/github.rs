//! A loopback stand-in for GitHub, because this machine is offline: github.com cannot be
//! reached and GitHub Enterprise Server cannot be installed. It serves, under a GitHub
//! Enterprise-style base URL (coderd's `CODER_OAUTH2_GITHUB_ENTERPRISE_BASE_URL`), the OAuth
//! endpoints (`/login/oauth/authorize`, `/login/oauth/access_token`) and the REST API calls a
//! sign-in makes (`/api/v3/user`, `/api/v3/user/emails`, `/api/v3/user/memberships/orgs`,
//! `/api/v3/orgs/{org}/teams/{team}/memberships/{user}`), answering as GitHub's documentation
//! says — the same shapes, GitHub's 200-with-`error` refusal of a bad code, 401 "Bad
//! credentials", 404 for a team the person is not in — and checking what GitHub checks:
//! client credentials, redirect URI, single-use codes, PKCE (S256) when a challenge was sent.
//! It is small on purpose; it is not GitHub, and passing against it says the protocol is
//! followed as documented, not that github.com behaves identically.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use url::Url;

/// A GitHub account of the stand-in.
#[derive(Debug, Clone)]
pub struct GithubAccount {
    pub id: i64,
    pub login: String,
    pub name: String,
    /// `(address, primary, verified)`.
    pub emails: Vec<(String, bool, bool)>,
    /// `(organization, state)` with state `active` or `pending`.
    pub orgs: Vec<(String, String)>,
    /// `(organization, team slug)`.
    pub teams: Vec<(String, String)>,
}

impl GithubAccount {
    /// An account with one verified primary address, in no organization.
    pub fn new(id: i64, login: &str) -> Self {
        Self {
            id,
            login: login.into(),
            name: format!("{login} (GitHub)"),
            emails: vec![(format!("{login}@users.example"), true, true)],
            orgs: vec![],
            teams: vec![],
        }
    }

    pub fn in_org(mut self, org: &str) -> Self {
        self.orgs.push((org.into(), "active".into()));
        self
    }

    pub fn in_team(mut self, org: &str, team: &str) -> Self {
        self.teams.push((org.into(), team.into()));
        self
    }
}

struct Grant {
    login: String,
    client_id: String,
    redirect_uri: String,
    challenge: Option<String>,
}

#[derive(Default)]
struct Inner {
    clients: HashMap<String, String>,
    accounts: HashMap<String, GithubAccount>,
    /// Who is signed in to "GitHub" in the browser (the consent is taken as given).
    signed_in: Option<String>,
    codes: HashMap<String, Grant>,
    tokens: HashMap<String, String>,
    /// API calls received, `METHOD path`, for tests to check what coderd asked.
    calls: Vec<String>,
}

type Shared = Arc<Mutex<Inner>>;

/// The stand-in, serving until dropped.
pub struct FakeGithub {
    /// The base URL to give coderd as the enterprise base URL.
    pub base_url: Url,
    inner: Shared,
    stop: CancellationToken,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl FakeGithub {
    pub async fn start() -> anyhow::Result<Self> {
        let inner = Shared::default();
        let app = Router::new()
            .route("/login/oauth/authorize", get(authorize))
            .route("/login/oauth/access_token", post(access_token))
            .route("/api/v3/user", get(user))
            .route("/api/v3/user/emails", get(emails))
            .route("/api/v3/user/memberships/orgs", get(memberships))
            .route(
                "/api/v3/orgs/{org}/teams/{team}/memberships/{username}",
                get(team_membership),
            )
            .with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = Url::parse(&format!("http://{}/", listener.local_addr()?))?;
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        Ok(Self {
            base_url,
            inner,
            stop,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers an OAuth app; returns its client id and secret.
    pub fn register_client(&self) -> (String, String) {
        let id = format!("Iv1.{}", random_hex());
        let secret = random_hex();
        self.lock().clients.insert(id.clone(), secret.clone());
        (id, secret)
    }

    pub fn add_account(&self, account: GithubAccount) {
        self.lock().accounts.insert(account.login.clone(), account);
    }

    /// The person the browser is signed in to GitHub as.
    pub fn sign_in_as(&self, login: &str) {
        self.lock().signed_in = Some(login.into());
    }

    /// The REST API paths called so far.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }
}

/// 32 random hex digits (uuid's v4 generator is the randomness at hand in this crate).
fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[derive(serde::Deserialize)]
struct AuthorizeParams {
    client_id: String,
    redirect_uri: Option<String>,
    state: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
}

async fn authorize(State(inner): State<Shared>, Query(p): Query<AuthorizeParams>) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
    if !inner.clients.contains_key(&p.client_id) {
        return (StatusCode::NOT_FOUND, "unknown client_id").into_response();
    }
    let Some(redirect_uri) = p.redirect_uri else {
        return (StatusCode::BAD_REQUEST, "redirect_uri is required here").into_response();
    };
    if p.code_challenge.is_some() && p.code_challenge_method.as_deref() != Some("S256") {
        return (StatusCode::BAD_REQUEST, "only S256 is supported").into_response();
    }
    let Some(login) = inner.signed_in.clone() else {
        return (StatusCode::UNAUTHORIZED, "sign in to GitHub first").into_response();
    };
    let code = random_hex();
    inner.codes.insert(
        code.clone(),
        Grant {
            login,
            client_id: p.client_id,
            redirect_uri: redirect_uri.clone(),
            challenge: p.code_challenge,
        },
    );
    let Ok(mut back) = Url::parse(&redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    back.query_pairs_mut().append_pair("code", &code);
    if let Some(state) = p.state {
        back.query_pairs_mut().append_pair("state", &state);
    }
    Redirect::to(back.as_str()).into_response()
}

#[derive(serde::Deserialize)]
struct TokenParams {
    client_id: Option<String>,
    client_secret: Option<String>,
    code: String,
    redirect_uri: Option<String>,
    code_verifier: Option<String>,
}

/// GitHub answers a refused exchange with 200 and an error document.
fn refusal(error: &str, description: &str) -> Response {
    Json(json!({"error": error, "error_description": description,
                "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"}))
        .into_response()
}

async fn access_token(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Form(p): Form<TokenParams>,
) -> Response {
    if headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|a| !a.contains("application/json"))
    {
        // GitHub would answer form-encoded; coderd must ask for JSON.
        return (StatusCode::NOT_ACCEPTABLE, "ask for application/json").into_response();
    }
    let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
    let (Some(client_id), Some(secret)) = (p.client_id, p.client_secret) else {
        return refusal(
            "incorrect_client_credentials",
            "The client_id and/or client_secret passed are incorrect.",
        );
    };
    if inner.clients.get(&client_id) != Some(&secret) {
        return refusal(
            "incorrect_client_credentials",
            "The client_id and/or client_secret passed are incorrect.",
        );
    }
    let Some(grant) = inner.codes.remove(&p.code) else {
        return refusal(
            "bad_verification_code",
            "The code passed is incorrect or expired.",
        );
    };
    if grant.client_id != client_id || p.redirect_uri.is_some_and(|r| r != grant.redirect_uri) {
        return refusal(
            "redirect_uri_mismatch",
            "The redirect_uri MUST match the registered callback URL for this application.",
        );
    }
    if let Some(challenge) = grant.challenge {
        let verified = p.code_verifier.is_some_and(|v| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes()))
                == challenge
        });
        if !verified {
            return refusal(
                "bad_verification_code",
                "The code_verifier does not match the code_challenge.",
            );
        }
    }
    let token = format!("gho_{}", random_hex());
    inner.tokens.insert(token.clone(), grant.login);
    Json(json!({"access_token": token, "token_type": "bearer",
                "scope": "read:org,read:user,user:email"}))
    .into_response()
}

/// The account behind the request's token, or GitHub's 401.
fn account(
    inner: &Shared,
    headers: &HeaderMap,
    call: String,
) -> Result<GithubAccount, Box<Response>> {
    let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
    inner.calls.push(call);
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("token "))
        });
    token
        .and_then(|t| inner.tokens.get(t))
        .and_then(|login| inner.accounts.get(login))
        .cloned()
        .ok_or_else(|| {
            Box::new(
                (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"message": "Bad credentials",
                                "documentation_url": "https://docs.github.com/rest"})),
                )
                    .into_response(),
            )
        })
}

async fn user(State(inner): State<Shared>, headers: HeaderMap) -> Response {
    match account(&inner, &headers, "GET /user".into()) {
        Ok(a) => Json(json!({
            "login": a.login, "id": a.id, "node_id": format!("U_{}", a.id),
            "avatar_url": format!("https://avatars.githubusercontent.com/u/{}?v=4", a.id),
            "type": "User", "site_admin": false, "name": a.name,
            "email": Value::Null,
        }))
        .into_response(),
        Err(r) => *r,
    }
}

async fn emails(State(inner): State<Shared>, headers: HeaderMap) -> Response {
    match account(&inner, &headers, "GET /user/emails".into()) {
        Ok(a) => Json(
            a.emails
                .iter()
                .map(|(email, primary, verified)| {
                    json!({"email": email, "primary": primary, "verified": verified,
                           "visibility": if *primary { json!("private") } else { Value::Null }})
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(r) => *r,
    }
}

#[derive(serde::Deserialize)]
struct MembershipParams {
    state: Option<String>,
}

async fn memberships(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Query(p): Query<MembershipParams>,
) -> Response {
    match account(&inner, &headers, "GET /user/memberships/orgs".into()) {
        Ok(a) => Json(
            a.orgs
                .iter()
                .filter(|(_, state)| p.state.as_ref().is_none_or(|s| s == state))
                .map(|(org, state)| {
                    json!({"state": state, "role": "member",
                           "organization_url": format!("https://api.github.com/orgs/{org}"),
                           "organization": {"login": org, "id": org.len(), "url": format!("https://api.github.com/orgs/{org}")},
                           "user": {"login": a.login, "id": a.id}})
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(r) => *r,
    }
}

async fn team_membership(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Path((org, team, username)): Path<(String, String, String)>,
) -> Response {
    let call = format!("GET /orgs/{org}/teams/{team}/memberships/{username}");
    let a = match account(&inner, &headers, call) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let member = a.login.eq_ignore_ascii_case(&username)
        && a.teams
            .iter()
            .any(|(o, t)| o.eq_ignore_ascii_case(&org) && t == &team);
    if member {
        Json(
            json!({"url": format!("https://api.github.com/teams/1/memberships/{username}"),
                    "role": "member", "state": "active"}),
        )
        .into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            Json(json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest/teams/members#get-team-membership-for-a-user"})),
        )
            .into_response()
    }
}
