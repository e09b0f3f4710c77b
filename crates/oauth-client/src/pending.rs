//! A sign-in in flight. Between sending the browser to the provider and its return, coderd must
//! remember the `state` it sent (to refuse a callback it did not start: login CSRF), the `nonce`
//! the ID token must carry (to refuse a token minted for another attempt), the PKCE verifier
//! (so a stolen code is useless), and where the person wanted to go. All of it is sealed into
//! one short-lived cookie bound to the browser instead of a database row: starting a sign-in
//! writes nothing, and an abandoned one leaves nothing behind.

use chrono::{DateTime, Duration, Utc};
use subtle::ConstantTimeEq;

use crate::{Error, KeyRing, Result};

const PURPOSE: &str = "oauth_pending_auth";

/// How long a person has to finish signing in at the provider.
pub const LIFETIME_MINUTES: i64 = 10;

#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingAuth {
    /// Which sign-in this is for ("oidc", "github", an external auth provider's id).
    pub provider: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    pub pkce_verifier: String,
    /// Where to send the browser afterwards (a path on this deployment).
    pub redirect: String,
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for PendingAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAuth")
            .field("provider", &self.provider)
            .field("redirect", &self.redirect)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl PendingAuth {
    pub(crate) fn new(
        provider: &str,
        state: String,
        nonce: Option<String>,
        pkce_verifier: String,
        redirect: &str,
    ) -> Self {
        Self {
            provider: provider.to_string(),
            state,
            nonce,
            pkce_verifier,
            redirect: redirect.to_string(),
            expires_at: Utc::now() + Duration::minutes(LIFETIME_MINUTES),
        }
    }

    /// The cookie value: sealed, so the browser can neither read the verifier nor forge it.
    pub fn seal(&self, keys: &KeyRing) -> String {
        // Serialising a struct of strings and a timestamp cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        keys.seal(PURPOSE, &json)
    }

    /// Opens the cookie of a returning browser and checks it started this sign-in: the same
    /// provider, not expired, and the `state` the provider echoed equal to ours.
    pub fn open(keys: &KeyRing, cookie: Option<&str>, provider: &str, state: &str) -> Result<Self> {
        let restart = "Start signing in again from the login page.";
        let cookie = cookie.ok_or_else(|| {
            Error::BadState(format!(
                "No sign-in is in progress in this browser (its state cookie is missing). {restart}"
            ))
        })?;
        let pending: PendingAuth = keys
            .open(PURPOSE, cookie)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or_else(|| {
                Error::BadState(format!("The sign-in state cookie is not valid. {restart}"))
            })?;
        if pending.provider != provider {
            return Err(Error::BadState(format!(
                "The sign-in in progress is for another provider. {restart}"
            )));
        }
        if pending.expires_at <= Utc::now() {
            return Err(Error::BadState(format!(
                "The sign-in took longer than {LIFETIME_MINUTES} minutes. {restart}"
            )));
        }
        if !bool::from(pending.state.as_bytes().ct_eq(state.as_bytes())) {
            return Err(Error::BadState(format!(
                "The state returned by the identity provider does not match the sign-in this browser started. {restart}"
            )));
        }
        Ok(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> KeyRing {
        KeyRing::from_base64(&[KeyRing::generate_key()]).expect("key")
    }

    #[test]
    fn a_sealed_attempt_opens_only_with_its_state_provider_and_in_time() {
        let keys = keys();
        let pending = PendingAuth::new("oidc", "st".into(), Some("n".into()), "v".into(), "/x");
        let cookie = pending.seal(&keys);
        // Sealed, not merely encoded: the plaintext's provider name is not in it (a four-letter
        // run turns up in random base64 about once in 80,000 cookies).
        assert!(!cookie.contains("oidc"), "{cookie}");
        assert_eq!(
            PendingAuth::open(&keys, Some(&cookie), "oidc", "st").expect("open"),
            pending
        );
        for (cookie, provider, state) in [
            (Some(cookie.as_str()), "oidc", "other"),
            (Some(cookie.as_str()), "github", "st"),
            (None, "oidc", "st"),
            (Some("garbage"), "oidc", "st"),
        ] {
            let err = PendingAuth::open(&keys, cookie, provider, state).expect_err("refused");
            assert!(matches!(err, Error::BadState(_)), "{err}");
        }
        let mut old = pending.clone();
        old.expires_at = Utc::now() - Duration::seconds(1);
        let err = PendingAuth::open(&keys, Some(&old.seal(&keys)), "oidc", "st").expect_err("old");
        assert!(err.to_string().contains("minutes"), "{err}");
        // A cookie sealed by another deployment's key is refused.
        assert!(PendingAuth::open(&self::keys(), Some(&cookie), "oidc", "st").is_err());
    }
}
