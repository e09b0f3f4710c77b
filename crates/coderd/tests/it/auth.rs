//! First-user setup, password login, sessions and API tokens.

use codersdk::apikeys::{CreateTokenRequest, NANOS_PER_SECOND};
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use codersdk::{Client, ClientError};
use testutil::{PASSWORD, TestApp};

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

#[tokio::test]
async fn first_user_is_created_once() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let client = app.client();
    assert!(!client.has_first_user().await?);
    let (owner, first) = app.owner().await?;
    assert!(client.has_first_user().await?);

    let me = owner.user("me").await?;
    assert_eq!(me.id, first.user_id);
    assert_eq!(
        me.roles.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["owner"]
    );
    assert_eq!(me.organization_ids, vec![first.organization_id]);
    let org = owner.organization("coder").await?;
    assert!(org.is_default);
    assert_eq!(org.id, first.organization_id);

    let again = client
        .create_first_user(&CreateFirstUserRequest {
            email: "other@example.com".into(),
            username: "other".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await
        .expect_err("second first user");
    assert_eq!(status(&again), 409);
    assert_eq!(owner.users("").await?.count, 1, "nothing written");
    Ok(())
}

#[tokio::test]
async fn concurrent_first_user_requests_create_exactly_one() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let attempts = (0..6).map(|i| {
        let client = app.client();
        async move {
            client
                .create_first_user(&CreateFirstUserRequest {
                    email: format!("u{i}@example.com"),
                    username: format!("u{i}"),
                    password: PASSWORD.into(),
                    ..Default::default()
                })
                .await
        }
    });
    let results = futures::future::join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    for err in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(status(err), 409);
    }
    Ok(())
}

#[tokio::test]
async fn first_user_input_is_validated() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let err = app
        .client()
        .create_first_user(&CreateFirstUserRequest {
            email: "not-an-email".into(),
            username: "bad_name".into(),
            password: "short".into(),
            ..Default::default()
        })
        .await
        .expect_err("invalid");
    let ClientError::Api { status, response } = err else {
        panic!("expected an API error, got {err}");
    };
    assert_eq!(status, 400);
    let mut fields: Vec<_> = response
        .validations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    fields.sort();
    assert_eq!(fields, ["email", "password", "username"]);
    assert!(!app.client().has_first_user().await?, "nothing written");
    Ok(())
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_answer() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    app.owner().await?;
    let login = |email: &str, password: &str| {
        let client = app.client();
        let req = LoginWithPasswordRequest {
            email: email.into(),
            password: password.into(),
        };
        async move { client.login_with_password(&req).await }
    };
    let wrong = login("owner@example.com", "not the password")
        .await
        .expect_err("wrong");
    let unknown = login("nobody@example.com", PASSWORD)
        .await
        .expect_err("unknown");
    for err in [&wrong, &unknown] {
        assert_eq!(status(err), 401);
    }
    assert_eq!(wrong.to_string(), unknown.to_string());
    Ok(())
}

#[tokio::test]
async fn logout_revokes_the_session() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let second = app.login("owner@example.com", PASSWORD).await?;
    owner.logout().await?;
    let err = owner.user("me").await.expect_err("logged out");
    assert_eq!(status(&err), 401);
    assert_eq!(
        second.user("me").await?.username,
        "owner",
        "other sessions unaffected"
    );
    Ok(())
}

#[tokio::test]
async fn requests_without_or_with_garbage_tokens_are_refused() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    app.owner().await?;
    let none = app.client().user("me").await.expect_err("no token");
    assert_eq!(status(&none), 401);
    for token in ["garbage", "abcdefghij-aaaaaaaaaaaaaaaaaaaaaa", ""] {
        let err = app
            .client()
            .with_token(token)
            .user("me")
            .await
            .expect_err(token);
        assert_eq!(status(&err), 401, "{token:?}");
    }
    Ok(())
}

