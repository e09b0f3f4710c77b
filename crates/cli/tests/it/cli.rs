//! Login, users and tokens through the CLI against an in-process coderd.

use codersdk::users::User;
use testutil::{PASSWORD, TestApp};

use crate::harness::Coder;

#[test]
fn version_is_printed() -> anyhow::Result<()> {
    let out = Coder::new()?.ok(&["--version"])?;
    assert!(
        out.starts_with(&format!("coder {}", codersdk::version::VERSION)),
        "{out}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn first_user_setup_login_and_logout() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let coder = Coder::new()?;
    let url = app.url.as_str();
    let out = coder.run(&[
        "login",
        url,
        "--first-user-username",
        "admin",
        "--first-user-email",
        "admin@example.com",
        "--first-user-password",
        PASSWORD,
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Welcome to Coder, admin!"));
    let session = std::fs::read_to_string(coder.config_dir().join("session"))?;
    let mode = std::fs::metadata(coder.config_dir().join("session"))?.permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o077,
        0,
        "session file is private"
    );

    let users: Vec<User> = serde_json::from_str(&coder.ok(&["users", "list", "-o", "json"])?)?;
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].username, "admin");

    // A second login on a deployment with users asks for credentials.
    let again = Coder::new()?;
    let out = again.with_stdin(&["login", url], &format!("admin@example.com\n{PASSWORD}\n"))?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = Coder::new()?.with_stdin(&["login", url], "admin@example.com\nwrong password\n")?;
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Incorrect email or password"));

    coder.ok(&["logout", "--yes"])?;
    let after = coder.run(&["users", "list"])?;
    assert!(!after.status.success());
    assert!(String::from_utf8_lossy(&after.stderr).contains("not logged in"));
    let revoked = app.client().with_token(session.trim()).user("me").await;
    assert_eq!(
        revoked.err().and_then(|e| e.status()),
        Some(401),
        "logout revoked the session"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_first_user_setup_reads_answers() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let coder = Coder::new()?;
    let answers = format!("alice\nAlice Liddell\nalice@example.com\n{PASSWORD}\n");
    let out = coder.with_stdin(&["login", app.url.as_str()], &answers)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let me: User = serde_json::from_str(&coder.ok(&["users", "show", "me", "-o", "json"])?)?;
    assert_eq!(
        (me.username.as_str(), me.name.as_str()),
        ("alice", "Alice Liddell")
    );
    assert_eq!(me.roles[0].name, "owner");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn users_and_tokens_commands() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let (owner, _) = app.owner().await?;
    let coder = Coder::new()?;
    let token = owner.token().unwrap_or_default().to_string();
    let url = app.url.as_str();
    let with_env = |args: &[&str]| -> anyhow::Result<std::process::Output> {
        Ok(coder
            .command()
            .env("CODER_URL", url)
            .env("CODER_SESSION_TOKEN", &token)
            .args(args)
            .output()?)
    };

    let out = with_env(&[
        "users",
        "create",
        "--username",
        "bob",
        "--email",
        "bob@example.com",
        "--password",
        PASSWORD,
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(with_env(&["users", "list"])?.stdout)?;
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.contains("USERNAME") && h.contains("STATUS")),
        "{table}"
    );
    assert!(table.contains("bob@example.com"));

    assert!(with_env(&["users", "suspend", "bob"])?.status.success());
    assert!(app.login("bob@example.com", PASSWORD).await.is_err());
    assert!(with_env(&["users", "activate", "bob"])?.status.success());
    app.login("bob@example.com", PASSWORD).await?;
    let roles = with_env(&[
        "users",
        "edit-roles",
        "bob",
        "--roles",
        "template-admin,auditor",
    ])?;
    assert!(
        roles.status.success(),
        "{}",
        String::from_utf8_lossy(&roles.stderr)
    );
    let mut got: Vec<_> = owner
        .user("bob")
        .await?
        .roles
        .into_iter()
        .map(|r| r.name)
        .collect();
    got.sort();
    assert_eq!(got, ["auditor", "template-admin"]);

    let created = with_env(&["tokens", "create", "--name", "deploy", "--lifetime", "2h"])?;
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let secret = String::from_utf8(created.stdout)?.trim().to_string();
    assert_eq!(
        app.client().with_token(&secret).user("me").await?.username,
        "owner"
    );
    let listed = String::from_utf8(with_env(&["tokens", "list"])?.stdout)?;
    assert!(listed.contains("deploy"), "{listed}");
    let removed = with_env(&["tokens", "remove", "deploy"])?;
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    assert_eq!(
        app.client()
            .with_token(&secret)
            .user("me")
            .await
            .err()
            .and_then(|e| e.status()),
        Some(401)
    );
    // Expired, not gone (Coder's default); `--delete` by the whole token removes it.
    let listed = String::from_utf8(with_env(&["tokens", "list"])?.stdout)?;
    assert!(listed.contains("deploy"), "{listed}");
    let deleted = with_env(&["tokens", "rm", &secret, "--delete"])?;
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
    let listed = String::from_utf8(with_env(&["tokens", "list"])?.stdout)?;
    assert!(!listed.contains("deploy"), "{listed}");

    let denied = with_env(&["users", "delete", "me"])?;
    assert!(!denied.status.success());
    assert!(String::from_utf8_lossy(&denied.stderr).contains("403"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_requests_print_message_detail_and_every_field() -> anyhow::Result<()> {
    let app = TestApp::new().await?;
    let coder = Coder::new()?;
    let url = app.url.as_str();
    let out = coder.run(&[
        "login",
        url,
        "--first-user-username",
        "me",
        "--first-user-email",
        "not-an-email",
        "--first-user-password",
        PASSWORD,
    ])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("400: Validation failed."), "{stderr}");
    assert!(
        stderr.contains("\n  email: must be a valid email address"),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  username: \"me\" is reserved"),
        "{stderr}"
    );

    coder.ok(&[
        "login",
        url,
        "--first-user-username",
        "admin",
        "--first-user-email",
        "admin@example.com",
        "--first-user-password",
        PASSWORD,
    ])?;
    let out = coder.run(&[
        "users",
        "create",
        "--username",
        "bad name",
        "--email",
        "b@example.com",
        "--full-name",
        " padded",
        "--password",
        PASSWORD,
    ])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\n  username: may contain only"),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  name: must not start or end with whitespace"),
        "{stderr}"
    );
    // A refusal with a detail and no fields shows the detail.
    let out = coder.run(&["tokens", "create", "--lifetime", "99999h"])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\n  lifetime: must be at most"), "{stderr}");
    Ok(())
}
