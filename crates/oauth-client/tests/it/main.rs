//! The client layer against a real OpenID provider (oidc-provider on loopback; see
//! `testutil::idp`): the code flow with PKCE, state and nonce, ID-token verification, userinfo,
//! refresh, and the same provider used as a plain OAuth2 server.

use anyhow::{Context, bail};
use oauth_client::oauth2::{OAuth2Client, OAuth2Config};
use oauth_client::oidc::{OidcClient, OidcConfig};
use oauth_client::{Error, HttpClient, PendingAuth};
use serde_json::json;
use testutil::idp::{Browser, Landing, Tamper, TestIdp};
use url::Url;

const CALLBACK: &str = "http://127.0.0.1:9/callback";

struct Setup {
    idp: TestIdp,
    client: OidcClient,
}

async fn setup() -> anyhow::Result<Setup> {
    let idp = TestIdp::start().await?;
    let (client_id, client_secret) = idp.register_client(CALLBACK).await?;
    idp.add_account(
        "alice-sub",
        json!({"email": "alice@example.com", "email_verified": true,
               "preferred_username": "alice", "name": "Alice", "groups": ["devs", "ops"]}),
    )
    .await?;
    idp.login_as("alice-sub").await?;
    let client = OidcClient::new(
        "oidc",
        OidcConfig {
            issuer: idp.issuer.clone(),
            client_id,
            client_secret,
            redirect_url: Url::parse(CALLBACK)?,
            scopes: ["openid", "profile", "email", "groups", "offline_access"]
                .map(String::from)
                .to_vec(),
            auth_url_params: vec![("prompt".into(), "consent".into())],
            ignore_userinfo: false,
        },
        HttpClient::new()?,
    );
    Ok(Setup { idp, client })
}

/// Walks a browser through the provider's login; returns the callback's `code` and `state`.
async fn authorize(url: Url) -> anyhow::Result<(String, String)> {
    let Landing::Stopped(callback) = Browser::new().navigate(url, Some(CALLBACK)).await? else {
        bail!("the provider did not redirect back");
    };
    let param = |name: &str| {
        callback
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .with_context(|| format!("callback without {name}: {callback}"))
    };
    Ok((param("code")?, param("state")?))
}

#[tokio::test]
async fn a_code_flow_yields_verified_claims_and_refreshable_tokens() -> anyhow::Result<()> {
    let Setup { client, idp: _idp } = setup().await?;
    let (url, pending) = client.begin("/workspaces").await?;
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let has = |k: &str, v: &str| query.iter().any(|(a, b)| a == k && b == v);
    assert!(has("code_challenge_method", "S256"), "{url}");
    assert!(
        has("state", &pending.state) && has("response_type", "code"),
        "{url}"
    );
    assert!(query.iter().any(|(k, _)| k == "nonce"), "{url}");
    assert!(
        !url.as_str().contains(&pending.pkce_verifier),
        "the verifier never leaves"
    );

    let (code, state) = authorize(url).await?;
    assert_eq!(state, pending.state);
    let identity = client.finish(&pending, &code).await?;
    assert_eq!(identity.subject, "alice-sub");
    assert_eq!(identity.claims["email"], "alice@example.com");
    assert_eq!(identity.claims["email_verified"], true);
    assert_eq!(identity.claims["preferred_username"], "alice");
    assert_eq!(identity.claims["groups"], json!(["devs", "ops"]));
    assert_eq!(
        identity.claims["iss"],
        client.config().issuer.as_str().trim_end_matches('/')
    );

    let first = identity.tokens;
    assert!(
        first.refresh_token.is_some(),
        "offline access yields a refresh token"
    );
    assert!(first.expires_at.is_some());
    let refreshed = client.refresh(&first).await?;
    assert_ne!(refreshed.access_token, first.access_token);
    assert!(refreshed.refresh_token.is_some());
    // oidc-provider rotates refresh tokens: the old one is spent.
    let again = client
        .refresh(&first)
        .await
        .expect_err("a spent refresh token");
    assert!(matches!(again, Error::Refused(_)), "{again}");
    Ok(())
}

