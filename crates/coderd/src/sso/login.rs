//! Who a verified OIDC identity is here: the checks on its claims (email present, verified and
//! in an allowed domain), the user it is linked to (or, on a first sign-in, the user created
//! for it, named from the configured claim and made unique), the login type enforced, the link
//! recorded with the provider's tokens sealed, and a new session. Every refusal happens before
//! anything is written.

use axum::http::StatusCode;
use codersdk::users::{LoginType, UserStatus};
use oauth_client::oidc::OidcIdentity;
use oauth_client::{KeyRing, TokenSet};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Error, OidcSettings};
use crate::state::AppState;
use crate::store::{self, GroupSync, LinkUpdate, NewUser, UserRow};
use crate::validate;

/// A completed sign-in.
#[derive(Debug)]
pub struct OidcLogin {
    pub user: UserRow,
    /// The new session token, shown once.
    pub token: String,
    /// Whether this sign-in created the user.
    pub created: bool,
}

/// What sealed provider tokens are bound to (a sealed value of one purpose opens for no other).
const ACCESS_TOKEN_PURPOSE: &str = "user_link_oauth_access_token";
const REFRESH_TOKEN_PURPOSE: &str = "user_link_oauth_refresh_token";

/// How many random suffixes are tried when a username is taken.
const USERNAME_ATTEMPTS: usize = 10;

