//! coderd's core state: the deployment's settings and the long-lived services every front door
//! (the JSON API, the dashboard, background executors, the relay) works through. Nothing here
//! knows about HTTP; `http` builds its router on top of it.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use url::Url;

use crate::provisioners::dispatch::Dispatcher;
use crate::provisioners::registry::DaemonRegistry;
use crate::pubsub::Pubsub;
use crate::store::Store;

/// Settings of the deployment, resolved from the server configuration. Limits that only concern
/// one front door (request body sizes, response chunking) live with it (`http::Options`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Where users and workspaces reach this deployment.
    pub access_url: Url,
    /// Lifetime of a password login's session; refreshed while in use.
    pub session_duration: Duration,
    /// Lifetime of an API token created with no lifetime.
    pub default_token_lifetime: Duration,
    pub max_token_lifetime: Duration,
    /// Mark session cookies `Secure` (when the access URL is https).
    pub secure_cookies: bool,
    pub deployment_id: String,
    /// Pre-shared key external daemons may authenticate with; PSK authentication is off
    /// without one.
    pub provisioner_psk: Option<String>,
    /// Largest template archive accepted.
    pub max_file_bytes: usize,
}

impl Options {
    pub fn new(access_url: Url) -> Self {
        Self {
            secure_cookies: access_url.scheme() == "https",
            access_url,
            session_duration: Duration::from_secs(24 * 3600),
            default_token_lifetime: Duration::from_secs(30 * 24 * 3600),
            max_token_lifetime: Duration::from_secs(365 * 24 * 3600),
            deployment_id: String::new(),
            provisioner_psk: None,
            max_file_bytes: 10 << 20,
        }
    }
}

/// Everything coderd's front doors and background tasks can reach. Cheap to clone.
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
    pub template_usage: crate::usage::TemplateUsage,
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
