//! Reconnecting PTYs (the web terminal's backend) through the fake coderd's streams: replay
//! after a reconnect, several attachments at once, resizes, commands, the timeout after the
//! last client leaves.

use std::time::Duration;

use anyhow::Context as _;
use codersdk::agentsdk::{self, PtyInput, StreamHeader, StreamOpen};
use tokio::io::AsyncReadExt;
use tokio_yamux::StreamHandle;
use uuid::Uuid;

use crate::harness::{PTY_TIMEOUT, ready_agent};
use crate::peer::{PATIENCE, Peer};

/// One attachment, and everything it has received so far.
struct Attachment {
    stream: StreamHandle,
    seen: Vec<u8>,
}

impl Attachment {
    async fn open(peer: &Peer, id: Uuid, size: (u16, u16), command: &str) -> anyhow::Result<Self> {
        let header = StreamHeader::Pty {
            id,
            width: size.0,
            height: size.1,
            command: command.into(),
        };
        Ok(Self {
            stream: peer.open_ok(header).await?,
            seen: Vec::new(),
        })
    }

    async fn send(&mut self, input: PtyInput) -> anyhow::Result<()> {
        agentsdk::write_frame(&mut self.stream, &input).await?;
        Ok(())
    }

    async fn type_line(&mut self, line: &str) -> anyhow::Result<()> {
        self.send(PtyInput {
            data: format!("{line}\r"),
            ..PtyInput::default()
        })
        .await
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads until `what` has been received; the text so far.
    async fn wait_for(&mut self, what: &str) -> anyhow::Result<String> {
        let mut buf = vec![0u8; 64 << 10];
        let found = tokio::time::timeout(PATIENCE, async {
            while !self.text().contains(what) {
                let n = self.stream.read(&mut buf).await?;
                anyhow::ensure!(n > 0, "the stream ended");
                self.seen.extend_from_slice(&buf[..n]);
            }
            Ok(())
        })
        .await;
        match found {
            Ok(Ok(())) => Ok(self.text()),
            Ok(Err(error)) => {
                Err(error.context(format!("waiting for {what:?} in {}", self.text())))
            }
            Err(_) => anyhow::bail!("{what:?} never came; seen: {}", self.text()),
        }
    }

    /// Reads until the agent ends the stream.
    async fn until_closed(&mut self) -> anyhow::Result<String> {
        tokio::time::timeout(PATIENCE, self.stream.read_to_end(&mut self.seen))
            .await
            .context("the stream stayed open")??;
        Ok(self.text())
    }
}

#[tokio::test]
async fn a_reattached_terminal_replays_what_it_showed_meanwhile() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let id = Uuid::new_v4();
    let mut first = Attachment::open(&peer, id, (80, 24), "").await?;
    first.type_line("echo hello-$((40+2))").await?;
    first.wait_for("hello-42").await?;
    first.type_line("sleep 1; echo while-away-$((3*3))").await?;
    drop(first);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut again = Attachment::open(&peer, id, (80, 24), "").await?;
    let replay = again.wait_for("while-away-9").await?;
    assert!(replay.contains("hello-42"), "{replay}");
    again.type_line("echo still-$((5+5))").await?;
    again.wait_for("still-10").await?;

    peer.wait_for("a reconnecting PTY session in the stats", |p| {
        p.stats()
            .iter()
            .any(|s| s.session_count_reconnecting_pty >= 1)
    })
    .await
}

#[tokio::test]
async fn attachments_share_the_terminal_and_its_size() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let id = Uuid::new_v4();
    let mut a = Attachment::open(&peer, id, (100, 30), "").await?;
    let mut b = Attachment::open(&peer, id, (100, 30), "").await?;
    a.type_line("stty size; echo both-$((2*3))").await?;
    assert!(a.wait_for("both-6").await?.contains("30 100"));
    assert!(b.wait_for("both-6").await?.contains("30 100"));

    b.send(PtyInput {
        data: String::new(),
        height: 40,
        width: 120,
    })
    .await?;
    b.type_line("stty size; echo resized-$((1+1))").await?;
    assert!(a.wait_for("resized-2").await?.contains("40 120"));
    Ok(())
}

#[tokio::test]
async fn commands_run_instead_of_the_shell_and_their_end_ends_the_stream() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let mut term = Attachment::open(
        &peer,
        Uuid::new_v4(),
        (80, 24),
        "echo from-$CODER_WORKSPACE_NAME $TERM",
    )
    .await?;
    let seen = term.until_closed().await?;
    assert!(seen.contains("from-dev xterm-256color"), "{seen}");
    Ok(())
}

#[tokio::test]
async fn the_replay_keeps_the_last_64_kib() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let id = Uuid::new_v4();
    let mut first = Attachment::open(&peer, id, (80, 24), "").await?;
    first
        .type_line("head -c 200000 /dev/zero | tr '\\0' x; echo; echo end-$((7*6))")
        .await?;
    first.wait_for("end-42").await?;
    drop(first);
    let mut again = Attachment::open(&peer, id, (80, 24), "").await?;
    let replay = again.wait_for("end-42").await?;
    assert!(replay.len() <= 64 << 10, "{} bytes replayed", replay.len());
    assert!(replay.len() > 60_000, "{} bytes replayed", replay.len());
    Ok(())
}

#[tokio::test]
async fn an_abandoned_terminal_ends_after_the_timeout() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let id = Uuid::new_v4();
    let mut first = Attachment::open(&peer, id, (80, 24), "").await?;
    first.type_line("echo pid=$$ mark-$((2+2))").await?;
    let seen = first.wait_for("mark-4").await?;
    let pid: i32 = seen
        .rsplit("pid=")
        .next()
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("no pid in {seen}"))?;
    drop(first);

    let alive = |pid: i32| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    tokio::time::sleep(PTY_TIMEOUT / 2).await;
    assert!(alive(pid), "the shell died before the timeout");
    tokio::time::timeout(PATIENCE, async {
        while alive(pid) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .context("the abandoned shell lives on")?;

    let (answer, _) = peer
        .open_answered(StreamHeader::Pty {
            id,
            width: 80,
            height: 24,
            command: String::new(),
        })
        .await?;
    assert_eq!(answer, StreamOpen::Ok, "the same id starts a new terminal");
    Ok(())
}

#[tokio::test]
async fn terminals_outlive_the_agents_connection_to_coderd() -> anyhow::Result<()> {
    let (peer, _agent) = ready_agent().await?;
    let id = Uuid::new_v4();
    let mut first = Attachment::open(&peer, id, (80, 24), "").await?;
    first.type_line("echo before-$((1+2))").await?;
    first.wait_for("before-3").await?;
    let attempts = peer.attempts().0;
    peer.disconnect().await;
    first.until_closed().await?;
    peer.wait_for("the agent back", |p| {
        p.attempts().0 > attempts && p.manifests_served() >= 2
    })
    .await?;
    let mut again = Attachment::open(&peer, id, (80, 24), "").await?;
    again.wait_for("before-3").await?;
    Ok(())
}
