//! go-plugin's own services: the controller Terraform uses to stop us, the stdio and broker
//! streams its client opens on every plugin, and the health check it pings.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use crate::proto::health::{
    HealthCheckRequest, HealthCheckResponse, health_check_response::ServingStatus,
};
use crate::proto::plugin::{ConnInfo, Empty, StdioData};

/// Flips to `true` once Terraform asked us to exit.
pub(crate) type ShutdownSignal = watch::Receiver<bool>;

type EndlessStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A stream that sends nothing and ends when shutdown starts, so it never holds up exit.
fn until_shutdown<T: Send + 'static>(mut shutdown: ShutdownSignal) -> EndlessStream<T> {
    Box::pin(
        futures::stream::once(async move {
            // An error means the sender is gone, which is shutdown as well.
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        })
        .filter_map(|()| futures::future::ready(None)),
    )
}

pub(crate) struct Controller {
    pub(crate) shutdown: watch::Sender<bool>,
}

#[tonic::async_trait]
impl crate::proto::plugin::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::debug!("Terraform asked the provider to shut down");
        self.shutdown.send_replace(true);
        Ok(Response::new(Empty {}))
    }
}

pub(crate) struct Stdio {
    pub(crate) shutdown: ShutdownSignal,
}

#[tonic::async_trait]
impl crate::proto::plugin::grpc_stdio_server::GrpcStdio for Stdio {
    type StreamStdioStream = EndlessStream<StdioData>;

    async fn stream_stdio(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(until_shutdown(self.shutdown.clone())))
    }
}

pub(crate) struct Broker {
    pub(crate) shutdown: ShutdownSignal,
}

#[tonic::async_trait]
impl crate::proto::plugin::grpc_broker_server::GrpcBroker for Broker {
    type StartStreamStream = EndlessStream<ConnInfo>;

    async fn start_stream(
        &self,
        _: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        Ok(Response::new(until_shutdown(self.shutdown.clone())))
    }
}

pub(crate) struct Health;

#[tonic::async_trait]
impl crate::proto::health::health_server::Health for Health {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving.into(),
        }))
    }
}
