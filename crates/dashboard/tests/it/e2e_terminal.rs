//! The web terminal and a workspace app in a real browser, against a real agent: the `agent`
//! crate runs in-process, connected to the in-process coderd over its real HTTP listener, and
//! serves the reconnecting PTY (a real shell on a real PTY) and the app's port through the
//! relay. Type a command and see its output; reload and see it replayed (same reconnect id);
//! open the app from the workspace page and see its page (a tiny HTTP server of the test).
//! Screenshots `terminal` and `app` land in `target/e2e-screenshots/`. Without a browser the
//! test is skipped, except with `CI=true`, where that is a failure.

use std::time::Duration;

use codersdk::proto::{Agent, AgentAuth, App, Resource};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use testutil::{PASSWORD, TestApp, eventually};
use tokio_util::sync::CancellationToken;

use crate::browser::{Session, Shots, fill, submit, text_of, wait_text};

const PATIENCE: Duration = Duration::from_secs(30);
const APP_PAGE: &str = "<!doctype html><title>Notes</title><h1 id=app>hello from the app</h1>";

/// The agent running in this process, stopped when dropped.
struct RunningAgent {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
    _dir: tempfile::TempDir,
}

impl Drop for RunningAgent {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl RunningAgent {
    fn start(url: &url::Url, token: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home)?;
        let mut config = agent::Config::new(url.clone(), agent::TokenSource::Value(token.into()));
        config.log_dir = dir.path().join("logs");
        config.script_data_dir = dir.path().join("data");
        config
            .environment
            .insert("HOME".into(), home.display().to_string());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(agent::run(config, shutdown.clone()));
        Ok(Self {
            shutdown,
            task,
            _dir: dir,
        })
    }

    /// Shuts the agent down as a workspace stop would, and waits until it has.
    async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, &mut self.task).await???;
        Ok(())
    }
}

/// The test's deployment: the agent's token, to start it again, and the agent.
struct Workspace {
    token: String,
    agent: Option<RunningAgent>,
}

/// The workspace app: one page on a loopback port.
async fn serve_app() -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html(APP_PAGE) }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(port)
}

