//! User secrets through the API: Coder's shapes, validation and conflicts, values that go in
//! and never come out, other users' secrets that do not exist for the caller, and values that
//! are only ever sealed in the database.

use codersdk::usersecrets::{CreateUserSecretRequest, UpdateUserSecretRequest, UserSecret};
use codersdk::{Client, ClientError};
use oauth_client::KeyRing;
use reqwest::Method;
use testutil::TestApp;

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

fn secret(name: &str, value: &str, env: &str) -> CreateUserSecretRequest {
    CreateUserSecretRequest {
        name: name.into(),
        value: value.into(),
        description: format!("{name} for builds"),
        env_name: env.into(),
        file_path: String::new(),
    }
}

/// Every response body of the secrets API for `client`, as text.
async fn bodies(client: &Client, paths: &[String]) -> anyhow::Result<String> {
    let mut all = String::new();
    for path in paths {
        let resp = client.request(Method::GET, path)?.send().await?;
        all.push_str(&resp.text().await?);
    }
    Ok(all)
}

/// Every row of `table` as text (bytea as hex), for looking for a value in clear.
async fn table_text(app: &TestApp, table: &str) -> anyhow::Result<String> {
    let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT t::text FROM {table} t"
    )))
    .fetch_all(app.pool())
    .await?;
    Ok(rows.join("\n"))
}

#[tokio::test]
async fn secrets_go_in_and_never_come_out() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let value = "s3cret-value-9f2c7d1e";

    let created = owner
        .create_user_secret("me", &secret("github", value, "GITHUB_TOKEN"))
        .await?;
    assert_eq!(created.name, "github");
    assert_eq!(created.env_name, "GITHUB_TOKEN");
    assert_eq!(created.description, "github for builds");
    // The creation answers 201 in Coder's shape, without the value.
    let resp = owner
        .request(Method::POST, "/api/v2/users/me/secrets")?
        .json(&secret("file", "file-content-77aa", ""))
        .send()
        .await?;
    assert_eq!(resp.status(), 201);
    let body: serde_json::Value = resp.json().await?;
    let keys: Vec<&str> = body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "created_at",
            "description",
            "env_name",
            "file_path",
            "id",
            "name",
            "updated_at"
        ]
    );

    let listed = owner.user_secrets("me").await?;
    assert_eq!(
        listed.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["file", "github"]
    );
    let got: UserSecret = owner.user_secret("owner", "github").await?;
    assert_eq!(got, created);

    let updated = owner
        .update_user_secret(
            "me",
            "github",
            &UpdateUserSecretRequest {
                value: Some("rotated-value-4b8e".into()),
                file_path: Some("~/.config/gh/token".into()),
                ..UpdateUserSecretRequest::default()
            },
        )
        .await?;
    assert_eq!(updated.file_path, "~/.config/gh/token");
    assert_eq!(updated.env_name, "GITHUB_TOKEN", "absent fields are kept");
    assert_eq!(updated.description, "github for builds");

    // Neither value shows in any answer of the API.
    let id = created.id;
    let shown = bodies(
        &owner,
        &[
            "/api/v2/users/me/secrets".into(),
            "/api/v2/users/me/secrets/github".into(),
            format!("/api/v2/users/{}/secrets/file", created.id),
        ],
    )
    .await?;
    for v in [value, "rotated-value-4b8e", "file-content-77aa"] {
        assert!(!shown.contains(v), "{v} in {shown}");
    }
    assert!(shown.contains(&id.to_string()));

    // Nor in the database: the rows hold sealed values only, each bound to its row.
    let stored = table_text(&app, "user_secrets").await?;
    for v in [value, "rotated-value-4b8e", "file-content-77aa"] {
        assert!(!stored.contains(v), "{v} stored in clear: {stored}");
        assert!(!stored.contains(&hex::encode(v)));
    }
    let sealed: String = sqlx::query_scalar("SELECT value FROM user_secrets WHERE name = 'github'")
        .fetch_one(app.pool())
        .await?;
    let key_id: String =
        sqlx::query_scalar("SELECT value_key_id FROM user_secrets WHERE name = 'github'")
            .fetch_one(app.pool())
            .await?;
    assert!(sealed.starts_with(&format!("{key_id}:")), "{sealed}");

    owner.delete_user_secret("me", "github").await?;
    let gone = owner
        .user_secret("me", "github")
        .await
        .expect_err("refused");
    assert_eq!(status(&gone), 404);
    let again = owner
        .delete_user_secret("me", "github")
        .await
        .expect_err("refused");
    assert_eq!(status(&again), 404);
    Ok(())
}

