//! The signed app token: a cookie caching one authorisation decision (this caller's key may
//! open this app, which is at this agent and port) for [`LIFETIME`], so the proxy's hot path
//! does no database work. It is sealed (AES-256-GCM, authenticated) with the deployment's app
//! keys, bound to the app it was minted for and to the caller's key id, and carries its expiry:
//! a forged, altered, expired or transplanted token is simply not used, and the request is
//! authorised afresh. Revoking a key, suspending a user or narrowing a sharing level therefore
//! takes effect within [`LIFETIME`].

use std::time::Duration;

use chrono::Utc;
use oauth_client::KeyRing;

use super::access::Target;

/// The cookie holding the signed token (one per app: path apps scope it to the app's path,
/// subdomain apps to their host).
pub const TOKEN_COOKIE: &str = "coder_signed_app_token";
/// The cookie an app host keeps its app-scoped API key in.
pub const SESSION_COOKIE: &str = "coder_subdomain_app_session_token";
/// How long a decision is trusted.
pub const LIFETIME: Duration = Duration::from_secs(60);

const PURPOSE: &str = "coder-app-token-v1";

#[derive(serde::Serialize, serde::Deserialize)]
struct Claims {
    /// Which app (its canonical name, see `super::AppRequest::id`).
    app: String,
    /// The id of the key that was authorised ("" for an anonymous caller of a public app).
    key: String,
    /// Unix seconds.
    expires: i64,
    target: Target,
}

/// Mints a token for `app` opened with key `key_id`.
pub fn mint(keys: &KeyRing, app: &str, key_id: &str, target: &Target) -> String {
    let claims = Claims {
        app: app.to_string(),
        key: key_id.to_string(),
        expires: Utc::now().timestamp() + LIFETIME.as_secs() as i64,
        target: target.clone(),
    };
    // Serialising a struct of strings and numbers cannot fail.
    let json = serde_json::to_vec(&claims).unwrap_or_default();
    keys.seal(PURPOSE, &json)
}

/// The target a valid token for `app` and `key_id` vouches for.
pub fn check(keys: &KeyRing, sealed: &str, app: &str, key_id: &str) -> Option<Target> {
    let plain = keys.open(PURPOSE, sealed).ok()?;
    let claims: Claims = serde_json::from_slice(&plain).ok()?;
    (claims.app == app && claims.key == key_id && claims.expires > Utc::now().timestamp())
        .then_some(claims.target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            workspace_id: uuid::Uuid::new_v4(),
            agent_id: uuid::Uuid::new_v4(),
            port: 8080,
            base_path: "/".into(),
            tls: false,
            cors: super::super::cors::Cors::Simple,
        }
    }

    #[test]
    fn a_token_vouches_only_for_its_app_and_key() {
        let keys = KeyRing::ephemeral();
        let t = target();
        let sealed = mint(&keys, "path:alice/dev/main/code", "abc", &t);
        assert_eq!(
            check(&keys, &sealed, "path:alice/dev/main/code", "abc"),
            Some(t)
        );
        assert_eq!(
            check(&keys, &sealed, "path:alice/dev/main/other", "abc"),
            None
        );
        assert_eq!(
            check(&keys, &sealed, "path:alice/dev/main/code", "xyz"),
            None
        );
        assert_eq!(
            check(
                &KeyRing::ephemeral(),
                &sealed,
                "path:alice/dev/main/code",
                "abc"
            ),
            None
        );
        let mut forged = sealed.clone();
        forged.pop();
        forged.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(
            check(&keys, &forged, "path:alice/dev/main/code", "abc"),
            None
        );
    }

    #[test]
    fn an_expired_token_is_refused() {
        let keys = KeyRing::ephemeral();
        let claims = Claims {
            app: "a".into(),
            key: "k".into(),
            expires: Utc::now().timestamp() - 1,
            target: target(),
        };
        let sealed = keys.seal(
            PURPOSE,
            &serde_json::to_vec(&claims).expect("test input is valid"),
        );
        assert_eq!(check(&keys, &sealed, "a", "k"), None);
    }
}
