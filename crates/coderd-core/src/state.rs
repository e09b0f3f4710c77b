//! coderd's core state: the deployment's settings and the long-lived services every front door
//! (the JSON API, the dashboard, background executors, the relay) works through. Nothing here
//! knows about HTTP; the API crate builds its router on top of it, and capabilities with
//! running parts of their own (the app proxy's connection pool, the executors) keep them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::provisioners::dispatch::Dispatcher;
use crate::provisioners::hang;
use crate::provisioners::registry::DaemonRegistry;
use coderd_store::pubsub::Pubsub;
use coderd_store::{self as store, Store};

/// Settings of the deployment, resolved from the server configuration. Limits that only concern
/// one front door (request body sizes, response chunking) live with it (`coderd_api::Options`).
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
    /// Only a workspace's owner may connect to it (site owners and admins may not).
    pub disable_owner_workspace_access: bool,
    /// Owners may rename their workspaces (Coder's `--allow-workspace-renames`).
    pub allow_workspace_renames: bool,
    /// Sign-in through an OpenID provider, when configured.
    pub oidc: Option<crate::sso_providers::OidcSettings>,
    /// Sign-in with GitHub, when configured.
    pub github: Option<crate::sso_providers::GithubSettings>,
    /// Only owners may sign in with a password (everyone else through the identity provider).
    pub disable_password_auth: bool,
    /// Keys sealing provider tokens at rest (`CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS`); without
    /// them no provider token is kept.
    pub external_token_keys: Option<Arc<oauth_client::KeyRing>>,
    /// Password login attempts allowed per client address and per account.
    pub login_limits: crate::limits::LoginLimitSettings,
    /// API requests allowed a minute per user or client address (`None`: no limit).
    pub api_rate_limit: Option<u32>,
    /// "Now" for schedules: deadlines, next autostarts, the lifecycle executor.
    pub clock: coderd_schedule::clock::Clock,
    /// When workspaces may be restarted for their template's autostop requirement (Coder's
    /// default quiet hours: midnight UTC).
    pub quiet_hours: coderd_schedule::Schedule,
    /// Workspace apps: path apps, the wildcard access URL, the keys sealing app tokens.
    pub apps: crate::app_urls::Settings,
    /// How long audit log entries are kept; zero keeps them forever.
    pub audit_logs_retention: Duration,
    /// The server's options as given, for those who may read the deployment's configuration.
    pub config_options: crate::deployment_options::DeploymentOptions,
    /// How clients name workspaces in SSH (`GET /deployment/ssh`).
    pub ssh: SshSettings,
    /// The external auth providers (`CODER_EXTERNAL_AUTH_<n>_*`).
    pub external_auth: Vec<crate::external_auth::ProviderSettings>,
    /// This replica's own internal URL, where its peers reach it
    /// (`CODER_DERP_SERVER_RELAY_URL`); required once another replica is alive.
    pub relay_url: Option<Url>,
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
            disable_owner_workspace_access: false,
            allow_workspace_renames: false,
            oidc: None,
            github: None,
            disable_password_auth: false,
            external_token_keys: None,
            login_limits: Default::default(),
            api_rate_limit: None,
            clock: coderd_schedule::clock::Clock::system(),
            quiet_hours: default_quiet_hours(),
            apps: crate::app_urls::Settings::default(),
            audit_logs_retention: Duration::ZERO,
            config_options: Default::default(),
            ssh: SshSettings::default(),
            external_auth: Vec::new(),
            relay_url: None,
        }
    }
}

/// The host names clients give workspaces in SSH configs, and options they add to each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSettings {
    /// `coder config-ssh`'s hosts are `<prefix><workspace>`.
    pub hostname_prefix: String,
    /// Coder Connect's and the IDEs' hosts are `<workspace>.<agent>.<suffix>`.
    pub hostname_suffix: String,
    /// `Key Value` options added to every host, in order.
    pub config_options: std::collections::BTreeMap<String, String>,
}

impl Default for SshSettings {
    fn default() -> Self {
        Self {
            hostname_prefix: "coder.".into(),
            hostname_suffix: "coder".into(),
            config_options: Default::default(),
        }
    }
}

/// Coder's default quiet hours, `CRON_TZ=UTC 0 0 * * *`.
pub fn default_quiet_hours() -> coderd_schedule::Schedule {
    coderd_schedule::Schedule::daily(DEFAULT_QUIET_HOURS)
        .unwrap_or_else(|e| unreachable!("the default quiet hours parse: {e}"))
}

