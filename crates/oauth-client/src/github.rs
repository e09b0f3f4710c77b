//! GitHub (github.com or GitHub Enterprise Server) as a sign-in provider: its OAuth2 endpoints
//! for the code flow (run by [`crate::oauth2`]), and the few REST API calls that tell who the
//! person is and where they belong — `/user`, `/user/emails`, `/user/memberships/orgs` and a
//! team membership. The shapes are GitHub's documented ones, reduced to the fields we read.

use url::Url;

use crate::oauth2::{OAuth2Client, OAuth2Config};
use crate::{Error, HttpClient, PendingAuth, Result, TokenSet};

/// What GitHub's REST API asks clients to accept.
const ACCEPT: &str = "application/vnd.github+json";

/// The scopes a sign-in needs: the profile, private org memberships, and email addresses.
pub const SCOPES: [&str; 3] = ["read:user", "read:org", "user:email"];

/// Where a GitHub lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubEndpoints {
    pub auth_url: Url,
    pub token_url: Url,
    /// The REST API's root, ending in `/`.
    pub api_url: Url,
}

impl GithubEndpoints {
    /// github.com, or the GitHub Enterprise Server at `enterprise_base` (its OAuth under
    /// `<base>/login/oauth/`, its API under `<base>/api/v3/`).
    pub fn new(enterprise_base: Option<&Url>) -> Result<Self> {
        let parse = |s: &str| Url::parse(s).map_err(|e| Error::Config(format!("{s}: {e}")));
        let Some(base) = enterprise_base else {
            return Ok(Self {
                auth_url: parse("https://github.com/login/oauth/authorize")?,
                token_url: parse("https://github.com/login/oauth/access_token")?,
                api_url: parse("https://api.github.com/")?,
            });
        };
        let mut base = base.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let join = |p: &str| {
            base.join(p)
                .map_err(|e| Error::Config(format!("GitHub enterprise base URL: {e}")))
        };
        Ok(Self {
            auth_url: join("login/oauth/authorize")?,
            token_url: join("login/oauth/access_token")?,
            api_url: join("api/v3/")?,
        })
    }
}

/// `GET /user`.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct GithubUser {
    pub id: i64,
    pub login: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub avatar_url: Option<String>,
}

/// An entry of `GET /user/emails`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GithubEmail {
    pub email: String,
    #[serde(default)]
    pub primary: bool,
    #[serde(default)]
    pub verified: bool,
}

/// An entry of `GET /user/memberships/orgs`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct OrgMembership {
    /// `active` or `pending` (invited, not yet accepted).
    pub state: String,
    pub organization: Organization,
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Organization {
    pub login: String,
}

/// `GET /orgs/{org}/teams/{team_slug}/memberships/{username}`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct TeamMembership {
    pub state: String,
}

/// The GitHub sign-in client.
#[derive(Debug)]
pub struct GithubClient {
    oauth: OAuth2Client,
    api_url: Url,
    http: HttpClient,
}

impl GithubClient {
    pub fn new(
        endpoints: GithubEndpoints,
        client_id: String,
        client_secret: String,
        redirect_url: Url,
        http: HttpClient,
    ) -> Self {
        let config = OAuth2Config {
            auth_url: endpoints.auth_url,
            token_url: endpoints.token_url,
            client_id,
            client_secret,
            redirect_url,
            scopes: SCOPES.map(String::from).to_vec(),
            auth_url_params: Vec::new(),
            credentials_in_body: true,
            pkce: true,
            extra_token_keys: Vec::new(),
        };
        Self {
            oauth: OAuth2Client::new("github", config, http.clone()),
            api_url: endpoints.api_url,
            http,
        }
    }

    /// Where to send the browser, and what to remember until it comes back.
    pub fn begin(&self, redirect: &str) -> (Url, PendingAuth) {
        self.oauth.begin(redirect)
    }

    /// Exchanges the code the browser brought back (its state already checked).
    pub async fn finish(&self, pending: &PendingAuth, code: &str) -> Result<TokenSet> {
        self.oauth.finish(pending, code).await
    }

    fn api(&self, path: &str) -> Result<Url> {
        self.api_url
            .join(path)
            .map_err(|e| Error::Config(format!("GitHub API URL: {e}")))
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str, token: &str) -> Result<T> {
        self.http
            .get_json(self.api(path)?, token, ACCEPT)
            .await?
            .ok_or_else(|| Error::Unavailable(format!("GitHub answered 404 for /{path}")))
    }

    pub async fn user(&self, token: &TokenSet) -> Result<GithubUser> {
        self.get("user", &token.access_token).await
    }

    /// The person's addresses (the first hundred; GitHub caps addresses well below that).
    pub async fn emails(&self, token: &TokenSet) -> Result<Vec<GithubEmail>> {
        self.get("user/emails?per_page=100", &token.access_token)
            .await
    }

    /// The person's active organization memberships (the first hundred).
    pub async fn org_memberships(&self, token: &TokenSet) -> Result<Vec<OrgMembership>> {
        self.get(
            "user/memberships/orgs?state=active&per_page=100",
            &token.access_token,
        )
        .await
    }

    /// Whether `username` is an active member of `org`'s team `team` (GitHub answers 404 when
    /// not, or when the token may not see the team).
    pub async fn is_team_member(
        &self,
        token: &TokenSet,
        org: &str,
        team: &str,
        username: &str,
    ) -> Result<bool> {
        let mut url = self.api("orgs/")?;
        url.path_segments_mut()
            .map_err(|()| Error::Config("GitHub API URL cannot have a path".into()))?
            .pop_if_empty()
            .extend([org, "teams", team, "memberships", username]);
        let membership: Option<TeamMembership> =
            self.http.get_json(url, &token.access_token, ACCEPT).await?;
        Ok(membership.is_some_and(|m| m.state == "active"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enterprise_endpoints_sit_under_the_base_url() {
        let public = GithubEndpoints::new(None).expect("github.com");
        assert_eq!(public.api_url.as_str(), "https://api.github.com/");
        for base in ["https://ghe.corp.example", "https://ghe.corp.example/"] {
            let ghe = GithubEndpoints::new(Some(&Url::parse(base).expect("url"))).expect("ghe");
            assert_eq!(
                ghe.auth_url.as_str(),
                "https://ghe.corp.example/login/oauth/authorize"
            );
            assert_eq!(
                ghe.token_url.as_str(),
                "https://ghe.corp.example/login/oauth/access_token"
            );
            assert_eq!(ghe.api_url.as_str(), "https://ghe.corp.example/api/v3/");
        }
        let nested = GithubEndpoints::new(Some(&Url::parse("http://127.0.0.1:9/gh").expect("url")))
            .expect("nested");
        assert_eq!(nested.api_url.as_str(), "http://127.0.0.1:9/gh/api/v3/");
    }
}
