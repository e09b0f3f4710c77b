//! The agent's SSH server (russh). It listens on no port: each `Ssh` stream coderd opens is one
//! SSH connection, already authorised by coderd for the workspace's owner, so the SSH layer
//! accepts any authentication (OpenSSH's first "none" attempt succeeds).
//!
//! This module owns the connection: its configuration, authentication, and which channels and
//! global requests it accepts. Session channels (shells, commands, sftp) live in [`session`],
//! port and agent forwarding in [`forward`].

mod forward;
mod hostkey;
mod process;
mod session;
mod sftp;
mod x11;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use codersdk::agentsdk::pipe;
use russh::server::{Auth, ChannelOpenHandle, Msg, Session};
use russh::{Channel, ChannelId, MethodKind, MethodSet, Sig};
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio_yamux::StreamHandle;

use crate::stats::Stats;
use crate::streams::{Counted, Services, accept, refuse};

/// What the agent's SSH server calls itself in the protocol banner.
const SERVER_ID: &str = "SSH-2.0-Coder_agent";
/// Receive window per channel. Large enough to keep a gigabit pipe full across a relay with a
/// few milliseconds of round trip; russh grants it again as data arrives.
const WINDOW: u32 = 8 << 20;
/// OpenSSH's packet size: larger ones gain little and some clients refuse them.
const PACKET: u32 = 32 << 10;

/// Serves one SSH connection on a stream coderd opened.
pub(crate) async fn serve(mut stream: StreamHandle, services: Arc<Services>) {
    let Some((workspace_id, agent_name)) = services.logins.identity() else {
        return refuse(
            stream,
            "the workspace agent has not received its manifest yet; try again in a moment".into(),
        )
        .await;
    };
    if accept(&mut stream).await.is_err() {
        return;
    }
    let _open = services.stats.connection("ssh");
    let config = Arc::new(russh::server::Config {
        server_id: russh::SshId::Standard(SERVER_ID.into()),
        methods: MethodSet::from(
            &[
                MethodKind::None,
                MethodKind::PublicKey,
                MethodKind::Password,
            ][..],
        ),
        auth_rejection_time: Duration::ZERO,
        auth_rejection_time_initial: Some(Duration::ZERO),
        keys: vec![hostkey::derive(workspace_id, &agent_name)],
        window_size: WINDOW,
        maximum_packet_size: PACKET,
        // The stream ends when the client or the relay goes; an idle shell is no reason to.
        inactivity_timeout: None,
        ..russh::server::Config::default()
    });
    let io = decouple(stream, services.stats.clone());
    let connection = Connection {
        services,
        forwards: HashMap::new(),
    };
    match russh::server::run_stream(config, io, connection).await {
        Ok(running) => {
            if let Err(error) = running.await {
                tracing::debug!(%error, "an SSH connection ended with an error");
            }
        }
        Err(error) => tracing::debug!(%error, "an SSH handshake failed"),
    }
}

/// How much of the connection's traffic may wait between the stream and the SSH engine, each
/// way.
const DECOUPLING: usize = 1 << 20;

/// Joins the stream to russh through a buffer, with the stream kept read while russh is busy:
/// russh awaits its writes without reading meanwhile, and a tokio-yamux stream takes in new
/// send window only while it is read (see `codersdk::agentsdk::pipe`).
fn decouple(stream: StreamHandle, stats: Arc<Stats>) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(DECOUPLING);
    tokio::spawn(async move {
        if let Err(error) = pipe(stream, Counted::workspace(theirs, stats)).await {
            tracing::debug!(%error, "an SSH connection's stream ended with an error");
        }
    });
    ours
}

/// One SSH connection's state: the `ssh -R` listeners it asked for, which live as long as it.
struct Connection {
    services: Arc<Services>,
    forwards: HashMap<(String, u32), JoinHandle<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        for (_, listener) in self.forwards.drain() {
            listener.abort();
        }
    }
}

impl russh::server::Handler for Connection {
    type Error = russh::Error;

    async fn auth_none(&mut self, _user: &str) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn auth_publickey_offered(
        &mut self,
        _user: &str,
        _offer: russh::server::PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn auth_publickey(
        &mut self,
        _user: &str,
        _key: russh::server::VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn auth_password(&mut self, _user: &str, _password: &str) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        tokio::spawn(session::run(
            channel,
            session.handle(),
            self.services.clone(),
        ));
        Ok(())
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        host_to_connect: &str,
        port_to_connect: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        tokio::spawn(forward::direct(
            channel,
            reply,
            host_to_connect.to_string(),
            port_to_connect,
            self.services.stats.clone(),
        ));
        Ok(())
    }

    // Session requests: the session's task acts on them (it gets each as a channel message);
    // here they are only answered.
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        _variable_name: &str,
        _variable_value: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if name == session::SFTP {
            session.channel_success(channel)
        } else {
            session.channel_failure(channel)
        }
    }

    async fn window_change_request(
        &mut self,
        channel: ChannelId,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn signal(
        &mut self,
        channel: ChannelId,
        _signal: Sig,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn x11_request(
        &mut self,
        channel: ChannelId,
        _single_connection: bool,
        _x11_auth_protocol: &str,
        _x11_auth_cookie: &str,
        _x11_screen_number: u32,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn agent_request(
        &mut self,
        _channel: ChannelId,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }

    async fn tcpip_forward(
        &mut self,
        address: &str,
        port: &mut u32,
        session: &mut Session,
    ) -> Result<bool, Self::Error> {
        let Ok(requested) = u16::try_from(*port) else {
            return Ok(false);
        };
        match forward::listen(address, requested).await {
            Ok(listener) => {
                let bound = listener.port();
                *port = u32::from(bound);
                let task = tokio::spawn(listener.serve(session.handle()));
                if let Some(old) = self
                    .forwards
                    .insert((address.to_string(), u32::from(bound)), task)
                {
                    old.abort();
                }
                Ok(true)
            }
            Err(error) => {
                tracing::debug!(address, port = requested, %error, "cannot listen for ssh -R");
                Ok(false)
            }
        }
    }

    async fn cancel_tcpip_forward(
        &mut self,
        address: &str,
        port: u32,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        match self.forwards.remove(&(address.to_string(), port)) {
            Some(listener) => {
                listener.abort();
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