/// A running workspace `dev` whose agent `main` is this test's, with the app `notes`.
async fn workspace(app: &TestApp, app_port: u16) -> anyhow::Result<Workspace> {
    let (owner, _) = app.owner().await?;
    let token = uuid::Uuid::new_v4().to_string();
    let template = EchoTemplate {
        start: Some(BuildStage {
            resources: vec![Resource {
                name: "dev".into(),
                kind: "docker_container".into(),
                agents: vec![Agent {
                    name: "main".into(),
                    operating_system: "linux".into(),
                    architecture: "amd64".into(),
                    auth: AgentAuth::Token(token.clone()),
                    apps: vec![
                        App {
                            slug: "notes".into(),
                            display_name: "Notes".into(),
                            url: format!("http://127.0.0.1:{app_port}"),
                            ..Default::default()
                        },
                        App {
                            slug: "count".into(),
                            display_name: "Count".into(),
                            command: "echo counted-$((4*4)); sleep 600".into(),
                            ..Default::default()
                        },
                        App {
                            slug: "docs".into(),
                            display_name: "Docs".into(),
                            url: "https://coder.com/docs".into(),
                            external: true,
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let template = app.echo_template(&owner, "local", &template, &[]).await?;
    let ws = testutil::running_workspace(&owner, template.id, "dev").await?;
    let agent_id = ws.latest_build.resources[0].agents[0].id;
    let running = RunningAgent::start(&app.url, &token)?;
    eventually(PATIENCE, "the agent connected", || async {
        Ok(owner.workspace_agent(agent_id).await?.status == "connected")
    })
    .await?;
    Ok(Workspace {
        token,
        agent: Some(running),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn terminal_replays_after_reload_and_apps_open() -> anyhow::Result<()> {
    let Some(mut browser) = Session::start("terminal").await? else {
        return Ok(());
    };
    let app = crate::common::app().await?;
    let app_port = serve_app().await?;
    let mut ws = workspace(&app, app_port).await?;
    let result = flow(&app, &browser.client, &mut browser.shots, &mut ws).await;
    browser.finish("terminal", result).await
}

/// Follows a link in the workspace page's live region, which the live socket may replace
/// between finding the link and clicking it (a stale element): then it is found again.
async fn follow(client: &Client, css: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let clicked = match client.find(Locator::Css(css)).await {
            Ok(link) => link.click().await.map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        };
        match clicked {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Types `line` into the terminal and presses Enter.
async fn type_line(client: &Client, line: &str) -> anyhow::Result<()> {
    let input = client
        .find(Locator::Css("#main .xterm-helper-textarea"))
        .await?;
    input.send_keys(line).await?;
    input.send_keys(&char::from(Key::Enter).to_string()).await?;
    Ok(())
}

async fn flow(
    app: &TestApp,
    client: &Client,
    shots: &mut Shots,
    ws: &mut Workspace,
) -> anyhow::Result<()> {
    let url = |path: &str| format!("{}{}", app.url.as_str().trim_end_matches('/'), path);

    client.goto(&url("/login")).await?;
    fill(client, "#email", "owner@example.com").await?;
    fill(client, "#password", PASSWORD).await?;
    submit(client, "form[action='/login'] button[type=submit]").await?;
    client
        .wait()
        .for_element(Locator::Css("table.list"))
        .await?;

    // The workspace page offers the terminal of the connected agent.
    client.goto(&url("/@owner/dev")).await?;
    client
        .wait()
        .for_element(Locator::Css("a.button[href='/@owner/dev.main/terminal']"))
        .await?;
    // Audited first: axe proves it can flag violations on an ordinary page (the terminal fills
    // the window and hides what overflows it).
    shots.take(client, "workspace-with-agent").await?;
    follow(client, "a.button[href='/@owner/dev.main/terminal']").await?;
    wait_text(client, "#terminal-status", "Connected", PATIENCE).await?;
    let first = client.current_url().await?;
    anyhow::ensure!(
        first.path() == "/@owner/dev.main/terminal"
            && first.query().is_some_and(|q| q.starts_with("reconnect=")),
        "the terminal's id is in the URL: {first}"
    );
    // The echoed command line shows `$((6*7))`; only the shell's output shows 42.
    type_line(client, "echo typed-$((6*7))").await?;
    wait_text(client, "#main .xterm-rows", "typed-42", PATIENCE).await?;
    shots.take(client, "terminal").await?;

    // A reload reattaches to the same terminal, which replays what it printed.
    client.refresh().await?;
    anyhow::ensure!(
        client.current_url().await? == first,
        "the reload kept the id"
    );
    wait_text(client, "#terminal-status", "Connected", PATIENCE).await?;
    wait_text(client, "#main .xterm-rows", "typed-42", PATIENCE).await?;
    type_line(client, "echo again-$((2*3))").await?;
    wait_text(client, "#main .xterm-rows", "again-6", PATIENCE).await?;
    shots.take(client, "terminal-reloaded").await?;

    // The agent goes away: the page says so and keeps trying; once an agent is back, the
    // terminal reconnects by itself (a new shell: the old one went with its agent).
    if let Some(agent) = ws.agent.take() {
        agent.stop().await?;
    }
    wait_text(client, "#terminal-status", "Reconnecting", PATIENCE).await?;
    wait_text(client, "#terminal-status", "not connected", PATIENCE).await?;
    shots.take(client, "terminal-agent-gone").await?;
    ws.agent = Some(RunningAgent::start(&app.url, &ws.token)?);
    wait_text(client, "#terminal-status", "Connected", 2 * PATIENCE).await?;
    type_line(client, "echo back-$((3*5))").await?;
    wait_text(client, "#main .xterm-rows", "back-15", PATIENCE).await?;

    // A command app opens a terminal running its command; an external app links out.
    client.goto(&url("/@owner/dev")).await?;
    client
        .find(Locator::Css("a[href='https://coder.com/docs']"))
        .await?;
    follow(client, "a[href^='/@owner/dev.main/terminal?command=']").await?;
    wait_text(client, "#main .xterm-rows", "counted-16", PATIENCE).await?;

    // The app link on the workspace page opens the app through coderd's proxy.
    client.goto(&url("/@owner/dev")).await?;
    follow(client, "a[href='/@owner/dev.main/apps/notes/']").await?;
    wait_text(client, "#app", "hello from the app", PATIENCE).await?;
    let text = text_of(client, "h1").await?;
    anyhow::ensure!(text == "hello from the app", "{text}");
    // The app is the test's own page, not the dashboard's: photographed, not audited.
    shots.shot(client, "app").await?;
    Ok(())
}