#[tokio::test]
async fn other_users_secrets_do_not_exist_for_anyone_else() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice, alice_user) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;
    alice
        .create_user_secret("me", &secret("token", "alice-only-31c4", "TOKEN"))
        .await?;

    for (who, client) in [("bob", &bob), ("the owner", &owner)] {
        for user in ["alice", alice_user.id.to_string().as_str()] {
            let e = client.user_secrets(user).await.expect_err("refused");
            assert_eq!(status(&e), 404, "{who} lists {user}'s secrets");
            let e = client
                .user_secret(user, "token")
                .await
                .expect_err("refused");
            assert_eq!(status(&e), 404, "{who} reads {user}'s secret");
            let e = client
                .update_user_secret(
                    user,
                    "token",
                    &UpdateUserSecretRequest {
                        value: Some("taken-over".into()),
                        ..UpdateUserSecretRequest::default()
                    },
                )
                .await
                .expect_err("refused");
            assert_eq!(status(&e), 404, "{who} updates {user}'s secret");
            let e = client
                .delete_user_secret(user, "token")
                .await
                .expect_err("refused");
            assert_eq!(status(&e), 404, "{who} deletes {user}'s secret");
            let e = client
                .create_user_secret(user, &secret("planted", "x", ""))
                .await
                .expect_err("refused");
            assert_eq!(status(&e), 404, "{who} creates a secret for {user}");
        }
    }
    // Bob's own list is his; alice's secret is untouched.
    assert!(bob.user_secrets("me").await?.is_empty());
    assert_eq!(alice.user_secrets("me").await?.len(), 1);
    let e = app
        .client()
        .user_secrets("alice")
        .await
        .expect_err("refused");
    assert_eq!(status(&e), 401);
    Ok(())
}

#[tokio::test]
async fn bad_secrets_are_refused_with_coders_messages() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let refused = |e: ClientError| match e {
        ClientError::Api { status, response } => (status, response),
        other => panic!("not an API error: {other}"),
    };
    for (req, field) in [
        (secret("", "v", ""), "name"),
        (secret("a/b", "v", ""), "name"),
        (secret("ok", "", ""), "value"),
        (secret("ok", "v", "PATH"), "env_name"),
        (secret("ok", "v", "CODER_AGENT_TOKEN"), "env_name"),
        (secret("ok", "v", "1BAD"), "env_name"),
        (
            CreateUserSecretRequest {
                file_path: "relative/path".into(),
                ..secret("ok", "v", "")
            },
            "file_path",
        ),
        (secret("ok", &"x".repeat(24 * 1024 + 1), ""), "value"),
    ] {
        let (code, body) = refused(
            owner
                .create_user_secret("me", &req)
                .await
                .expect_err("refused"),
        );
        assert_eq!(code, 400, "{req:?}");
        assert_eq!(body.message, "Validation failed.");
        assert_eq!(body.validations[0].field, field, "{req:?}: {body:?}");
    }

    owner
        .create_user_secret("me", &secret("one", "v1", "SHARED"))
        .await?;
    for (req, field) in [
        (secret("one", "v2", ""), "name"),
        (secret("two", "v2", "SHARED"), "env_name"),
    ] {
        let (code, body) = refused(
            owner
                .create_user_secret("me", &req)
                .await
                .expect_err("refused"),
        );
        assert_eq!(code, 409, "{req:?}");
        assert_eq!(body.validations[0].field, field);
    }
    let (code, body) = refused(
        owner
            .update_user_secret("me", "one", &UpdateUserSecretRequest::default())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 400);
    assert_eq!(body.message, "At least one field must be provided.");
    assert_eq!(
        owner.user_secrets("me").await?.len(),
        1,
        "nothing else was made"
    );
    Ok(())
}

#[tokio::test]
async fn configured_keys_seal_new_values_and_site_sealed_ones_still_open() -> anyhow::Result<()> {
    // Without keys: sealed by the key coderd keeps.
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    owner
        .create_user_secret("me", &secret("before", "before-keys-1", "BEFORE"))
        .await?;
    let site_key: String =
        sqlx::query_scalar("SELECT value FROM site_configs WHERE key = 'user_secrets_key'")
            .fetch_one(app.pool())
            .await?;
    let site_id: String = sqlx::query_scalar("SELECT value_key_id FROM user_secrets")
        .fetch_one(app.pool())
        .await?;
    let site = KeyRing::from_base64(&[site_key])?;
    assert!(
        site.is_current(&format!("{site_id}:x")),
        "sealed by the site key"
    );

    // With CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS: new values are sealed by the first key.
    let key = KeyRing::generate_key();
    let configured = KeyRing::from_base64(std::slice::from_ref(&key))?;
    let replica = app
        .replica(|o| {
            o.deployment.external_token_keys = Some(std::sync::Arc::new(
                KeyRing::from_base64(&[key]).expect("key"),
            ));
        })
        .await?;
    let there = Client::new(replica.url.clone()).with_token(
        owner
            .token()
            .ok_or_else(|| anyhow::anyhow!("the owner's token"))?
            .to_string(),
    );
    there
        .create_user_secret("me", &secret("after", "after-keys-2", "AFTER"))
        .await?;
    let after_id: String =
        sqlx::query_scalar("SELECT value_key_id FROM user_secrets WHERE name = 'after'")
            .fetch_one(app.pool())
            .await?;
    assert!(configured.is_current(&format!("{after_id}:x")));
    assert_ne!(after_id, site_id);
    let stored = table_text(&app, "user_secrets").await?;
    assert!(!stored.contains("after-keys-2") && !stored.contains("before-keys-1"));
    Ok(())
}
