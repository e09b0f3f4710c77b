//! External auth: the git providers (and other OAuth2 services) a user links once, so that git
//! in their workspaces and the templates that need a token just work — Coder's external auth,
//! under Coder's names.
//!
//! A capability over the core with a small surface: `config` reads the providers from
//! `CODER_EXTERNAL_AUTH_<n>_*`, `providers` runs them, `links` keeps each user's tokens (sealed,
//! refreshed one at a time, validated), `gitsshkey` keeps each user's git SSH key, and this
//! module answers what the front doors and the job payloads ask. Who may see a link is simple:
//! only its user (and, through an agent's token, the workspace's owner).

pub mod config;
pub mod gitsshkey;
pub mod links;
pub mod providers;

use chrono::{DateTime, Utc};
use codersdk::externalauth::{
    AgentExternalAuthResponse, DeleteExternalAuthByIdResponse, ExternalAuth, ExternalAuthLink,
    ExternalAuthLinkProvider, ExternalAuthProviderToken, ListUserExternalAuthResponse,
    TemplateVersionExternalAuth,
};
use codersdk::proto::ExternalAuthProviderResource;
use oauth_client::PendingAuth;
use oauth_client::device::{DeviceAuthorization, DevicePending};
use url::Url;
use uuid::Uuid;

pub use config::{ConfigError, ProviderSettings};
pub use links::LinkState;
pub use providers::{Provider, Providers, callback_path};

use crate::domain::{self, Error as DomainError};
use crate::state::AppState;

/// Go's zero time, which Coder's JSON shows for "no expiry".
fn zero_time() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(-62_135_596_800, 0).unwrap_or_default()
}

impl From<links::Error> for DomainError {
    fn from(e: links::Error) -> Self {
        match e {
            links::Error::Store(e) => e.into(),
            links::Error::Provider { provider, detail } => DomainError::Internal(format!(
                "the external auth provider {provider:?} failed: {detail}"
            )),
            other => DomainError::Internal(other.to_string()),
        }
    }
}

/// The provider named `id`; unknown ids are not found.
pub fn provider<'a>(state: &'a AppState, id: &str) -> domain::Result<&'a Provider> {
    state.external_auth.get(id).ok_or(DomainError::NotFound)
}

fn link_provider(p: &Provider) -> ExternalAuthLinkProvider {
    let s = &p.settings;
    ExternalAuthLinkProvider {
        id: s.id.clone(),
        r#type: s.r#type.clone(),
        device: s.device_flow,
        display_name: s.display_name.clone(),
        display_icon: s.display_icon.clone(),
        allow_refresh: !s.no_refresh,
        allow_validate: s.validate_url.is_some(),
        supports_revocation: s.revoke_url.is_some(),
        code_challenge_methods_supported: vec![if s.pkce { "S256" } else { "none" }.into()],
    }
}

/// `GET /external-auth`: the providers and the caller's links, each link refreshed and checked.
pub async fn list(state: &AppState, user: Uuid) -> domain::Result<ListUserExternalAuthResponse> {
    let providers = state
        .external_auth
        .all()
        .iter()
        .map(link_provider)
        .collect();
    let mut links = Vec::new();
    for row in state.store.external_auth_links(user).await? {
        let (authenticated, validate_error) = match state.external_auth.get(&row.provider_id) {
            // A link to a provider no longer configured is listed so it can be removed.
            None => (false, "the provider is no longer configured".to_string()),
            Some(provider) => match links::token(state, user, provider, true).await {
                Ok(LinkState::Valid(_)) => (true, String::new()),
                Ok(LinkState::Invalid(reason)) => (false, reason),
                Ok(LinkState::NotLinked) => continue,
                Err(e) => (false, e.to_string()),
            },
        };
        // Reread: a refresh may have changed it.
        let row = state
            .store
            .external_auth_link(user, &row.provider_id)
            .await?
            .unwrap_or(row);
        links.push(ExternalAuthLink {
            provider_id: row.provider_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
            has_refresh_token: !row.oauth_refresh_token.is_empty(),
            expires: row.oauth_expiry.unwrap_or_else(zero_time),
            authenticated,
            validate_error,
        });
    }
    Ok(ListUserExternalAuthResponse { providers, links })
}

/// `GET /external-auth/{id}`: whether the caller is linked with one provider.
pub async fn get(state: &AppState, user: Uuid, id: &str) -> domain::Result<ExternalAuth> {
    let provider = provider(state, id)?;
    let s = &provider.settings;
    let authenticated = matches!(
        links::token(state, user, provider, true).await?,
        LinkState::Valid(_)
    );
    Ok(ExternalAuth {
        authenticated,
        device: s.device_flow,
        display_name: s.display_name.clone(),
        user: None,
        app_installable: !s.app_install_url.is_empty(),
        installations: Vec::new(),
        app_install_url: s.app_install_url.clone(),
        supports_revocation: s.revoke_url.is_some(),
    })
}

