//! The dashboard's live socket, opened as `assets/live.js` opens it: `/-/live?workspace=…&after=…`
//! with the session cookie and the page's Origin. Its messages are JSON: `html` (a re-rendered
//! region), `log` (lines), `log-reset` (a new build's log starts).

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use super::{IdleSockets, Plan};
use crate::deploy::Deployment;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Per measured run, one figure per build.
#[derive(Debug, Default)]
pub struct LiveRun {
    /// API create request sent → the status fragment showing the new build.
    pub fragment: Vec<Vec<Duration>>,
    /// API create request sent → the new build's first log line.
    pub log_line: Vec<Vec<Duration>>,
}

async fn open(deploy: &Deployment, workspace: Uuid, after: i64) -> anyhow::Result<Socket> {
    let mut url = deploy.server.url.join("/-/live")?;
    url.query_pairs_mut()
        .append_pair("workspace", &workspace.to_string())
        .append_pair("after", &after.to_string());
    let origin = url.origin().ascii_serialization();
    url.set_scheme("ws")
        .map_err(|()| anyhow::anyhow!("cannot make a WebSocket URL of {url}"))?;
    let mut request = url.as_str().into_client_request()?;
    let headers = request.headers_mut();
    headers.insert(
        "Cookie",
        format!(
            "{}={}",
            codersdk::client::SESSION_TOKEN_COOKIE,
            deploy.token
        )
        .parse()?,
    );
    headers.insert("Origin", origin.parse()?);
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .context("opening the live socket")?;
    Ok(socket)
}

/// The next JSON message, within `deadline`.
async fn next(socket: &mut Socket, deadline: Instant) -> anyhow::Result<serde_json::Value> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = tokio::time::timeout(left, socket.next())
            .await
            .context("the live socket sent nothing in time")?
            .context("the live socket closed")??;
        match message {
            Message::Text(text) => return Ok(serde_json::from_str(text.as_str())?),
            Message::Ping(payload) => socket.send(Message::Pong(payload)).await?,
            Message::Close(_) => bail!("the live socket closed"),
            _ => {}
        }
    }
}

/// The status label of a workspace's live region.
fn status_label(html: &str) -> Option<&str> {
    let (_, rest) = html.split_once("id=\"ws-status\">")?;
    rest.split_once('<').map(|(label, _)| label.trim())
}

/// Builds `workspace` (running, from its first build) stop, start, … and times each build's
/// arrival on one open socket.
pub async fn builds(deploy: &Deployment, workspace: Uuid, plan: &Plan) -> anyhow::Result<LiveRun> {
    // The page already shows every line of the build it was rendered with.
    let mut socket = open(deploy, workspace, i64::MAX).await?;
    let first = next(&mut socket, Instant::now() + plan.timeout).await?;
    let shown = first["html"].as_str().and_then(status_label);
    ensure!(
        shown == Some("Running"),
        "the live socket first showed {shown:?}, not Running"
    );
    let mut running = true;
    let mut run = LiveRun::default();
    for r in 0..usize::from(plan.warmup) + plan.runs {
        let mut fragments = Vec::new();
        let mut lines = Vec::new();
        for _ in 0..plan.builds {
            let (fragment, line) = build(deploy, &mut socket, workspace, running, plan).await?;
            running = !running;
            fragments.push(fragment);
            lines.push(line);
        }
        if r >= usize::from(plan.warmup) {
            run.fragment.push(fragments);
            run.log_line.push(lines);
        }
    }
    let _ = socket.close(None).await;
    Ok(run)
}

/// One build, from the create request to the region showing its end; returns the times to its
/// first fragment and its first log line.
async fn build(
    deploy: &Deployment,
    socket: &mut Socket,
    workspace: Uuid,
    running: bool,
    plan: &Plan,
) -> anyhow::Result<(Duration, Duration)> {
    let (transition, labels) = if running {
        ("stop", ["Pending", "Stopping", "Stopped"])
    } else {
        ("start", ["Pending", "Starting", "Running"])
    };
    let owner = deploy.owner.clone();
    let started = Instant::now();
    let deadline = started + plan.timeout;
    let create = tokio::spawn(async move {
        owner
            .create_workspace_build(
                workspace,
                &CreateWorkspaceBuildRequest {
                    transition: transition.into(),
                    ..Default::default()
                },
            )
            .await
    });
    let (mut fragment, mut line) = (None, None);
    let (mut reset, mut ended) = (false, false);
    // The final status and the last lines race on the server; both must have arrived.
    while !(ended && line.is_some()) {
        let message = next(socket, deadline).await?;
        match message["type"].as_str() {
            Some("html") => {
                let label = message["html"].as_str().and_then(status_label);
                if label.is_some_and(|l| labels.contains(&l)) {
                    fragment.get_or_insert(started.elapsed());
                }
                ended |= label == Some(labels[2]);
            }
            Some("log-reset") => reset = true,
            Some("log") if reset => {
                line.get_or_insert(started.elapsed());
            }
            Some("reload") => bail!("the live socket asked for a reload"),
            _ => {}
        }
    }
    let build = create.await??;
    deploy.completions.wait(build.job.id, plan.timeout).await?;
    Ok((
        fragment.context("no fragment showed the build")?,
        line.context("no log line arrived")?,
    ))
}

/// Opens `plan.sockets` sockets, each on its own workspace's page, and reads coderd's memory
/// before and once all are open and idle.
pub async fn idle(deploy: &Deployment, plan: &Plan) -> anyhow::Result<IdleSockets> {
    let ids: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM workspaces WHERE NOT deleted ORDER BY name LIMIT $1")
            .bind(plan.sockets as i64)
            .fetch_all(&deploy.pool)
            .await?;
    ensure!(
        ids.len() == plan.sockets,
        "{} workspaces for {} sockets",
        ids.len(),
        plan.sockets
    );
    let settle = Duration::from_secs(2);
    tokio::time::sleep(settle).await;
    let before = deploy.server.memory()?;
    let started = Instant::now();
    let deadline = started + plan.timeout;
    let opened: Vec<anyhow::Result<Socket>> = futures::stream::iter(ids)
        .map(|id| async move {
            let mut socket = open(deploy, id, i64::MAX).await?;
            let first = next(&mut socket, deadline).await?;
            ensure!(
                first["type"] == "html",
                "a live socket's first message was {first}"
            );
            Ok(socket)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let sockets: Vec<Socket> = opened.into_iter().collect::<anyhow::Result<_>>()?;
    let opened_in = started.elapsed();
    tokio::time::sleep(settle).await;
    let after = deploy.server.memory()?;
    let count = sockets.len();
    for mut socket in sockets {
        let _ = socket.close(None).await;
    }
    Ok(IdleSockets {
        count,
        before,
        after,
        opened_in,
    })
}

#[cfg(test)]
mod tests {
    use super::status_label;

    #[test]
    fn reads_the_status_badge() {
        let html = r#"<p><span class="badge ok" id="ws-status">Running</span></p>"#;
        assert_eq!(status_label(html), Some("Running"));
        assert_eq!(status_label("<p>no badge</p>"), None);
    }
}
