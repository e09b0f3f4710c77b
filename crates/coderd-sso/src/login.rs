//! Whether a verified OIDC identity may sign in: its claims checked (email present, verified
//! and in an allowed domain) before `account` decides as which user.

use axum::http::StatusCode;
use codersdk::users::LoginType;
use oauth_client::oidc::OidcIdentity;
use serde_json::{Map, Value};

use super::account::{self, Identity, Login};
use super::{Error, OidcSettings};
use coderd_core::state::AppState;
use coderd_store::GroupSync;

/// Signs in the person behind a verified OIDC identity.
pub async fn oidc_login(
    state: &AppState,
    settings: &OidcSettings,
    identity: OidcIdentity,
) -> Result<Login, Error> {
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
    let username = claim_str(claims, &settings.username_field)
        .unwrap_or_default()
        .to_string();
    let name = claim_str(claims, &settings.name_field)
        .unwrap_or_default()
        .to_string();
    account::sign_in(
        state,
        Identity {
            login_type: LoginType::Oidc,
            linked_id: format!("{issuer}||{}", identity.subject),
            email,
            username,
            name,
            claims: Value::Object(claims.clone()),
            tokens: identity.tokens,
            allow_signups: settings.allow_signups,
            groups,
        },
    )
    .await
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

#[cfg(test)]
mod tests {
    use super::*;

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
