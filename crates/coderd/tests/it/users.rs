//! The user directory, roles, organizations, and what bad input does (nothing).

use codersdk::ClientError;
use codersdk::organizations::CreateOrganizationRequest;
use codersdk::users::CreateUserRequest;
use reqwest::Method;
use testutil::{PASSWORD, TestApp};

fn status(e: &ClientError) -> u16 {
    e.status().unwrap_or_default()
}

#[tokio::test]
async fn malformed_json_is_a_400_in_coders_shape_and_writes_nothing() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    for (body, message) in [
        ("{", "Request body must be valid JSON."),
        ("[]", "Request body must be a JSON object."),
        (r#"{"email": 42}"#, "Request body must be valid JSON."),
        ("", "Request body must be valid JSON."),
    ] {
        let resp = owner
            .request(Method::POST, "/api/v2/users")?
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await?;
        assert_eq!(resp.status(), 400, "{body:?}");
        let err: codersdk::Response = resp.json().await?;
        assert_eq!(err.message, message);
        assert!(!err.detail.is_empty());
    }
    assert_eq!(owner.users("").await?.count, 1, "no user was created");
    Ok(())
}

#[tokio::test]
async fn oversize_bodies_are_a_413_and_write_nothing() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let huge = serde_json::json!({
        "email": "big@example.com",
        "username": "big",
        "password": PASSWORD,
        "name": "x".repeat(2 << 20),
    });
    let resp = owner
        .request(Method::POST, "/api/v2/users")?
        .json(&huge)
        .send()
        .await?;
    assert_eq!(resp.status(), 413);
    let err: codersdk::Response = resp.json().await?;
    assert_eq!(err.message, "Request body is too large.");
    assert_eq!(owner.users("").await?.count, 1);
    Ok(())
}

#[tokio::test]
async fn unknown_fields_are_ignored() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let body = serde_json::json!({
        "email": "x@example.com", "username": "x", "password": PASSWORD, "favourite_colour": "teal",
    });
    let resp = owner
        .request(Method::POST, "/api/v2/users")?
        .json(&body)
        .send()
        .await?;
    assert_eq!(resp.status(), 201);
    Ok(())
}

#[tokio::test]
async fn users_are_listed_searched_and_deleted() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    for name in ["alice", "albert", "bob"] {
        app.user(&owner, name, &[]).await?;
    }
    let all = owner.users("").await?;
    assert_eq!(all.count, 4);
    let names: Vec<_> = all.users.iter().map(|u| u.username.as_str()).collect();
    assert_eq!(names, ["albert", "alice", "bob", "owner"]);
    let al = owner.users("al").await?;
    assert_eq!(al.count, 2);
    owner
        .update_user_status("bob", codersdk::users::UserStatus::Suspended)
        .await?;
    assert_eq!(
        owner.users("status:suspended").await?.users[0].username,
        "bob"
    );
    assert_eq!(owner.users("role:owner").await?.count, 1);
    let bad = owner
        .users("colour:teal")
        .await
        .expect_err("unknown filter");
    assert_eq!(status(&bad), 400);

    let page = owner
        .get_query::<codersdk::users::GetUsersResponse, _>(
            "/api/v2/users",
            &[("limit", "2"), ("offset", "1")],
        )
        .await?;
    assert_eq!(page.count, 4);
    assert_eq!(
        page.users
            .iter()
            .map(|u| u.username.as_str())
            .collect::<Vec<_>>(),
        ["alice", "bob"]
    );

    owner.delete_user("albert").await?;
    assert_eq!(
        status(&owner.user("albert").await.expect_err("deleted")),
        404
    );
    let deleted_login = app.login("albert@example.com", PASSWORD).await;
    assert!(deleted_login.is_err());
    let me = owner.delete_user("me").await.expect_err("self");
    assert_eq!(status(&me), 403);
    Ok(())
}

#[tokio::test]
async fn duplicate_usernames_and_emails_conflict() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    app.user(&owner, "alice", &[]).await?;
    for (email, username) in [
        ("ALICE@example.com", "alice2"),
        ("new@example.com", "Alice"),
    ] {
        let err = owner
            .create_user(&CreateUserRequest {
                email: email.into(),
                username: username.into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await
            .expect_err("duplicate");
        assert_eq!(status(&err), 409, "{email} {username}");
    }
    Ok(())
}

#[tokio::test]
async fn role_changes_follow_the_rules() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (admin, _) = app.user(&owner, "useradmin", &["user-admin"]).await?;
    let (_, bob) = app.user(&owner, "bob", &[]).await?;

    let updated = admin
        .update_user_roles("bob", &["template-admin".into()])
        .await?;
    assert_eq!(updated.roles[0].name, "template-admin");
    assert_eq!(updated.roles[0].display_name, "Template Admin");
    assert_eq!(
        owner.user_roles(&bob.id.to_string()).await?.roles,
        ["template-admin"]
    );

    let escalate = admin
        .update_user_roles("bob", &["owner".into()])
        .await
        .expect_err("owner");
    assert_eq!(status(&escalate), 403);
    let own = admin
        .update_user_roles("me", &["owner".into()])
        .await
        .expect_err("self");
    assert_eq!(status(&own), 400);
    let unknown = owner
        .update_user_roles("bob", &["wizard".into()])
        .await
        .expect_err("unknown role");
    assert_eq!(status(&unknown), 400);
    assert_eq!(
        owner.user("bob").await?.roles[0].name,
        "template-admin",
        "unchanged"
    );

    owner.update_user_roles("bob", &["owner".into()]).await?;
    assert_eq!(owner.user("bob").await?.roles[0].name, "owner");
    Ok(())
}

