//! The SSH client side of `coder ssh` (russh) over a relay stream: host-key trust (the stream is
//! already authenticated and authorised by coderd, so the agent's key needs no prompt), and the
//! channels the agent opens back to us: `-R` forwards and `-A` agent forwarding.

use std::collections::HashMap;
use std::sync::Arc;

use russh::client::{self, ChannelOpenHandle, Msg, Session};
use russh::keys::PublicKeyOrCertificate;
use russh::{Channel, ChannelOpenFailure};

/// Where the agent's reverse-forwarded connections go: remote port → local address.
pub type Reverse = HashMap<u32, String>;

pub struct Handler {
    pub reverse: Arc<Reverse>,
    /// The local agent's socket for `-A` (`SSH_AUTH_SOCK`).
    pub auth_sock: Option<std::path::PathBuf>,
}

impl client::Handler for Handler {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }

    async fn server_channel_open_forwarded_tcpip(
        &mut self,
        channel: Channel<Msg>,
        _connected_address: &str,
        connected_port: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some(target) = self.reverse.get(&connected_port).cloned() else {
            reply
                .reject(ChannelOpenFailure::AdministrativelyProhibited)
                .await;
            return Ok(());
        };
        reply.accept().await;
        tokio::spawn(async move {
            match tokio::net::TcpStream::connect(&target).await {
                Ok(mut local) => {
                    let mut remote = channel.into_stream();
                    let _ = tokio::io::copy_bidirectional(&mut local, &mut remote).await;
                }
                Err(e) => eprintln!("coder ssh: -R: cannot connect to {target}: {e}"),
            }
        });
        Ok(())
    }

    async fn server_channel_open_agent_forward(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some(path) = self.auth_sock.clone() else {
            reply
                .reject(ChannelOpenFailure::AdministrativelyProhibited)
                .await;
            return Ok(());
        };
        reply.accept().await;
        tokio::spawn(async move {
            if let Ok(mut local) = tokio::net::UnixStream::connect(&path).await {
                let mut remote = channel.into_stream();
                let _ = tokio::io::copy_bidirectional(&mut local, &mut remote).await;
            }
        });
        Ok(())
    }
}