pub const DEFAULT_QUIET_HOURS: &str = "CRON_TZ=UTC 0 0 * * *";

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
    /// Streams the relay carries, for metrics and workspaces' `last_used_at`.
    pub relay_usage: crate::relay_usage::Usage,
    pub template_usage: crate::usage::TemplateUsage,
    pub build_times: crate::build_times::BuildTimesCache,
    /// Template archives, for job payloads.
    pub files: crate::provisioners::file_cache::FileCache,
    /// Sign-in providers (OIDC).
    pub sso: crate::sso_providers::Sso,
    /// External auth providers (git providers users link).
    pub external_auth: crate::external_auth::Providers,
    /// This process among the deployment's replicas.
    pub replica: crate::replicas::Replica,
    /// Password login attempts counted per address and account.
    pub login_limits: Arc<crate::limits::LoginLimits>,
    /// The general API rate limit, when on.
    pub api_limit: Option<Arc<crate::api_limit::ApiLimit>>,
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

    /// Starts the core on a migrated database: the pubsub listener, job dispatch, the daemon
    /// registry, the hang detector, template usage, agent batching, relay usage, the sign-in
    /// providers and metrics upkeep, all
    /// stopping with `shutdown`. Front doors (the HTTP API, built-in daemons) come on top.
    pub async fn start(
        pool: PgPool,
        mut options: Options,
        shutdown: CancellationToken,
    ) -> Result<Self, StartError> {
        let store = Store::new(pool.clone());
        options.deployment_id = store.deployment_id().await?;
        let replica = crate::replicas::join(&store, options.relay_url.as_ref()).await?;
        crate::replicas::beat_until(store.clone(), replica.clone(), shutdown.child_token());
        let sso = crate::sso_providers::Sso::start(&store, &options).await?;
        let external_auth =
            crate::external_auth::Providers::start(&options.external_auth, &options.access_url)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "external auth providers are disabled");
                    crate::external_auth::Providers::default()
                });
        options.apps.keys = Arc::new(crate::app_urls::deployment_keys(&store).await?);
        let login_limits = Arc::new(crate::limits::LoginLimits::new(options.login_limits));
        login_limits.clone().prune_until(shutdown.child_token());
        let api_limit = crate::api_limit::ApiLimit::new(options.api_rate_limit);
        if let Some(limit) = &api_limit {
            limit.clone().prune_until(shutdown.child_token());
        }
        let pubsub = Pubsub::start(pool, shutdown.child_token());
        let dispatcher = Dispatcher::start(&pubsub, shutdown.child_token());
        let daemons = DaemonRegistry::start(store.clone(), shutdown.child_token());
        hang::start(store.clone(), shutdown.child_token());
        let template_usage =
            crate::usage::TemplateUsage::start(store.clone(), shutdown.child_token());
        let build_times = crate::build_times::BuildTimesCache::start(
            store.clone(),
            &pubsub,
            shutdown.child_token(),
        )
        .await;
        let agents = crate::agents::Registry::default();
        let agent_batcher =
            crate::agents::Batcher::start(store.clone(), agents.clone(), shutdown.child_token());
        let relay_usage = crate::relay_usage::Usage::start(store.clone(), shutdown.child_token());
        let metrics = metrics_handle();
        let upkeep = metrics.clone();
        let upkeep_stop = shutdown.child_token();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    () = upkeep_stop.cancelled() => return,
                    _ = tick.tick() => upkeep.run_upkeep(),
                }
            }
        });
        Ok(Self::new(StateInner {
            store,
            pubsub,
            options,
            metrics,
            dispatcher,
            daemons,
            agents,
            agent_batcher,
            relay_usage,
            template_usage,
            build_times,
            files: Default::default(),
            sso,
            external_auth,
            replica,
            login_limits,
            api_limit,
            shutdown,
        }))
    }
}

/// Why the core did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Replica(#[from] crate::replicas::JoinError),
}

/// The process-wide Prometheus recorder (a process has one global recorder, however many
/// servers a test starts in it).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Only empty bucket lists are refused, and ours are constants.
            let builder = histogram_buckets().unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed; ours then just stays empty.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Our histograms are Prometheus histograms with fixed buckets: a few counters per series, so
/// the exporter's memory stays flat however many observations it gets (the default summaries
/// keep a growing sketch per series: 23 MB after 3,000 builds), and they aggregate across
/// replicas, as quantiles do not.
fn histogram_buckets() -> Result<PrometheusBuilder, BuildError> {
    const SECONDS: &[f64] = &[
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ];
    const COUNTS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)?
        .set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), COUNTS)
}
