//! P13: `GET /api/v2/workspaces/{id}/watch-ws`, as Coder's dashboard and IDE plugins watch a
//! workspace: one socket open on a workspace, then stop and start builds in turn; per
//! build, the API create request sent → the first message showing the new build. (The state
//! change is the create request's own commit, so this includes the request's round trip.)

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use crate::deploy::Deployment;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn open(deploy: &Deployment, workspace: Uuid) -> anyhow::Result<Socket> {
    let mut url = deploy
        .server
        .url
        .join(&format!("/api/v2/workspaces/{workspace}/watch-ws"))?;
    url.set_scheme("ws")
        .map_err(|()| anyhow::anyhow!("cannot make a WebSocket URL of {url}"))?;
    let mut request = url.as_str().into_client_request()?;
    request
        .headers_mut()
        .insert("Coder-Session-Token", deploy.token.parse()?);
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .context("opening watch-ws")?;
    Ok(socket)
}

/// The next `data` message's workspace, within `deadline`.
async fn next_workspace(
    socket: &mut Socket,
    deadline: Instant,
) -> anyhow::Result<serde_json::Value> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = tokio::time::timeout(left, socket.next())
            .await
            .context("watch-ws sent nothing in time")?
            .context("watch-ws closed")??;
        match message {
            Message::Text(text) => {
                let value: serde_json::Value = serde_json::from_str(text.as_str())?;
                if value["type"] == "data" {
                    return Ok(value["data"].clone());
                }
            }
            Message::Ping(payload) => socket.send(Message::Pong(payload)).await?,
            Message::Close(_) => bail!("watch-ws closed"),
            _ => {}
        }
    }
}

/// `count` builds of `workspace` (stop when it runs, start when it does not, and so on), each
/// timed to its first event.
pub async fn run(
    deploy: &Deployment,
    workspace: Uuid,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let mut socket = open(deploy, workspace).await?;
    let first = next_workspace(&mut socket, Instant::now() + timeout).await?;
    let mut samples = Vec::with_capacity(count);
    let mut running = first["latest_build"]["transition"] == "start";
    for _ in 0..count {
        let transition = if running { "stop" } else { "start" };
        running = !running;
        let started = Instant::now();
        let deadline = started + timeout;
        let owner = deploy.owner.clone();
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
        // Transitions alternate, so the first event whose latest build has this one is the
        // new build (events about the previous build, still queued, have the other).
        let mut seen = None;
        while seen.is_none() {
            let ws = next_workspace(&mut socket, deadline).await?;
            if ws["latest_build"]["transition"] == transition {
                seen = Some(started.elapsed());
            }
        }
        let build = create.await??;
        deploy.completions.wait(build.job.id, timeout).await?;
        samples.push(seen.context("no event showed the build")?);
    }
    let _ = socket.close(None).await;
    Ok(samples)
}
