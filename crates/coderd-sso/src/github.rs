//! GitHub login (Coder's `CODER_OAUTH2_GITHUB_*`): whether the person GitHub
//! vouched for may sign in — an active member of an allowed organization (and, when teams are
//! listed, of an allowed team in it) unless everyone is allowed, with a verified primary email
//! — before `account` decides as which user. The protocol and GitHub's API calls are
//! `oauth_client::github`'s.

use axum::http::StatusCode;
use codersdk::users::LoginType;
use oauth_client::TokenSet;
use oauth_client::github::GithubClient;

use super::Error;
use super::GithubSettings;
use super::account::{self, Identity, Login};
use coderd_core::state::AppState;

/// Signs in the person whose GitHub token this is.
pub async fn github_login(
    state: &AppState,
    settings: &GithubSettings,
    client: &GithubClient,
    tokens: TokenSet,
) -> Result<Login, Error> {
    let user = client.user(&tokens).await?;
    if !settings.allow_everyone {
        let memberships = client.org_memberships(&tokens).await?;
        let orgs: Vec<String> = memberships
            .into_iter()
            .filter(|m| m.state == "active")
            .map(|m| m.organization.login)
            .filter(|login| {
                settings
                    .allowed_orgs
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(login))
            })
            .collect();
        if orgs.is_empty() {
            return Err(Error::Refused {
                status: StatusCode::UNAUTHORIZED,
                message: "You aren't a member of the authorized GitHub organizations!".into(),
                detail: format!(
                    "Allowed organizations: {}.",
                    settings.allowed_orgs.join(", ")
                ),
            });
        }
        if !settings.allowed_teams.is_empty() {
            let mut member = false;
            for team in settings
                .allowed_teams
                .iter()
                .filter(|t| orgs.iter().any(|o| o.eq_ignore_ascii_case(&t.organization)))
            {
                if client
                    .is_team_member(&tokens, &team.organization, &team.slug, &user.login)
                    .await?
                {
                    member = true;
                    break;
                }
            }
            if !member {
                return Err(Error::refused(
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "You aren't a member of an authorized team in the {} GitHub organization(s)!",
                        orgs.join(", ")
                    ),
                ));
            }
        }
    }
    let email = client
        .emails(&tokens)
        .await?
        .into_iter()
        .find(|e| e.primary && e.verified)
        .ok_or_else(|| {
            Error::refused(
                StatusCode::PRECONDITION_REQUIRED,
                "Your primary email must be verified on GitHub!",
            )
        })?
        .email;
    let claims = serde_json::to_value(&user).unwrap_or_default();
    account::sign_in(
        state,
        Identity {
            login_type: LoginType::Github,
            linked_id: user.id.to_string(),
            email,
            username: user.login,
            name: user.name.unwrap_or_default(),
            tokens,
            claims,
            allow_signups: settings.allow_signups,
            groups: None,
        },
    )
    .await
}