#[tokio::test]
async fn tokens_can_be_created_listed_used_and_deleted() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let created = owner
        .create_token(
            "me",
            &CreateTokenRequest {
                token_name: "ci".into(),
                ..Default::default()
            },
        )
        .await?;
    let via_token = Client::new(app.url.clone()).with_token(&created.key);
    assert_eq!(via_token.user("me").await?.username, "owner");

    let listed = owner.tokens("me").await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].token_name, "ci");
    assert!(created.key.starts_with(&listed[0].id));
    let by_name = owner.token_by_name("me", "ci").await?;
    assert_eq!(by_name.id, listed[0].id);
    assert_eq!(by_name.lifetime_seconds, 30 * 24 * 3600, "default lifetime");

    let duplicate = owner
        .create_token(
            "me",
            &CreateTokenRequest {
                token_name: "ci".into(),
                ..Default::default()
            },
        )
        .await
        .expect_err("duplicate name");
    assert_eq!(status(&duplicate), 409);

    owner.delete_api_key("me", &listed[0].id).await?;
    assert!(owner.tokens("me").await?.is_empty());
    let revoked = via_token.user("me").await.expect_err("revoked");
    assert_eq!(status(&revoked), 401);
    Ok(())
}

#[tokio::test]
async fn tokens_expire_and_lifetimes_are_bounded() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let short = owner
        .create_token(
            "me",
            &CreateTokenRequest {
                token_name: "short".into(),
                lifetime: NANOS_PER_SECOND,
                ..Default::default()
            },
        )
        .await?;
    let client = app.client().with_token(&short.key);
    client.user("me").await?;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let expired = client.user("me").await.expect_err("expired");
    assert_eq!(status(&expired), 401);
    assert!(expired.to_string().contains("expired"), "{expired}");

    let too_long = owner
        .create_token(
            "me",
            &CreateTokenRequest {
                token_name: "forever".into(),
                lifetime: 400 * 24 * 3600 * NANOS_PER_SECOND,
                ..Default::default()
            },
        )
        .await
        .expect_err("too long");
    assert_eq!(status(&too_long), 400);
    assert!(
        owner.token_by_name("me", "forever").await.is_err(),
        "nothing written"
    );
    Ok(())
}

#[tokio::test]
async fn suspended_users_are_locked_out_at_once() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice, user) = app.user(&owner, "alice", &[]).await?;
    let token = alice
        .create_token("me", &CreateTokenRequest::default())
        .await?;
    let alice_token = app.client().with_token(&token.key);
    alice.user("me").await?;

    owner
        .update_user_status("alice", codersdk::users::UserStatus::Suspended)
        .await?;
    for client in [&alice, &alice_token] {
        let err = client.user("me").await.expect_err("suspended");
        assert_eq!(status(&err), 401);
        assert!(err.to_string().contains("suspended"), "{err}");
    }
    let login = app
        .login("alice@example.com", PASSWORD)
        .await
        .expect_err("suspended login");
    assert!(login.to_string().contains("suspended"), "{login}");

    owner
        .update_user_status(&user.id.to_string(), codersdk::users::UserStatus::Active)
        .await?;
    assert_eq!(
        alice.user("me").await?.username,
        "alice",
        "same token works again"
    );
    Ok(())
}

#[tokio::test]
async fn password_change_needs_the_old_password_and_ends_other_sessions() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let other_session = app.login("alice@example.com", PASSWORD).await?;
    let wrong = alice
        .update_user_password(
            "me",
            &codersdk::users::UpdateUserPasswordRequest {
                old_password: "nope".into(),
                password: "a new password".into(),
            },
        )
        .await
        .expect_err("wrong old password");
    assert_eq!(status(&wrong), 400);
    alice
        .update_user_password(
            "me",
            &codersdk::users::UpdateUserPasswordRequest {
                old_password: PASSWORD.into(),
                password: "a new password".into(),
            },
        )
        .await?;
    alice.user("me").await?;
    assert_eq!(
        status(&other_session.user("me").await.expect_err("ended")),
        401
    );
    app.login("alice@example.com", "a new password").await?;
    Ok(())
}
