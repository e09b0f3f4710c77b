//! The terminal page and its socket over real HTTP (no browser, no agent): the login redirect,
//! the reconnect id put in the URL, 404s for what the viewer may not see, the page's own CSP,
//! and the socket's Origin check. The browser flow with a real agent is `e2e_terminal`.

use testutil::PASSWORD;

use crate::common::{Web, app, push_template};

const UPGRADE: [(&str, &str); 4] = [
    ("connection", "upgrade"),
    ("upgrade", "websocket"),
    ("sec-websocket-version", "13"),
    ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
];

#[tokio::test]
async fn terminal_page_redirects_renders_and_hides_others_workspaces() -> anyhow::Result<()> {
    let app = app().await?;
    let (owner, _) = app.owner().await?;
    let template = push_template(&app, &owner, "docker").await?;
    let ws = testutil::running_workspace(&owner, template, "mine").await?;
    let agent = ws.latest_build.resources[0].agents[0].id;
    app.user(&owner, "member", &[]).await?;

    // Signed out: to the login page, which comes back here.
    let mut anonymous = Web::new(&app)?;
    let page = anonymous.get("/@owner/mine.main/terminal").await?;
    assert_eq!(page.status, 303, "{}", page.body);
    assert!(
        page.location()
            .starts_with("/login?redirect=%2F%40owner%2Fmine.main%2Fterminal"),
        "{}",
        page.location()
    );

    let mut web = Web::new(&app)?;
    web.login("owner@example.com", PASSWORD).await?;
    // Without a reconnect id the page picks one and puts it in the URL, keeping the command.
    let first = web.get("/@owner/mine.main/terminal?command=top").await?;
    assert_eq!(first.status, 303, "{}", first.body);
    let location = first.location().to_owned();
    let id = location
        .strip_prefix("/@owner/mine.main/terminal?reconnect=")
        .and_then(|rest| rest.strip_suffix("&command=top"))
        .unwrap_or_default();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{location}");

    let page = web.get(&location).await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let socket_attr = page
        .body
        .split("data-socket=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default();
    assert_eq!(
        socket_attr,
        format!("/-/terminal/{agent}?reconnect={id}&#38;command=top")
    );
    // The echo template's agent never connects: the page says so before any script runs.
    assert!(page.body.contains("The workspace agent is connecting"));
    assert!(!page.body.contains("<script>"), "no inline script");
    let csp = page
        .headers
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(csp.contains("style-src 'self' 'unsafe-inline'"), "{csp}");
    assert!(
        !csp.contains("script-src"),
        "scripts stay default-src 'self': {csp}"
    );
    // Only this page loosens styles.
    let other = web.get("/@owner/mine").await?;
    let csp = other
        .headers
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    // The workspace's only agent is the default; another name is not found.
    let short = web.get("/@owner/mine/terminal").await?;
    assert_eq!(short.status, 303);
    assert!(
        short
            .location()
            .starts_with("/@owner/mine/terminal?reconnect=")
    );
    assert_eq!(web.get("/@owner/mine.nope/terminal").await?.status, 404);
    assert_eq!(web.get("/owner/mine/terminal").await?.status, 404);
    // No Terminal button while the agent is not connected.
    assert!(!other.body.contains("/@owner/mine.main/terminal"));

    // The socket: a page of another origin is refused; the same origin is upgraded (and then
    // told the agent is not connected, in a close frame).
    let socket = format!("/-/terminal/{agent}?reconnect={id}");
    let mut foreign = UPGRADE.to_vec();
    foreign.push(("origin", "http://evil.example"));
    assert_eq!(web.get_with(&socket, &foreign).await?.status, 403);
    let host = app.url.host_str().unwrap_or_default().to_owned();
    let origin = format!("http://{host}:{}", app.url.port().unwrap_or(80));
    let mut same = UPGRADE.to_vec();
    same.push(("origin", &origin));
    assert_eq!(web.get_with(&socket, &same).await?.status, 101);

    // A member sees neither the page nor the socket of another's workspace.
    let mut member = Web::new(&app)?;
    member.login("member@example.com", PASSWORD).await?;
    for path in [
        "/@owner/mine.main/terminal",
        "/@owner/mine/terminal",
        &location,
    ] {
        assert_eq!(member.get(path).await?.status, 404, "{path}");
    }
    assert_eq!(member.get_with(&socket, &UPGRADE).await?.status, 404);
    Ok(())
}
