//! What every provider's sign-in comes to once the provider has said who the person is: the
//! user linked to that identity (or, for a first sign-in, the user with the same email, or a
//! new user with a unique name), the login type enforced, the link recorded with the provider's
//! tokens sealed, and a new session. OIDC (`login`) and GitHub (`github`) decide *whether* the
//! person may sign in; this decides *as whom*. Every refusal happens before anything is written.

use axum::http::StatusCode;
use codersdk::users::{LoginType, UserStatus};
use oauth_client::{KeyRing, TokenSet};
use serde_json::Value;
use uuid::Uuid;

use super::Error;
use coderd_core::state::AppState;
use coderd_core::validate;
use coderd_store::{self as store, GroupSync, LinkUpdate, NewUser, UserRow};

/// A completed sign-in.
#[derive(Debug)]
pub struct Login {
    pub user: UserRow,
    /// The new session token, shown once.
    pub token: String,
    /// Whether this sign-in created the user.
    pub created: bool,
}

/// A person the provider vouched for.
#[derive(Debug)]
pub(super) struct Identity {
    pub login_type: LoginType,
    /// The provider's stable id for the person.
    pub linked_id: String,
    /// Verified by the provider.
    pub email: String,
    /// The username wanted for a new user (made valid and unique).
    pub username: String,
    /// The display name, kept only when valid.
    pub name: String,
    pub tokens: TokenSet,
    /// What the provider said, kept on the link.
    pub claims: Value,
    /// Whether a first sign-in creates the user.
    pub allow_signups: bool,
    /// The groups the provider says the person is in, when group sync is on; set in the same
    /// transaction as the sign-in.
    pub groups: Option<GroupSync>,
}

/// What sealed provider tokens are bound to (a sealed value of one purpose opens for no other).
const ACCESS_TOKEN_PURPOSE: &str = "user_link_oauth_access_token";
const REFRESH_TOKEN_PURPOSE: &str = "user_link_oauth_refresh_token";

/// How many random suffixes are tried when a username is taken.
const USERNAME_ATTEMPTS: usize = 10;

/// Signs in the person behind `identity`.
pub(super) async fn sign_in(state: &AppState, identity: Identity) -> Result<Login, Error> {
    let login_type = identity.login_type;
    let link = seal_tokens(
        LinkUpdate {
            login_type: login_type.as_str().into(),
            linked_id: identity.linked_id.clone(),
            oauth_access_token: String::new(),
            oauth_refresh_token: String::new(),
            oauth_expiry: identity.tokens.expires_at,
            claims: identity.claims.clone(),
        },
        &identity.tokens,
        state.options.external_token_keys.as_deref(),
    );
    let existing = match state
        .store
        .user_by_link(&link.login_type, &link.linked_id)
        .await
    {
        Ok(user) => Some(user),
        Err(store::Error::NotFound) => match state.store.user_by_email(&identity.email).await {
            Ok(user) => Some(user),
            Err(store::Error::NotFound) => None,
            Err(e) => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let (user, created) = match existing {
        Some(user) => {
            if let Err(refusal) = check_existing(&user, login_type) {
                let status = match &refusal {
                    Error::Refused { status, .. } => status.as_u16(),
                    _ => 403,
                };
                let entry = coderd_core::domain::accounts::login_entry(Some(&user))
                    .status(status)
                    .description(format!("{} login refused", label(login_type)));
                coderd_core::audit::record(&state.store, entry).await;
                return Err(refusal);
            }
            state
                .store
                .update_synced_link(user.id, &link, identity.groups.as_ref())
                .await?;
            (user, false)
        }
        None => {
            if !identity.allow_signups {
                return Err(Error::refused(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Signups are disabled for {}: ask an administrator to create your account first.",
                        label(login_type)
                    ),
                ));
            }
            (create_user(state, &identity, &link).await?, true)
        }
    };
    let token = coderd_core::domain::keys::issue_key(
        state,
        user.id,
        login_type,
        "",
        state.options.session_duration,
        Some(coderd_core::domain::accounts::login_entry(Some(&user))),
    )
    .await?;
    tracing::info!(user = %user.username, created, login_type = login_type.as_str(), "single sign-on");
    Ok(Login {
        user,
        token,
        created,
    })
}

fn label(login_type: LoginType) -> &'static str {
    match login_type {
        LoginType::Github => "GitHub",
        _ => "OIDC",
    }
}

/// A returning user must have been created for this provider (a password account is never
/// taken over by whoever controls the same address at a provider) and not be suspended.
fn check_existing(user: &UserRow, login_type: LoginType) -> Result<(), Error> {
    if user.login_type != login_type.as_str() {
        return Err(Error::Refused {
            status: StatusCode::FORBIDDEN,
            message: format!(
                "Incorrect login type, attempting to use {:?} but user is of login type {:?}.",
                login_type.as_str(),
                user.login_type
            ),
            detail: "Sign in the way your account was created, or ask an administrator to change its login type.".into(),
        });
    }
    if user.status == UserStatus::Suspended.as_str() {
        return Err(Error::Refused {
            status: StatusCode::UNAUTHORIZED,
            message: "Your account is suspended.".into(),
            detail: "Contact an administrator to reactivate your account.".into(),
        });
    }
    Ok(())
}

