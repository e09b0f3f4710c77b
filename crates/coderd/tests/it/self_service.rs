//! A user's own settings through the API: appearance, profile, login type, token limits,
//! password checks and remembered parameter values. Bad input is refused with the field named
//! and changes nothing.

use reqwest::Method;
use serde_json::json;
use testutil::{TestApp, unique};

use crate::support::{invalid_fields, send};

#[tokio::test]
async fn appearance_is_each_users_own() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let (alice, _) = app.user(&owner, "alice", &[]).await?;
    let (bob, _) = app.user(&owner, "bob", &[]).await?;

    let (status, fresh) = send(&alice, Method::GET, "/api/v2/users/me/appearance", None).await?;
    assert_eq!(status, 200);
    assert_eq!(fresh["theme_preference"], "");
    assert_eq!(fresh["terminal_font"], "");

    let (status, saved) = send(
        &alice,
        Method::PUT,
        "/api/v2/users/me/appearance",
        Some(json!({"theme_preference": "dark", "theme_mode": "sync",
                    "theme_light": "light", "theme_dark": "dark",
                    "terminal_font": "fira-code"})),
    )
    .await?;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["theme_mode"], "sync");
    assert_eq!(saved["terminal_font"], "fira-code");

    // An older client sends only the preference: the mode and slots stay.
    let (status, legacy) = send(
        &alice,
        Method::PUT,
        "/api/v2/users/me/appearance",
        Some(json!({"theme_preference": "light", "terminal_font": "fira-code"})),
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(legacy["theme_preference"], "light");
    assert_eq!(legacy["theme_dark"], "dark");
    assert_eq!(legacy["theme_mode"], "sync");

    for (body, field) in [
        (json!({"theme_preference": "purple"}), "theme_preference"),
        (
            json!({"theme_preference": "dark", "terminal_font": "comic-sans"}),
            "terminal_font",
        ),
        (
            json!({"theme_preference": "dark", "theme_mode": "sync", "theme_light": "light"}),
            "theme_dark",
        ),
    ] {
        let (status, refused) = send(
            &alice,
            Method::PUT,
            "/api/v2/users/me/appearance",
            Some(body),
        )
        .await?;
        assert_eq!(status, 400, "{refused}");
        assert!(
            invalid_fields(&refused).contains(&field.to_string()),
            "{refused}"
        );
    }
    let (status, _) = send(
        &alice,
        Method::PUT,
        "/api/v2/users/me/appearance",
        Some(json!({"theme_preference": "dark", "colour": "red"})),
    )
    .await?;
    assert_eq!(status, 400, "unknown fields are refused");
    let (_, after) = send(&alice, Method::GET, "/api/v2/users/me/appearance", None).await?;
    assert_eq!(after, legacy, "refusals changed nothing");

    // Another member's settings are not theirs to read or change; an owner's are.
    let (status, _) = send(&bob, Method::GET, "/api/v2/users/alice/appearance", None).await?;
    assert_eq!(status, 404);
    let (status, _) = send(
        &bob,
        Method::PUT,
        "/api/v2/users/alice/appearance",
        Some(json!({"theme_preference": "light"})),
    )
    .await?;
    assert!(status == 404 || status == 403, "{status}");
    let (status, seen) = send(&owner, Method::GET, "/api/v2/users/alice/appearance", None).await?;
    assert_eq!(status, 200);
    assert_eq!(seen["theme_dark"], "dark");
    Ok(())
}

#[tokio::test]
async fn profile_login_type_and_token_limits() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let name = unique("carol");
    let (carol, _) = app.user(&owner, &name, &[]).await?;

    let renamed = unique("carla");
    let (status, user) = send(
        &carol,
        Method::PUT,
        "/api/v2/users/me/profile",
        Some(json!({"username": renamed, "name": "Carla Jones"})),
    )
    .await?;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["username"], renamed.as_str());
    assert_eq!(user["name"], "Carla Jones");
    assert_eq!(carol.user("me").await?.username, renamed);

    let (status, taken) = send(
        &carol,
        Method::PUT,
        "/api/v2/users/me/profile",
        Some(json!({"username": "owner", "name": ""})),
    )
    .await?;
    assert_eq!(status, 409, "{taken}");
    let (status, invalid) = send(
        &carol,
        Method::PUT,
        "/api/v2/users/me/profile",
        Some(json!({"username": "-bad-", "name": " padded "})),
    )
    .await?;
    assert_eq!(status, 400);
    assert_eq!(invalid_fields(&invalid), vec!["username", "name"]);
    assert_eq!(carol.user("me").await?.username, renamed, "nothing changed");

    let (status, login) = send(&carol, Method::GET, "/api/v2/users/me/login-type", None).await?;
    assert_eq!(
        (status, login["login_type"].as_str()),
        (200, Some("password"))
    );
    let (status, _) = send(&carol, Method::GET, "/api/v2/users/owner/login-type", None).await?;
    assert_eq!(status, 404, "another user's login type is personal");

    let (status, config) = send(
        &carol,
        Method::GET,
        "/api/v2/users/me/keys/tokens/tokenconfig",
        None,
    )
    .await?;
    assert_eq!(status, 200, "{config}");
    // The default maximum, a year of 8760 hours, in Go's nanoseconds.
    assert_eq!(
        config["max_token_lifetime"].as_i64(),
        Some(8760 * 3600 * 1_000_000_000)
    );
    Ok(())
}

#[tokio::test]
async fn passwords_are_checked_without_a_session() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let anonymous = app.client();
    let (status, weak) = send(
        &anonymous,
        Method::POST,
        "/api/v2/users/validate-password",
        Some(json!({"password": "short"})),
    )
    .await?;
    assert_eq!(status, 200);
    assert_eq!(weak["valid"], false);
    assert!(
        !weak["details"].as_str().unwrap_or_default().is_empty(),
        "{weak}"
    );
    let (_, strong) = send(
        &anonymous,
        Method::POST,
        "/api/v2/users/validate-password",
        Some(json!({"password": "correct horse battery staple"})),
    )
    .await?;
    assert_eq!(strong, json!({"valid": true, "details": ""}));
    Ok(())
}

#[tokio::test]
async fn preferences_are_switched_one_by_one() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let path = "/api/v2/users/me/preferences";
    let (status, fresh) = send(&owner, Method::GET, path, None).await?;
    assert_eq!(
        (status, fresh["task_notification_alert_dismissed"].as_bool()),
        (200, Some(false))
    );
    let (status, saved) = send(
        &owner,
        Method::PUT,
        path,
        Some(json!({"task_notification_alert_dismissed": true})),
    )
    .await?;
    assert_eq!(
        (status, saved["task_notification_alert_dismissed"].as_bool()),
        (200, Some(true))
    );
    let (status, _) = send(&owner, Method::PUT, path, Some(json!({}))).await?;
    assert_eq!(status, 200);
    let (_, kept) = send(&owner, Method::GET, path, None).await?;
    assert_eq!(
        kept["task_notification_alert_dismissed"], true,
        "absent switches stay"
    );
    let (status, _) = send(&owner, Method::PUT, path, Some(json!({"dark_mode": true}))).await?;
    assert_eq!(status, 400, "unknown switches are refused");
    Ok(())
}
