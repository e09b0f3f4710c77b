//! GitHub sign-in's settings (Coder's `CODER_OAUTH2_GITHUB_*`) and the client they make. Who
//! may sign in is decided by the sso crate.

use oauth_client::github::{GithubClient, GithubEndpoints};
use url::Url;

/// Where GitHub sends the browser back (registered as the OAuth app's callback URL).
pub const GITHUB_CALLBACK_PATH: &str = "/api/v2/users/oauth2/github/callback";

/// A team allowed to sign in, `<org>/<team slug>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedTeam {
    pub organization: String,
    pub slug: String,
}

/// How the deployment signs people in with GitHub.
#[derive(Clone)]
pub struct GithubSettings {
    pub client_id: String,
    pub client_secret: String,
    /// Members of these organizations may sign in.
    pub allowed_orgs: Vec<String>,
    /// When set, only members of these teams (of allowed organizations).
    pub allowed_teams: Vec<AllowedTeam>,
    /// Anyone with a GitHub account may sign in.
    pub allow_everyone: bool,
    /// Create users on their first sign-in.
    pub allow_signups: bool,
    /// A GitHub Enterprise Server instead of github.com.
    pub enterprise_base_url: Option<Url>,
}

impl std::fmt::Debug for GithubSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubSettings")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("allowed_orgs", &self.allowed_orgs)
            .field("allowed_teams", &self.allowed_teams)
            .field("allow_everyone", &self.allow_everyone)
            .field("allow_signups", &self.allow_signups)
            .field(
                "enterprise_base_url",
                &self.enterprise_base_url.as_ref().map(Url::as_str),
            )
            .finish()
    }
}

impl GithubSettings {
    /// Checks the combination Coder also refuses at startup: nobody could ever sign in without
    /// an allowed organization or everyone allowed, and a team outside the allowed
    /// organizations could never match.
    pub fn new(
        client_id: String,
        client_secret: String,
        allowed_orgs: Vec<String>,
        allowed_teams: &[String],
        allow_everyone: bool,
    ) -> Result<Self, String> {
        if !allow_everyone && allowed_orgs.is_empty() {
            return Err("CODER_OAUTH2_GITHUB_ALLOWED_ORGS is empty: name at least one organization, or set CODER_OAUTH2_GITHUB_ALLOW_EVERYONE".into());
        }
        if allow_everyone && !allowed_orgs.is_empty() {
            return Err("CODER_OAUTH2_GITHUB_ALLOW_EVERYONE and CODER_OAUTH2_GITHUB_ALLOWED_ORGS cannot be used together".into());
        }
        let allowed_teams = allowed_teams
            .iter()
            .map(|t| {
                let (organization, slug) = t
                    .split_once('/')
                    .filter(|(o, s)| !o.is_empty() && !s.is_empty() && !s.contains('/'))
                    .ok_or_else(|| {
                        format!("CODER_OAUTH2_GITHUB_ALLOWED_TEAMS: {t:?} is not <organization>/<team slug>")
                    })?;
                if !allowed_orgs.iter().any(|o| o.eq_ignore_ascii_case(organization)) {
                    return Err(format!(
                        "CODER_OAUTH2_GITHUB_ALLOWED_TEAMS: {t:?} is in an organization not in CODER_OAUTH2_GITHUB_ALLOWED_ORGS"
                    ));
                }
                Ok(AllowedTeam {
                    organization: organization.to_string(),
                    slug: slug.to_string(),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            client_id,
            client_secret,
            allowed_orgs,
            allowed_teams,
            allow_everyone,
            allow_signups: false,
            enterprise_base_url: None,
        })
    }

    /// The client, with our callback under `access_url`.
    pub(super) fn client(
        &self,
        access_url: &Url,
        http: oauth_client::HttpClient,
    ) -> Result<GithubClient, oauth_client::Error> {
        let mut redirect_url = access_url.clone();
        redirect_url.set_path(GITHUB_CALLBACK_PATH);
        redirect_url.set_query(None);
        Ok(GithubClient::new(
            GithubEndpoints::new(self.enterprise_base_url.as_ref())?,
            self.client_id.clone(),
            self.client_secret.clone(),
            redirect_url,
            http,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(orgs: &[&str], teams: &[&str], everyone: bool) -> Result<GithubSettings, String> {
        GithubSettings::new(
            "id".into(),
            "secret".into(),
            orgs.iter().map(|s| s.to_string()).collect(),
            &teams.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            everyone,
        )
    }

    #[test]
    fn settings_that_could_never_admit_anyone_are_refused() {
        assert!(settings(&[], &[], false).is_err());
        assert!(settings(&["corp"], &[], true).is_err());
        assert!(settings(&[], &[], true).is_ok());
        let ok = settings(&["corp"], &["Corp/devs"], false).expect("ok");
        assert_eq!(
            ok.allowed_teams,
            vec![AllowedTeam {
                organization: "Corp".into(),
                slug: "devs".into()
            }]
        );
        for bad in ["devs", "other/devs", "corp/", "/devs", "corp/a/b"] {
            assert!(settings(&["corp"], &[bad], false).is_err(), "{bad}");
        }
    }
}
