//! `coder server` as a process: the embedded PostgreSQL, restarts, and clean shutdown.

use codersdk::Client;
use codersdk::apikeys::CreateTokenRequest;
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use nix::sys::signal::kill;
use nix::unistd::Pid;
use testutil::PASSWORD;

use crate::harness::{command_with_config, start, start_with};

fn postmaster_running(config: &std::path::Path) -> bool {
    let pid_file = config.join("postgres/data/postmaster.pid");
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        .is_some_and(|pid| kill(Pid::from_raw(pid), None).is_ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_keeps_all_data_in_the_embedded_cluster() -> anyhow::Result<()> {
    let config = tempfile::Builder::new()
        .prefix("coder-server-")
        .tempdir_in("/tmp")?;
    let server = start(config.path()).await?;
    let client = Client::new(server.url.clone());
    client
        .create_first_user(&CreateFirstUserRequest {
            email: "admin@example.com".into(),
            username: "admin".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    let session = client
        .login_with_password(&LoginWithPasswordRequest {
            email: "admin@example.com".into(),
            password: PASSWORD.into(),
        })
        .await?
        .session_token;
    let owner = client.clone().with_token(&session);
    let token = owner
        .create_token(
            "me",
            &CreateTokenRequest {
                token_name: "kept".into(),
                ..Default::default()
            },
        )
        .await?;
    server.stop()?;
    assert!(
        !postmaster_running(config.path()),
        "PostgreSQL stopped with the server"
    );

    let server = start(config.path()).await?;
    let owner = Client::new(server.url.clone()).with_token(&session);
    assert_eq!(
        owner.user("me").await?.username,
        "admin",
        "session survived"
    );
    let via_token = Client::new(server.url.clone()).with_token(&token.key);
    assert_eq!(
        via_token.token_by_name("me", "kept").await?.token_name,
        "kept"
    );
    assert!(Client::new(server.url.clone()).has_first_user().await?);
    server.stop()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_servers_database_is_adopted() -> anyhow::Result<()> {
    let config = tempfile::Builder::new()
        .prefix("coder-server-")
        .tempdir_in("/tmp")?;
    let mut server = start(config.path()).await?;
    Client::new(server.url.clone())
        .create_first_user(&CreateFirstUserRequest {
            email: "admin@example.com".into(),
            username: "admin".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    server.child.kill()?;
    server.child.wait()?;
    assert!(
        postmaster_running(config.path()),
        "kill -9 leaves PostgreSQL running"
    );
    let server = start(config.path()).await?;
    assert!(Client::new(server.url.clone()).has_first_user().await?);
    server.stop()?;
    assert!(!postmaster_running(config.path()));
    Ok(())
}

#[test]
fn two_servers_with_different_config_dirs_do_not_collide() -> anyhow::Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let (a, b) = (
            tempfile::Builder::new()
                .prefix("coder-a-")
                .tempdir_in("/tmp")?,
            tempfile::Builder::new()
                .prefix("coder-b-")
                .tempdir_in("/tmp")?,
        );
        let (sa, sb) = tokio::try_join!(start(a.path()), start(b.path()))?;
        for s in [&sa, &sb] {
            assert!(!Client::new(s.url.clone()).has_first_user().await?);
        }
        Client::new(sa.url.clone())
            .create_first_user(&CreateFirstUserRequest {
                email: "a@example.com".into(),
                username: "a".into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await?;
        assert!(
            !Client::new(sb.url.clone()).has_first_user().await?,
            "separate databases"
        );
        sa.stop()?;
        sb.stop()
    })
}

#[test]
fn missing_postgres_binaries_are_named_in_the_error() -> anyhow::Result<()> {
    let config = tempfile::Builder::new()
        .prefix("coder-nopg-")
        .tempdir_in("/tmp")?;
    let out = command_with_config(config.path().to_path_buf())
        .args([
            "server",
            "--http-address",
            "127.0.0.1:0",
            "--postgres-bin-dir",
            "/nonexistent",
        ])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install postgresql"), "{stderr}");
    Ok(())
}

/// The dashboard's overview tells a value from the environment, from a flag and from the
/// default apart, as the real binary parsed them, and never shows a secret.
#[tokio::test(flavor = "multi_thread")]
async fn the_overview_shows_where_each_option_came_from() -> anyhow::Result<()> {
    const PSK: &str = "psk-that-must-not-show";
    let config = tempfile::Builder::new()
        .prefix("coder-server-")
        .tempdir_in("/tmp")?;
    // The harness sets CODER_API_RATE_LIMIT=-1 and passes --provisioner-daemons 0.
    let server = start_with(config.path(), &["--provisioner-daemon-psk", PSK]).await?;
    let client = Client::new(server.url.clone());
    client
        .create_first_user(&CreateFirstUserRequest {
            email: "admin@example.com".into(),
            username: "admin".into(),
            password: PASSWORD.into(),
            ..Default::default()
        })
        .await?;
    let session = client
        .login_with_password(&LoginWithPasswordRequest {
            email: "admin@example.com".into(),
            password: PASSWORD.into(),
        })
        .await?
        .session_token;
    let page = reqwest::Client::new()
        .get(server.url.join("/deployment/overview")?)
        .header(
            "Cookie",
            format!("{}={session}", codersdk::client::SESSION_TOKEN_COOKIE),
        )
        .send()
        .await?;
    let status = page.status();
    let body = page.text().await?;
    server.stop()?;
    assert_eq!(status, 200, "{body}");
    let row = |flag: &str| {
        let marker = format!("<tr id=\"option-{flag}\">");
        body.find(&marker)
            .map(|i| &body[i..])
            .and_then(|rest| rest.split("</tr>").next())
            .unwrap_or("")
            .to_owned()
    };
    let limit = row("api-rate-limit");
    assert!(limit.contains("<code>-1</code>"), "{limit}");
    assert!(limit.contains(">environment<"), "{limit}");
    let daemons = row("provisioner-daemons");
    assert!(daemons.contains("<code>0</code>"), "{daemons}");
    assert!(daemons.contains(">flag<"), "{daemons}");
    assert!(row("session-duration").contains(">default<"));
    assert!(row("provisioner-daemon-psk").contains("secret, set"));
    assert!(!body.contains(PSK), "the pre-shared key is on the page");
    Ok(())
}