/// `DELETE /external-auth/{id}`: forgets the link, and revokes its token at the provider when
/// the provider can be told.
pub async fn unlink(
    state: &AppState,
    user: Uuid,
    id: &str,
) -> domain::Result<DeleteExternalAuthByIdResponse> {
    let provider = provider(state, id)?;
    let tokens = match links::token(state, user, provider, false).await {
        Ok(LinkState::Valid(tokens)) => Some(tokens),
        _ => match state.store.external_auth_link(user, id).await? {
            Some(row) => state
                .options
                .external_token_keys
                .as_deref()
                .and_then(|keys| links::open(keys, &row).ok()),
            None => return Err(DomainError::NotFound),
        },
    };
    if !state.store.delete_external_auth_link(user, id).await? {
        return Err(DomainError::NotFound);
    }
    let (Some(url), Some(tokens)) = (&provider.settings.revoke_url, tokens) else {
        return Ok(DeleteExternalAuthByIdResponse::default());
    };
    let (token, hint) = match &tokens.refresh_token {
        Some(refresh) => (refresh.as_str(), "refresh_token"),
        None => (tokens.access_token.as_str(), "access_token"),
    };
    let mut result = provider.client.revoke(url, token, hint).await;
    if result.is_ok() && hint == "refresh_token" {
        // Some providers revoke only what they are given; the access token goes too.
        result = provider
            .client
            .revoke(url, &tokens.access_token, "access_token")
            .await;
    }
    Ok(match result {
        Ok(()) => DeleteExternalAuthByIdResponse {
            token_revoked: true,
            token_revocation_error: String::new(),
        },
        Err(e) => DeleteExternalAuthByIdResponse {
            token_revoked: false,
            token_revocation_error: e.to_string(),
        },
    })
}

/// Where to send the browser to link `provider`, and the sealed state to keep meanwhile.
pub fn begin_link(state: &AppState, provider: &Provider, redirect: &str) -> (Url, String) {
    let (url, pending) = provider.client.begin(redirect);
    (url, pending.seal(state.sso.state_keys()))
}

/// Completes a link the browser came back from: checks the state against the sealed cookie,
/// exchanges the code and stores the tokens. Returns where to send the browser.
pub async fn finish_link(
    state: &AppState,
    user: Uuid,
    provider: &Provider,
    cookie: Option<&str>,
    returned_state: &str,
    code: &str,
) -> Result<String, oauth_client::Error> {
    let pending = PendingAuth::open(
        state.sso.state_keys(),
        cookie,
        provider.id(),
        returned_state,
    )?;
    let tokens = provider.client.finish(&pending, code).await?;
    links::save(state, user, provider, &tokens)
        .await
        .map_err(|e| oauth_client::Error::Unavailable(e.to_string()))?;
    Ok(pending.redirect)
}

fn require_device(provider: &Provider) -> domain::Result<&Url> {
    match (
        &provider.settings.device_flow,
        &provider.settings.device_code_url,
    ) {
        (true, Some(url)) => Ok(url),
        _ => Err(DomainError::bad_request(
            "Git auth provider does not support device flow.",
        )),
    }
}

/// `GET /external-auth/{id}/device`: starts a device authorization.
pub async fn begin_device(state: &AppState, id: &str) -> domain::Result<DeviceAuthorization> {
    let provider = provider(state, id)?;
    let url = require_device(provider)?;
    provider
        .client
        .begin_device(url)
        .await
        .map_err(|e| DomainError::Internal(format!("Failed to authorize device: {e}")))
}

/// `POST /external-auth/{id}/device`: one exchange of the device code; linked on success.
pub async fn exchange_device(
    state: &AppState,
    user: Uuid,
    id: &str,
    device_code: &str,
) -> domain::Result<()> {
    let provider = provider(state, id)?;
    require_device(provider)?;
    let outcome = provider
        .client
        .exchange_device(device_code)
        .await
        .map_err(|e| DomainError::Internal(format!("Failed to exchange device code: {e}")))?;
    match outcome {
        Ok(tokens) => {
            links::save(state, user, provider, &tokens).await?;
            Ok(())
        }
        Err(DevicePending::NotYet(detail) | DevicePending::Refused(detail)) => {
            Err(DomainError::BadRequest {
                message: "Failed to exchange device code.".into(),
                detail,
            })
        }
    }
}