#[tokio::test]
async fn codes_are_single_use_and_bound_to_their_verifier() -> anyhow::Result<()> {
    let Setup { client, idp: _idp } = setup().await?;
    let (url, pending) = client.begin("/").await?;
    let (code, _) = authorize(url).await?;
    client.finish(&pending, &code).await?;
    let replay = client.finish(&pending, &code).await.expect_err("replayed");
    assert!(
        matches!(&replay, Error::Refused(m) if m.contains("invalid_grant")),
        "{replay}"
    );

    // A code stolen from one attempt is useless with another attempt's verifier.
    let (url, _) = client.begin("/").await?;
    let (code, _) = authorize(url).await?;
    let (_, other) = client.begin("/").await?;
    let stolen = client
        .finish(&other, &code)
        .await
        .expect_err("wrong verifier");
    assert!(matches!(stolen, Error::Refused(_)), "{stolen}");
    Ok(())
}

#[tokio::test]
async fn damaged_id_tokens_are_refused_with_the_reason() -> anyhow::Result<()> {
    let Setup { client, idp } = setup().await?;
    for (tamper, reason) in [
        (Tamper::BadSignature, "signature does not verify"),
        (Tamper::WrongAudience, "another client"),
        (Tamper::Expired, "expired"),
    ] {
        let (url, pending) = client.begin("/").await?;
        let (code, _) = authorize(url).await?;
        idp.tamper_next_id_token(tamper).await?;
        let err = client.finish(&pending, &code).await.expect_err("refused");
        assert!(
            matches!(&err, Error::InvalidToken(m) if m.contains(reason)),
            "{tamper:?}: {err}"
        );
    }
    // A token for another attempt (its nonce) is refused even though it verifies otherwise.
    let (url, pending) = client.begin("/").await?;
    let (code, _) = authorize(url).await?;
    let mut wrong_nonce: PendingAuth = pending.clone();
    wrong_nonce.nonce = Some("another-attempt".into());
    let err = client.finish(&wrong_nonce, &code).await.expect_err("nonce");
    assert!(
        matches!(&err, Error::InvalidToken(m) if m.contains("nonce")),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn the_plain_oauth2_client_runs_the_same_flow() -> anyhow::Result<()> {
    let Setup { client, idp: _idp } = setup().await?;
    let oidc = client.config();
    let oauth = OAuth2Client::new(
        "github",
        OAuth2Config {
            auth_url: oidc.issuer.join("/auth")?,
            token_url: oidc.issuer.join("/token")?,
            client_id: oidc.client_id.clone(),
            client_secret: oidc.client_secret.clone(),
            redirect_url: oidc.redirect_url.clone(),
            scopes: vec!["openid".into(), "offline_access".into()],
            auth_url_params: vec![("prompt".into(), "consent".into())],
            credentials_in_body: false,
            pkce: true,
            extra_token_keys: Vec::new(),
        },
        HttpClient::new()?,
    );
    let (url, pending) = oauth.begin("/");
    assert!(
        url.query_pairs()
            .any(|(k, v)| k == "code_challenge_method" && v == "S256")
    );
    let (code, state) = authorize(url).await?;
    assert_eq!(state, pending.state);
    let tokens = oauth.finish(&pending, &code).await?;
    assert!(!tokens.access_token.is_empty() && tokens.refresh_token.is_some());
    let refreshed = oauth.refresh(&tokens).await?;
    assert_ne!(refreshed.access_token, tokens.access_token);
    assert!(oauth.finish(&pending, &code).await.is_err(), "single use");
    Ok(())
}

#[tokio::test]
async fn an_unreachable_provider_is_reported_not_fatal() -> anyhow::Result<()> {
    let client = OidcClient::new(
        "oidc",
        OidcConfig {
            issuer: Url::parse("http://127.0.0.1:9")?,
            client_id: "c".into(),
            client_secret: "s".into(),
            redirect_url: Url::parse(CALLBACK)?,
            scopes: vec!["openid".into()],
            auth_url_params: vec![],
            ignore_userinfo: false,
        },
        HttpClient::new()?,
    );
    let err = client.begin("/").await.expect_err("down");
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    assert!(
        !format!("{client:?}").contains("\"s\""),
        "the secret is never printed"
    );
    Ok(())
}