/// Signs in the person behind a verified OIDC identity.
pub async fn oidc_login(
    state: &AppState,
    settings: &OidcSettings,
    identity: OidcIdentity,
) -> Result<OidcLogin, Error> {
    let claims = &identity.claims;
    let email = claim_str(claims, &settings.email_field)
        .filter(|e| !e.is_empty())
        .ok_or_else(|| {
            Error::refused(
                StatusCode::BAD_REQUEST,
                format!(
                    "Your identity provider did not send an email address (claim {:?}).",
                    settings.email_field
                ),
            )
        })?
        .to_string();
    check_email(settings, claims, &email)?;
    let groups = settings
        .groups
        .groups(claims)
        .map_err(|e| Error::refused(StatusCode::FORBIDDEN, format!("Sign-in refused: {e}.")))?;
    let groups = match groups {
        Some(groups) => Some(GroupSync {
            organization_id: state.store.default_organization().await?.id,
            groups,
            auto_create: settings.groups.auto_create,
        }),
        None => None,
    };

    let issuer = claim_str(claims, "iss").unwrap_or(settings.issuer.as_str());
    let link = LinkUpdate {
        login_type: LoginType::Oidc.as_str().into(),
        linked_id: format!("{issuer}||{}", identity.subject),
        oauth_access_token: String::new(),
        oauth_refresh_token: String::new(),
        oauth_expiry: identity.tokens.expires_at,
        claims: Value::Object(claims.clone()),
    };
    let link = seal_tokens(
        link,
        &identity.tokens,
        state.options.external_token_keys.as_deref(),
    );

    let existing = match state
        .store
        .user_by_link(&link.login_type, &link.linked_id)
        .await
    {
        Ok(user) => Some(user),
        Err(store::Error::NotFound) => match state.store.user_by_email(&email).await {
            Ok(user) => Some(user),
            Err(store::Error::NotFound) => None,
            Err(e) => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let (user, created) = match existing {
        Some(user) => {
            if let Err(refusal) = check_existing(&user) {
                let status = match &refusal {
                    Error::Refused { status, .. } => status.as_u16(),
                    _ => 403,
                };
                let entry = crate::domain::accounts::login_entry(Some(&user))
                    .status(status)
                    .description("OIDC login refused");
                crate::audit::record(&state.store, entry).await;
                return Err(refusal);
            }
            state
                .store
                .update_synced_link(user.id, &link, groups.as_ref())
                .await?;
            (user, false)
        }
        None => {
            if !settings.allow_signups {
                return Err(Error::refused(
                    StatusCode::FORBIDDEN,
                    "Signups are disabled for OIDC: ask an administrator to create your account first.",
                ));
            }
            (
                create_user(state, settings, claims, &email, &link, groups.as_ref()).await?,
                true,
            )
        }
    };
    let token = crate::domain::keys::issue_key(
        state,
        user.id,
        LoginType::Oidc,
        "",
        state.options.session_duration,
        Some(crate::domain::accounts::login_entry(Some(&user))),
    )
    .await?;
    tracing::info!(user = %user.username, created, "OIDC sign-in");
    Ok(OidcLogin {
        user,
        token,
        created,
    })
}

fn claim_str<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    claims.get(name).and_then(Value::as_str)
}

/// `email_verified` (unless told to ignore it) and the domain allow-list.
fn check_email(
    settings: &OidcSettings,
    claims: &Map<String, Value>,
    email: &str,
) -> Result<(), Error> {
    // Some providers send the boolean as a string.
    let unverified = match claims.get("email_verified") {
        Some(Value::Bool(b)) => !b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("false"),
        _ => false,
    };
    if unverified && !settings.ignore_email_verified {
        return Err(Error::refused(
            StatusCode::FORBIDDEN,
            format!("Verify the {email:?} email address on your identity provider to sign in."),
        ));
    }
    if !settings.email_domains.is_empty() {
        let domain = email.rsplit_once('@').map(|(_, d)| d).unwrap_or_default();
        let allowed = settings
            .email_domains
            .iter()
            .any(|d| d.trim_start_matches('@').eq_ignore_ascii_case(domain));
        if !allowed {
            return Err(Error::refused(
                StatusCode::FORBIDDEN,
                format!(
                    "Your email {email:?} is not in the domains allowed to sign in: {}.",
                    settings.email_domains.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A returning user must be an OIDC user (a password account is never taken over by whoever
/// controls the same address at the provider) and not suspended.
fn check_existing(user: &UserRow) -> Result<(), Error> {
    if user.login_type != LoginType::Oidc.as_str() {
        return Err(Error::Refused {
            status: StatusCode::FORBIDDEN,
            message: format!(
                "Incorrect login type, attempting to use \"oidc\" but user is of login type {:?}.",
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
/// username from the configured claim (or the email's local part).
async fn create_user(
    state: &AppState,
    settings: &OidcSettings,
    claims: &Map<String, Value>,
    email: &str,
    link: &LinkUpdate,
    groups: Option<&GroupSync>,
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
    let wanted = claim_str(claims, &settings.username_field)
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| email.split('@').next().unwrap_or_default());
    let base = username_from(wanted);
    let name = claim_str(claims, &settings.name_field)
        .filter(|n| validate::real_name(n).is_ok())
        .unwrap_or_default()
        .to_string();
    let mut candidate = base.clone();
    for _ in 0..USERNAME_ATTEMPTS {
        if !state.store.username_taken(&candidate).await? {
            let user = NewUser {
                id: Uuid::new_v4(),
                email: email.to_string(),
                username: candidate.clone(),
                name: name.clone(),
                hashed_password: String::new(),
                status: UserStatus::Active.as_str().into(),
                rbac_roles: vec![],
                login_type: LoginType::Oidc.as_str().into(),
                organization_ids: vec![org.id],
            };
            // Coder records a sign-up through the provider as the new user registering.
            let log = crate::audit::Entry::new(
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
                .create_synced_user(user, link, groups, Some(&log))
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

    fn settings(domains: &[&str]) -> OidcSettings {
        let mut s = OidcSettings::new(
            url::Url::parse("http://idp.test").expect("url"),
            "c".into(),
            "s".into(),
        );
        s.email_domains = domains.iter().map(|d| d.to_string()).collect();
        s
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn emails_must_be_verified_and_in_an_allowed_domain() {
        let any = settings(&[]);
        let verified = claims(serde_json::json!({"email_verified": true}));
        let unverified = claims(serde_json::json!({"email_verified": false}));
        let as_string = claims(serde_json::json!({"email_verified": "false"}));
        assert!(check_email(&any, &verified, "a@x.io").is_ok());
        assert!(check_email(&any, &claims(serde_json::json!({})), "a@x.io").is_ok());
        assert!(check_email(&any, &unverified, "a@x.io").is_err());
        assert!(check_email(&any, &as_string, "a@x.io").is_err());
        let mut lenient = settings(&[]);
        lenient.ignore_email_verified = true;
        assert!(check_email(&lenient, &unverified, "a@x.io").is_ok());

        let corp = settings(&["corp.example", "@Other.Example"]);
        assert!(check_email(&corp, &verified, "a@CORP.example").is_ok());
        assert!(check_email(&corp, &verified, "a@other.example").is_ok());
        for bad in [
            "a@evil.example",
            "a@corp.example.evil",
            "a@sub.corp.example",
            "corp.example",
        ] {
            assert!(check_email(&corp, &verified, bad).is_err(), "{bad}");
        }
    }
}
