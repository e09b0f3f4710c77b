//! The account's git pages and the create form's external auth, through the real HTTP
//! server: a provider the template needs blocks the form until linked; the settings pages
//! list, unlink, show and regenerate.

use std::sync::Arc;

use codersdk::proto::ExternalAuthProviderResource;
use oauth_client::{KeyRing, TokenSet};
use testutil::{PASSWORD, TestApp};

use crate::common::{Web, echo_template};

async fn app() -> anyhow::Result<TestApp> {
    let providers = coderd_core::external_auth::config::from_env(
        [
            ("CODER_EXTERNAL_AUTH_0_ID", "corp-git"),
            ("CODER_EXTERNAL_AUTH_0_DISPLAY_NAME", "Corp Git"),
            ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "client"),
            (
                "CODER_EXTERNAL_AUTH_0_AUTH_URL",
                "https://git.corp.example/oauth/authorize",
            ),
            (
                "CODER_EXTERNAL_AUTH_0_TOKEN_URL",
                "https://git.corp.example/oauth/token",
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    )?;
    let keys = Arc::new(KeyRing::from_base64(&[KeyRing::generate_key()])?);
    TestApp::with_options(move |o| {
        o.provisioner_daemons = 1;
        o.front_doors.push(Arc::new(dashboard::router));
        o.deployment.external_auth = providers;
        o.deployment.external_token_keys = Some(keys);
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_needed_provider_blocks_the_form_and_the_settings_pages_link_and_unlink()
-> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let mut template = echo_template();
    if let Some(import) = template.import.as_mut() {
        import.external_auth_providers = vec![ExternalAuthProviderResource {
            id: "corp-git".into(),
            optional: false,
        }];
    }
    let template_id = app
        .echo_template(&owner, "gitted", &template, &[])
        .await?
        .id;
    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;

    let form = web.get("/templates/gitted/workspace").await?;
    assert_eq!(form.status, 200);
    assert!(
        form.body.contains("href=\"/external-auth/corp-git\"")
            && form.body.contains("Login with Corp Git"),
        "{}",
        form.body
    );
    assert!(
        form.body
            .contains(" disabled aria-describedby=\"external-auth-hint\"")
    );
    let settings = web.get("/settings/external-auth").await?;
    assert!(settings.body.contains("Not linked"), "{}", settings.body);

    // Linked (as the callback would store it): the form opens, the settings page says so.
    let me = owner.user("me").await?;
    let provider = app
        .state
        .external_auth
        .get("corp-git")
        .ok_or_else(|| anyhow::anyhow!("provider"))?;
    let tokens = TokenSet {
        access_token: "corp-token".into(),
        refresh_token: None,
        expires_at: None,
        extra: Default::default(),
    };
    coderd_core::external_auth::links::save(&app.state, me.id, provider, &tokens).await?;
    let form = web.get("/templates/gitted/workspace").await?;
    assert!(
        form.body.contains("Authenticated with Corp Git"),
        "{}",
        form.body
    );
    assert!(!form.body.contains(" disabled"));
    let settings = web.get("/settings/external-auth").await?;
    assert!(settings.body.contains("Authenticated"), "{}", settings.body);
    // The workspace page shows its owner the template's providers.
    testutil::provisioning::running_workspace(&owner, template_id, "dev").await?;
    let ws = web.get("/@owner/dev").await?;
    assert!(
        ws.body.contains("Authenticated with Corp Git"),
        "{}",
        ws.body
    );
    let csrf = settings.csrf();
    let refused = web
        .post("/settings/external-auth/corp-git/unlink", &[])
        .await?;
    assert_eq!(refused.status, 403, "no CSRF token");
    let unlinked = web
        .post(
            "/settings/external-auth/corp-git/unlink",
            &[("csrf", &csrf)],
        )
        .await?;
    assert_eq!(unlinked.status, 303, "{}", unlinked.body);
    let settings = web.get("/settings/external-auth").await?;
    assert!(settings.body.contains("Not linked"), "{}", settings.body);

    // The SSH key: shown, and regenerated on request.
    let keys = web.get("/settings/ssh-keys").await?;
    let shown = |body: &str| {
        body.split("<code id=\"public-key\">")
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let before = shown(&keys.body);
    assert!(before.starts_with("ssh-ed25519 "), "{}", keys.body);
    let csrf = keys.csrf();
    let regenerated = web.post("/settings/ssh-keys", &[("csrf", &csrf)]).await?;
    assert_eq!(regenerated.status, 303);
    let after = shown(&web.get("/settings/ssh-keys").await?.body);
    assert!(after.starts_with("ssh-ed25519 ") && after != before);
    Ok(())
}
