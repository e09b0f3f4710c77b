//! Runs the plugin: binds, announces itself, accepts TLS connections and serves the gRPC
//! services until Terraform calls `GRPCController.Shutdown`.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::Server;

use crate::env::Env;
use crate::error::Error;
use crate::grpc::{Broker, Controller, Health, ProviderService, Stdio};
use crate::handshake::{Handshake, announcement};
use crate::proto::health::health_server::HealthServer;
use crate::proto::plugin::grpc_broker_server::GrpcBrokerServer;
use crate::proto::plugin::grpc_controller_server::GrpcControllerServer;
use crate::proto::plugin::grpc_stdio_server::GrpcStdioServer;
use crate::proto::tfplugin6::provider_server::ProviderServer;
use crate::tls::server_tls;

/// How long open connections may take to close after Terraform asked us to exit; go-plugin
/// kills plugins that are still alive 2 s after asking.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

pub(crate) async fn run(handshake: Handshake, announce: impl FnOnce(&str)) -> Result<(), Error> {
    let listener = handshake.bind()?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let port = listener.local_addr()?.port();
    let tls = server_tls(&handshake.client_cert_pem)?;
    announce(&announcement(port, &tls.cert_der));

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    ignore_interrupts();
    let incoming = accept_tls(listener, TlsAcceptor::from(tls.config));

    let mut stopping = shutdown_rx.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|stop| *stop).await;
    };
    let serve = Server::builder()
        .add_service(ProviderServer::new(ProviderService::new(
            Env::from_process(),
        )))
        .add_service(GrpcControllerServer::new(Controller {
            shutdown: shutdown_tx,
        }))
        .add_service(GrpcStdioServer::new(Stdio {
            shutdown: shutdown_rx.clone(),
        }))
        .add_service(GrpcBrokerServer::new(Broker {
            shutdown: shutdown_rx.clone(),
        }))
        .add_service(HealthServer::new(Health))
        .serve_with_incoming_shutdown(incoming, stopped);

    let mut stopping = shutdown_rx;
    let deadline = async move {
        let _ = stopping.wait_for(|stop| *stop).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = serve => served?,
        () = deadline => tracing::debug!("connections still open at shutdown; exiting anyway"),
    }
    Ok(())
}

/// Terraform forwards Ctrl-C to its whole process group, then stops providers through the
/// protocol; like go-plugin servers we must not die from the signal itself.
fn ignore_interrupts() {
    tokio::spawn(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            tracing::debug!("ignoring interrupt; Terraform stops the provider itself");
        }
    });
}

/// Accepts connections and completes TLS handshakes concurrently, yielding ready streams.
fn accept_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> impl futures::Stream<Item = Result<TlsStream<tokio::net::TcpStream>, std::io::Error>> {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(conn) => conn,
                Err(err) => {
                    tracing::warn!(%err, "accepting a connection failed");
                    continue;
                }
            };
            // Without it every response waits ~40 ms: h2 writes a response's headers, data
            // and trailers separately, and Nagle holds the later ones back until Terraform's
            // delayed ACK of the first arrives. Terraform makes dozens of calls per command.
            if let Err(err) = tcp.set_nodelay(true) {
                tracing::warn!(%err, %peer, "could not disable Nagle's algorithm");
            }
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(stream) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Err(err) => tracing::warn!(%err, %peer, "TLS handshake failed"),
                }
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}