#[tokio::test]
async fn organizations_and_members() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice, alice_user) = app.user(&owner, "alice", &[]).await?;
    let org = owner
        .create_organization(&CreateOrganizationRequest {
            name: "acme".into(),
            ..Default::default()
        })
        .await?;
    assert_eq!(org.display_name, "acme");
    let dup = owner
        .create_organization(&CreateOrganizationRequest {
            name: "ACME".into(),
            ..Default::default()
        })
        .await
        .expect_err("duplicate");
    assert_eq!(status(&dup), 409);

    assert_eq!(
        status(&alice.organization("acme").await.expect_err("not a member")),
        404
    );
    owner.add_organization_member("acme", "alice").await?;
    assert_eq!(alice.organization("acme").await?.id, org.id);
    let mut orgs: Vec<_> = alice
        .user_organizations("me")
        .await?
        .into_iter()
        .map(|o| o.name)
        .collect();
    orgs.sort();
    assert_eq!(orgs, ["acme", "coder"]);
    assert_eq!(
        status(
            &owner
                .add_organization_member("acme", "alice")
                .await
                .expect_err("again")
        ),
        409
    );

    let member = owner
        .update_organization_member_roles("acme", "alice", &["organization-admin".into()])
        .await?;
    assert_eq!(member.roles[0].name, "organization-admin");
    let members = alice.organization_members("acme").await?;
    assert_eq!(members.len(), 2);
    assert!(
        members
            .iter()
            .any(|m| m.user_id == alice_user.id && m.roles[0].name == "organization-admin")
    );

    owner.remove_organization_member("acme", "alice").await?;
    assert_eq!(
        status(&alice.organization("acme").await.expect_err("removed")),
        404
    );
    Ok(())
}

/// The password policy, with Coder's error shape, on each way a password is set.
#[tokio::test]
async fn passwords_may_not_be_short_or_the_username_or_email() -> anyhow::Result<()> {
    let app = testutil::TestApp::new().await?;
    let http = reqwest::Client::new();
    let first = |password: &str| {
        serde_json::json!({"email": "root@corp.example", "username": "rootuser",
                           "name": "", "password": password, "trial": false})
    };
    for (password, detail) in [
        ("short", "at least 8"),
        ("rootuser-2024", "username"),
        ("my root@corp.example", "email"),
    ] {
        let response = http
            .post(app.url.join("/api/v2/users/first")?)
            .json(&first(password))
            .send()
            .await?;
        assert_eq!(response.status(), reqwest::StatusCode::BAD_REQUEST);
        let body: serde_json::Value = response.json().await?;
        let validations = body["validations"].as_array().cloned().unwrap_or_default();
        assert_eq!(validations.len(), 1, "{body}");
        assert_eq!(validations[0]["field"], "password", "{body}");
        assert!(
            validations[0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains(detail)),
            "{password}: {body}"
        );
    }
    let (owner, _) = app.owner().await?;

    let err = owner
        .create_user(&codersdk::users::CreateUserRequest {
            email: "jdoe@corp.example".into(),
            username: "jdoe-x".into(),
            password: "JDOE@corp.example!".into(),
            ..Default::default()
        })
        .await
        .expect_err("email as password");
    assert_eq!(err.status(), Some(400));
    assert!(
        err.to_string()
            .contains("password: must not contain your email"),
        "{err}"
    );

    let (member, user) = app.user(&owner, "member", &[]).await?;
    let err = member
        .update_user_password(
            "me",
            &codersdk::users::UpdateUserPasswordRequest {
                old_password: testutil::PASSWORD.into(),
                password: "Member!Member!".into(),
            },
        )
        .await
        .expect_err("username as password");
    assert!(
        err.to_string().contains("must not contain your username"),
        "{err}"
    );
    // An administrator's reset follows the same policy for the user's own name.
    let err = owner
        .update_user_password(
            &user.id.to_string(),
            &codersdk::users::UpdateUserPasswordRequest {
                old_password: String::new(),
                password: "member@example.com".into(),
            },
        )
        .await
        .expect_err("email as password");
    // The username is the email's local part here: the first rule broken is told.
    assert!(
        err.to_string()
            .contains("password: must not contain your username"),
        "{err}"
    );
    member
        .update_user_password(
            "me",
            &codersdk::users::UpdateUserPasswordRequest {
                old_password: testutil::PASSWORD.into(),
                password: "correct horse battery".into(),
            },
        )
        .await?;
    Ok(())
}