/// `GET /templateversions/{id}/external-auth`: the providers a version needs and whether
/// `user` is linked with each.
pub async fn for_template_version(
    state: &AppState,
    user: Uuid,
    wanted: &[ExternalAuthProviderResource],
) -> domain::Result<Vec<TemplateVersionExternalAuth>> {
    let mut out = Vec::with_capacity(wanted.len());
    for want in wanted {
        // Callers check `missing_provider` first.
        let Some(provider) = state.external_auth.get(&want.id) else {
            continue;
        };
        let authenticated = matches!(
            links::token(state, user, provider, true).await?,
            LinkState::Valid(_)
        );
        let s = &provider.settings;
        out.push(TemplateVersionExternalAuth {
            id: s.id.clone(),
            r#type: s.r#type.clone(),
            display_name: s.display_name.clone(),
            display_icon: s.display_icon.clone(),
            authenticate_url: provider.authenticate_url(&state.options.access_url),
            authenticated,
            optional: want.optional,
        });
    }
    Ok(out)
}

/// No provider answers a request; the API says so as a 404 with these words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoProvider {
    pub message: String,
    pub detail: String,
}

/// The first provider `wanted` names that this deployment does not configure.
pub fn missing_provider(
    state: &AppState,
    wanted: &[ExternalAuthProviderResource],
) -> Option<NoProvider> {
    let missing = wanted
        .iter()
        .find(|w| state.external_auth.get(&w.id).is_none())?;
    Some(NoProvider {
        message: format!(
            "The template version references a Git auth provider {:?} that no longer exists.",
            missing.id
        ),
        detail: "You'll need to update the template version to use a different provider.".into(),
    })
}

/// How a workspace asks for its owner's credentials.
#[derive(Debug, Clone)]
pub enum AgentQuery {
    /// By git remote URL (what `coder gitaskpass` has).
    Match(String),
    /// By provider id (`coder external-auth access-token <id>`).
    Id(String),
}

/// The provider an agent's query names: by id, or the last whose regex matches the URL.
pub fn resolve_agent_query<'a>(
    state: &'a AppState,
    query: &AgentQuery,
) -> Result<&'a Provider, NoProvider> {
    let found = match query {
        AgentQuery::Id(id) => state.external_auth.get(id),
        AgentQuery::Match(url) => state.external_auth.matching(url),
    };
    found.ok_or_else(|| {
        let target = match query {
            AgentQuery::Id(id) => format!("the id {id:?}"),
            AgentQuery::Match(url) => format!("the url {url:?}"),
        };
        let detail = if state.external_auth.all().is_empty() {
            "External auth provider not found.".to_string()
        } else {
            format!(
                "The configured external auth providers have regex filters that do not match the url. Provider url regex: {}",
                state.external_auth.describe_regexes()
            )
        };
        NoProvider {
            message: format!("No matching external auth provider found in Coder for {target}."),
            detail,
        }
    })
}

/// The owner's credentials for `provider`, or (with only `url` set) where to link first.
pub async fn agent_credentials(
    state: &AppState,
    owner: Uuid,
    provider: &Provider,
) -> domain::Result<AgentExternalAuthResponse> {
    match links::token(state, owner, provider, true).await? {
        LinkState::Valid(tokens) => {
            let (username, password) = provider.git_credentials(&tokens.access_token);
            Ok(AgentExternalAuthResponse {
                access_token: tokens.access_token,
                token_extra: tokens.extra,
                url: String::new(),
                r#type: provider.settings.r#type.clone(),
                username,
                password,
            })
        }
        LinkState::NotLinked | LinkState::Invalid(_) => Ok(AgentExternalAuthResponse {
            url: provider.authenticate_url(&state.options.access_url),
            r#type: provider.settings.r#type.clone(),
            ..Default::default()
        }),
    }
}

/// The owner's tokens for the providers a build's template version names. A provider not
/// configured or not linked gets an empty token (the template decides what that means) and a
/// line in the build log; a provider that fails fails the build.
pub async fn for_build(
    state: &AppState,
    owner: Uuid,
    wanted: &[ExternalAuthProviderResource],
) -> Result<(Vec<ExternalAuthProviderToken>, Vec<String>), links::Error> {
    let mut tokens = Vec::with_capacity(wanted.len());
    let mut notes = Vec::new();
    for want in wanted {
        let Some(provider) = state.external_auth.get(&want.id) else {
            notes.push(format!(
                "The external auth provider {:?} is not configured on this deployment; the build gets no token for it.",
                want.id
            ));
            tokens.push(ExternalAuthProviderToken {
                id: want.id.clone(),
                access_token: String::new(),
            });
            continue;
        };
        let access_token = match links::token(state, owner, provider, false).await? {
            LinkState::Valid(t) => t.access_token,
            LinkState::NotLinked => {
                notes.push(format!(
                    "The workspace owner has not linked {} ({}); the build gets no token for it.",
                    provider.settings.display_name, want.id
                ));
                String::new()
            }
            LinkState::Invalid(reason) => {
                notes.push(format!(
                    "The workspace owner's link with {} ({}) does not work ({reason}); the build gets no token for it.",
                    provider.settings.display_name, want.id
                ));
                String::new()
            }
        };
        tokens.push(ExternalAuthProviderToken {
            id: want.id.clone(),
            access_token,
        });
    }
    Ok((tokens, notes))
}