/// Seals the provider's tokens when the deployment has keys for it; without keys none is kept.
fn seal_tokens(mut link: LinkUpdate, tokens: &TokenSet, keys: Option<&KeyRing>) -> LinkUpdate {
    if let Some(keys) = keys {
        link.oauth_access_token = keys.seal(ACCESS_TOKEN_PURPOSE, tokens.access_token.as_bytes());
        link.oauth_refresh_token = tokens
            .refresh_token
            .as_ref()
            .map(|t| keys.seal(REFRESH_TOKEN_PURPOSE, t.as_bytes()))
            .unwrap_or_default();
    }
    link
}

/// Creates the user of a first sign-in, a member of the default organization, with a unique
/// username from the provider's (or the email's local part).
async fn create_user(
    state: &AppState,
    identity: &Identity,
    link: &LinkUpdate,
) -> Result<UserRow, Error> {
    let org = state
        .store
        .default_organization()
        .await
        .map_err(|e| match e {
            store::Error::NotFound => Error::refused(
                StatusCode::PRECONDITION_FAILED,
                "This deployment is not set up yet: its first user must be created before anyone signs in.",
            ),
            other => other.into(),
        })?;
    let wanted = Some(identity.username.as_str())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| identity.email.split('@').next().unwrap_or_default());
    let base = username_from(wanted);
    let name = if validate::real_name(&identity.name).is_ok() {
        identity.name.clone()
    } else {
        String::new()
    };
    let mut candidate = base.clone();
    for _ in 0..USERNAME_ATTEMPTS {
        if !state.store.username_taken(&candidate).await? {
            let user = NewUser {
                id: Uuid::new_v4(),
                email: identity.email.clone(),
                username: candidate.clone(),
                name: name.clone(),
                hashed_password: String::new(),
                status: UserStatus::Active.as_str().into(),
                rbac_roles: vec![],
                login_type: identity.login_type.as_str().into(),
                organization_ids: vec![org.id],
            };
            // Coder records a sign-up through a provider as the new user registering.
            let log = coderd_core::audit::Entry::new(
                Some(user.id),
                codersdk::audit::ResourceType::User,
                user.id,
                &user.username,
                codersdk::audit::AuditAction::Register,
            )
            .diff(None, Some(&user))
            .build();
            match state
                .store
                .create_synced_user(user, link, identity.groups.as_ref(), Some(&log))
                .await
            {
                Ok(row) => return Ok(row),
                // Someone took the name between the check and the insert: try another.
                Err(store::Error::Conflict { constraint }) if constraint.contains("username") => {}
                Err(e) => return Err(e.into()),
            }
        }
        candidate = with_suffix(&base);
    }
    Err(Error::refused(
        StatusCode::CONFLICT,
        format!(
            "Could not find a free username like {base:?}; ask an administrator to create your account."
        ),
    ))
}

/// Turns a claim into a valid username as Coder does: letters and digits kept, every run of
/// anything else one hyphen, at most 32 characters, never empty or reserved.
pub fn username_from(claim: &str) -> String {
    let mut out = String::new();
    for c in claim.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(validate::NAME_MAX);
    let out = out.trim_end_matches('-').to_string();
    if validate::name(&out).is_ok() {
        out
    } else {
        with_suffix("user")
    }
}

/// `base` with a random numeric suffix, still within the length limit.
fn with_suffix(base: &str) -> String {
    let suffix = format!("-{:04}", rand::random_range(0..10_000u32));
    let keep = validate::NAME_MAX - suffix.len();
    let mut base = base.to_string();
    base.truncate(keep);
    format!("{}{suffix}", base.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_from_claims_are_valid() {
        assert_eq!(username_from("alice"), "alice");
        assert_eq!(username_from("Alice.Smith@corp"), "Alice-Smith-corp");
        assert_eq!(username_from("--a__b--"), "a-b");
        assert_eq!(username_from("ünïcödé"), "n-c-d");
        let long = username_from(&"x".repeat(40));
        assert_eq!(long.len(), 32);
        for odd in ["", "---", "me", "new", "ü.é"] {
            let name = username_from(odd);
            assert!(validate::name(&name).is_ok(), "{odd:?} → {name:?}");
            assert!(name.starts_with("user-"), "{odd:?} → {name:?}");
        }
        let suffixed = with_suffix(&"y".repeat(32));
        assert!(
            validate::name(&suffixed).is_ok() && suffixed.len() <= 32,
            "{suffixed}"
        );
    }
}
