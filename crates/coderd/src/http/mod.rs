//! The HTTP API: state shared by handlers, the router, and the middleware stack.

pub(crate) mod agents;
pub(crate) mod apikeys;
mod convert;
pub mod extract;
pub(crate) mod files;
mod jobs;
pub(crate) mod meta;
pub(crate) mod organizations;
mod parameters;
pub(crate) mod provisioners;
pub(crate) mod templates;
pub(crate) mod usage;
pub(crate) mod users;
pub(crate) mod workspaces;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Request, header};
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;
use url::Url;

use crate::provisioners::dispatch::Dispatcher;
use crate::provisioners::registry::DaemonRegistry;
use crate::pubsub::Pubsub;
use crate::store::Store;

/// Settings the handlers need, resolved from the server configuration.
#[derive(Debug, Clone)]
pub struct Options {
    pub access_url: Url,
    /// Lifetime of a password login's session; refreshed while in use.
    pub session_duration: Duration,
    /// Lifetime of an API token created with no lifetime.
    pub default_token_lifetime: Duration,
    pub max_token_lifetime: Duration,
    /// Largest JSON request body.
    pub max_body_bytes: usize,
    /// Mark cookies `Secure` (when the access URL is https).
    pub secure_cookies: bool,
    pub deployment_id: String,
    /// Pre-shared key external daemons may authenticate with; PSK authentication is off
    /// without one.
    pub provisioner_psk: Option<String>,
    /// Largest template archive accepted.
    pub max_file_bytes: usize,
    /// Workspace lists longer than this are rendered and sent in chunks of this size, so memory
    /// stays bounded however many match (10,000 rendered at once made a 40 MiB response and
    /// several copies of it in memory).
    pub workspace_list_chunk: usize,
}

impl Options {
    pub fn new(access_url: Url) -> Self {
        Self {
            secure_cookies: access_url.scheme() == "https",
            access_url,
            session_duration: Duration::from_secs(24 * 3600),
            default_token_lifetime: Duration::from_secs(30 * 24 * 3600),
            max_token_lifetime: Duration::from_secs(365 * 24 * 3600),
            max_body_bytes: 1 << 20,
            deployment_id: String::new(),
            provisioner_psk: None,
            max_file_bytes: 10 << 20,
            workspace_list_chunk: 500,
        }
    }
}

/// Everything a handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<StateInner>);

pub struct StateInner {
    pub store: Store,
    pub pubsub: Pubsub,
    pub options: Options,
    pub metrics: PrometheusHandle,
    pub dispatcher: Dispatcher,
    pub daemons: DaemonRegistry,
    /// Agents connected to this process.
    pub agents: crate::agents::Registry,
    pub agent_batcher: crate::agents::Batcher,
    pub template_usage: usage::TemplateUsage,
    /// Template archives, for job payloads.
    pub files: crate::provisioners::payload::FileCache,
    /// Cancelled when the server shuts down; long-lived connections end with it.
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl std::ops::Deref for AppState {
    type Target = StateInner;
    fn deref(&self) -> &StateInner {
        &self.0
    }
}

impl AppState {
    pub fn new(inner: StateInner) -> Self {
        Self(Arc::new(inner))
    }
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    let max_body = state.options.max_body_bytes;
    let api = Router::new()
        .merge(meta::routes())
        .merge(users::routes())
        .merge(apikeys::routes())
        .merge(organizations::routes())
        .merge(files::routes(state.options.max_file_bytes))
        .merge(templates::routes())
        .merge(workspaces::routes())
        .merge(provisioners::routes())
        .merge(agents::routes())
        .route_layer(axum::middleware::from_fn(meta::record_http_metrics))
        .fallback(meta::api_not_found);

    Router::new()
        .nest("/api/v2", api)
        .merge(meta::root_routes())
        .merge(agents::binary_routes())
        .with_state(state)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                tracing::info_span!("http", method = %req.method(), path = %req.uri().path())
            }),
        )
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
            header::HeaderName::from_static("coder-session-token"),
        ]))
        .layer(CatchPanicLayer::custom(meta::panic_response))
}
