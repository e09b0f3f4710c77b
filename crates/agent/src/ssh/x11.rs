//! X11 forwarding (`ssh -X`, `ssh -Y`), as sshd does it: the session gets a display of its own,
//! `localhost:<n>` (TCP on loopback, port 6000 + n, n from 10 up), `DISPLAY` names it, the
//! client's authentication cookie is added for it with `xauth`, and every X client's connection
//! to it is carried to the SSH client in an `x11` channel, where the client's X server takes it.
//! The cookie is the client's fake one: OpenSSH swaps in the real one only for connections
//! that present it, so a process that did not get it from this session cannot use the display.

use std::io;
use std::process::Stdio;

use russh::server::Handle;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::forward::bridge;
use crate::process::ShellCommand;

/// sshd's first display number: the ones below are left to real X servers.
const FIRST_DISPLAY: u16 = 10;
const DISPLAYS: u16 = 1000;
const X11_BASE_PORT: u16 = 6000;

/// What the client sent with `x11-req`.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) protocol: String,
    pub(super) cookie: String,
    pub(super) screen: u32,
}

/// A session's display: listening until dropped, its cookie removed then.
pub(super) struct Display {
    number: u16,
    screen: u32,
    task: JoinHandle<()>,
    xauth: Xauth,
}

/// `xauth` as the session's user (their environment: their `~/.Xauthority`).
#[derive(Clone)]
struct Xauth(ShellCommand);

impl Display {
    /// Listens on the first free display and registers the client's cookie for it with
    /// `xauth`, run as the session's user (`shell`'s environment: the user's `~/.Xauthority`).
    pub(super) async fn create(
        handle: Handle,
        request: &Request,
        shell: &ShellCommand,
    ) -> io::Result<Self> {
        let (number, listener) = listen().await?;
        let task = tokio::spawn(async move {
            while let Ok((socket, peer)) = listener.accept().await {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let channel = handle
                        .channel_open_x11(peer.ip().to_string(), u32::from(peer.port()))
                        .await;
                    match channel {
                        Ok(channel) => bridge(channel.into_stream(), socket).await,
                        Err(error) => {
                            tracing::debug!(%error, "ssh -X: the client refused an X11 channel");
                        }
                    }
                });
            }
        });
        let display = Self {
            number,
            screen: request.screen,
            task,
            xauth: Xauth(shell.clone()),
        };
        display
            .xauth
            .run(&format!(
                "remove unix:{number}\nadd unix:{number}.{} {} {}\n",
                request.screen, request.protocol, request.cookie
            ))
            .await?;
        Ok(display)
    }

    /// The session's `DISPLAY`.
    pub(super) fn variable(&self) -> String {
        format!("localhost:{}.{}", self.number, self.screen)
    }
}

impl Xauth {
    async fn run(&self, commands: &str) -> io::Result<()> {
        let mut child = tokio::process::Command::new("xauth")
            .args(["-q", "-"])
            .env_clear()
            .envs(&self.0.env)
            .current_dir(&self.0.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("running xauth: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(commands.as_bytes()).await?;
        }
        let out = child.wait_with_output().await?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "xauth failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        self.task.abort();
        // Best effort, as sshd: the cookie is useless once nothing listens on its display.
        let remove = format!("remove unix:{}\n", self.number);
        let xauth = self.xauth.clone();
        tokio::spawn(async move {
            if let Err(error) = xauth.run(&remove).await {
                tracing::debug!(%error, "ssh -X: removing the display's cookie");
            }
        });
    }
}

/// The first display whose port is free on loopback and that no local X server has taken
/// (its socket in `/tmp/.X11-unix`).
async fn listen() -> io::Result<(u16, TcpListener)> {
    for number in FIRST_DISPLAY..FIRST_DISPLAY + DISPLAYS {
        if std::path::Path::new(&format!("/tmp/.X11-unix/X{number}")).exists() {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", X11_BASE_PORT + number)).await {
            return Ok((number, listener));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free X11 display between 10 and 1009",
    ))
}
