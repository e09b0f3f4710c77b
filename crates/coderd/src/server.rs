//! Launching coderd: [`run`] is `coder server` (database, listener, signals handled by the
//! caller); [`serve`] runs the API on a given pool and listener, as tests do; [`serve_state`]
//! serves an already started core.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::builtin_daemons as builtin;
use crate::config::ServerConfig;
use coderd_api as http;
use coderd_core::state::{self, AppState};
use coderd_store::postgres::{self, embedded};

/// Name of the database coderd uses inside its embedded cluster.
const EMBEDDED_DATABASE: &str = "coder";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("serving HTTP: {0}")]
    Serve(#[source] std::io::Error),
    #[error("reading deployment settings: {0}")]
    Store(#[from] coderd_store::Error),
    #[error("starting: {0}")]
    Start(#[from] coderd_core::state::StartError),
    #[error("setting up the built-in terraform provisioner: {0}")]
    Terraform(#[from] provisionerd::engines::terraform::SetupError),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("finding the coder executable (the terraform provider): {0}")]
    CurrentExe(#[source] std::io::Error),
}

pub use coderd_api::FrontDoor;

/// What [`serve`] needs beyond the pool and the listener.
#[derive(Clone)]
pub struct ServeOptions {
    /// The deployment's settings.
    pub deployment: state::Options,
    /// Limits of the JSON API.
    pub http: http::Options,
    /// Provisioner daemons to run inside the server.
    pub provisioner_daemons: u32,
    /// The engines of the built-in daemons, by provisioner type (default: echo only; `run`
    /// adds terraform).
    pub builtin_engines: Vec<(String, Arc<dyn provisionerd::Engine>)>,
    /// How often the lifecycle executor looks for due workspaces; `None` leaves it to the
    /// caller (tests drive it with [`lifecycle::Ticks::Driven`](coderd_executors::lifecycle::Ticks)).
    pub autobuild_poll_interval: Option<std::time::Duration>,
    /// How the prebuilds reconciler runs; `None` runs none.
    pub prebuilds: Option<coderd_executors::prebuilds::Options>,
    /// Routes of other front doors, merged with the API's (none by default).
    pub front_doors: Vec<FrontDoor>,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("deployment", &self.deployment)
            .field("http", &self.http)
            .field("provisioner_daemons", &self.provisioner_daemons)
            .field("autobuild_poll_interval", &self.autobuild_poll_interval)
            .field("prebuilds", &self.prebuilds)
            .field("front_doors", &self.front_doors.len())
            .field(
                "builtin_engines",
                &self
                    .builtin_engines
                    .iter()
                    .map(|(t, _)| t)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ServeOptions {
    pub fn new(deployment: state::Options) -> Self {
        Self {
            deployment,
            http: http::Options::default(),
            provisioner_daemons: 0,
            builtin_engines: vec![(
                provisionerd::engines::echo::PROVISIONER.to_owned(),
                Arc::new(provisionerd::engines::echo::EchoEngine),
            )],
            autobuild_poll_interval: Some(coderd_executors::lifecycle::DEFAULT_POLL_INTERVAL),
            prebuilds: Some(coderd_executors::prebuilds::Options::default()),
            front_doors: Vec::new(),
        }
    }
}

/// Serves the API on `listener` until `shutdown` is cancelled, then drains in-flight requests.
pub async fn serve(
    pool: PgPool,
    options: ServeOptions,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let state = AppState::start(pool, options.deployment.clone(), shutdown.clone()).await?;
    serve_state(state, options, listener, shutdown).await
}

/// Serves the API of an already started core (see [`AppState::start`]), whose settings win over
/// `options.deployment`. Tests keep the state to call the domain layer directly.
pub async fn serve_state(
    state: AppState,
    options: ServeOptions,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let daemons_stop = CancellationToken::new();
    let engines: Vec<(&str, Arc<dyn provisionerd::Engine>)> = options
        .builtin_engines
        .iter()
        .map(|(kind, engine)| (kind.as_str(), engine.clone()))
        .collect();
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let daemons = builtin::start(
        &state,
        options.provisioner_daemons,
        port,
        &engines,
        &daemons_stop,
    );
    coderd_executors::audit_retention::start_purge(
        state.store.clone(),
        state.options.audit_logs_retention,
        state.options.clock.clone(),
        shutdown.child_token(),
    );
    if let Some(period) = options.autobuild_poll_interval {
        coderd_executors::lifecycle::spawn(
            state.clone(),
            coderd_executors::lifecycle::Ticks::Every(period),
            shutdown.child_token(),
        );
    }
    if let Some(prebuilds) = options.prebuilds {
        coderd_executors::prebuilds::spawn(state.clone(), prebuilds, shutdown.child_token());
    }
    let replica = state.replica.clone();
    let store = state.store.clone();
    let app = http::router(state, options.http, &options.front_doors);
    // Built-in daemons stop first (finishing or failing their jobs through the still-running
    // server); then the replica leaves (its peers stop counting it) and the server drains its
    // connections.
    let drain = async move {
        shutdown.cancelled().await;
        daemons_stop.cancel();
        for daemon in daemons {
            let _ = daemon.await;
        }
        coderd_core::replicas::leave(&store, &replica).await;
    };
    // Without TCP_NODELAY a reply written in several small pieces (a yamux frame header and
    // its body on an agent's connection) waits for the peer's delayed ACK: ~40 ms per call.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY");
        }
    });
    // The peer address is what login limits are counted against.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(drain)
    .await
    .map_err(Error::Serve)
}

/// `coder server`: resolves the database (starting the embedded cluster when no URL is given),
/// migrates it, binds the listener and serves until `shutdown`; then stops what it started.
pub async fn run(config: ServerConfig, shutdown: CancellationToken) -> Result<(), Error> {
    run_with(config, Vec::new(), shutdown).await
}

/// [`run`] with other front doors (the `coder` binary adds the dashboard).
pub async fn run_with(
    config: ServerConfig,
    front_doors: Vec<FrontDoor>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let started = std::time::Instant::now();
    let (connect, embedded) = match &config.postgres_url {
        Some(url) => (postgres::parse_url(url)?, None),
        None => {
            let mut options = embedded::Options::new(config.config_dir.join("postgres"));
            options.bin_dir = config.postgres_bin_dir.clone();
            let pg = embedded::EmbeddedPostgres::start(options)
                .await
                .map_err(postgres::Error::from)?;
            pg.ensure_database(EMBEDDED_DATABASE)
                .await
                .map_err(postgres::Error::from)?;
            (pg.connect_options(EMBEDDED_DATABASE), Some(pg))
        }
    };
    let result = async {
        let pool = postgres::connect_and_migrate(connect, config.postgres_max_conns).await?;
        let listener = TcpListener::bind(config.http_address)
            .await
            .map_err(|source| Error::Bind {
                addr: config.http_address,
                source,
            })?;
        let bound = listener.local_addr().map_err(Error::Serve)?;
        let mut deployment = state::Options::new(config.resolved_access_url(bound));
        deployment.session_duration = config.session_duration;
        deployment.max_token_lifetime = config.max_token_lifetime;
        deployment.audit_logs_retention = config.audit_logs_retention;
        deployment.config_options = config.options.clone();
        deployment.default_token_lifetime = deployment
            .default_token_lifetime
            .min(config.max_token_lifetime);
        deployment.provisioner_psk = config.provisioner_daemon_psk.clone();
        deployment.disable_owner_workspace_access = config.disable_owner_workspace_access;
        deployment.allow_workspace_renames = config.allow_workspace_renames;
        deployment.ssh = coderd_core::state::SshSettings {
            hostname_prefix: config.ssh_hostname_prefix.clone(),
            hostname_suffix: config.workspace_hostname_suffix.clone(),
            config_options: config.ssh_config_options.iter().cloned().collect(),
        };
        deployment.oidc = config.oidc_settings().map_err(Error::Config)?;
        deployment.github = config.github_settings().map_err(Error::Config)?;
        deployment.disable_password_auth = config.disable_password_auth;
        deployment.apps = config
            .app_settings(&deployment.access_url)
            .map_err(Error::Config)?;
        if deployment.apps.allow_path_app_sharing
            || deployment.apps.allow_path_app_site_owner_access
        {
            tracing::warn!(
                "path-based apps may be opened by others than their owner (dangerous flags set)"
            );
        }
        deployment.api_rate_limit = u32::try_from(config.api_rate_limit).ok();
        if config.dangerous_disable_rate_limits {
            tracing::warn!("rate limits are disabled (CODER_RATE_LIMIT_DISABLE_ALL)");
            deployment.login_limits = coderd_core::limits::LoginLimitSettings::disabled();
            deployment.api_rate_limit = None;
        }
        deployment.external_token_keys = config.token_keys().map_err(Error::Config)?.map(Arc::new);
        deployment.external_auth =
            external_auth_providers(deployment.external_token_keys.is_some())?;
        // Validated when the flag was parsed; the default stays otherwise.
        if let Ok(quiet_hours) = coderd_schedule::Schedule::daily(&config.quiet_hours) {
            deployment.quiet_hours = quiet_hours;
        }
        tracing::info!(
            address = %bound,
            access_url = %deployment.access_url,
            startup_ms = started.elapsed().as_millis() as u64,
            "coderd ready"
        );
        let mut options = ServeOptions::new(deployment);
        options.provisioner_daemons = config.provisioner_daemons;
        options.autobuild_poll_interval = Some(config.autobuild_poll_interval);
        options.prebuilds = Some(coderd_executors::prebuilds::Options {
            interval: config.workspace_prebuilds_reconciliation_interval,
            backoff: config.workspace_prebuilds_reconciliation_backoff_interval,
        });
        options.front_doors = front_doors;
        if config.provisioner_daemons > 0 {
            options.builtin_engines.push((
                provisionerd::engines::terraform::PROVISIONER.to_owned(),
                terraform_engine(&config).await?,
            ));
        }
        let served = serve(pool.clone(), options, listener, shutdown).await;
        pool.close().await;
        served
    }
    .await;
    if let Some(pg) = embedded
        && let Err(e) = pg.stop().await
    {
        tracing::warn!(error = %e, "stopping embedded PostgreSQL");
    }
    result
}

/// The external auth providers of `CODER_EXTERNAL_AUTH_<n>_*`. Their tokens are only ever kept
/// sealed, so providers without `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` refuse startup rather
/// than store tokens in the clear.
fn external_auth_providers(
    have_keys: bool,
) -> Result<Vec<coderd_core::external_auth::ProviderSettings>, Error> {
    let providers = coderd_core::external_auth::config::from_env(std::env::vars())
        .map_err(|e| Error::Config(format!("external auth: {e}")))?;
    if !providers.is_empty() && !have_keys {
        return Err(Error::Config(
            "external auth: CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS must be set when external auth              providers are configured (their tokens are stored encrypted with it)"
                .into(),
        ));
    }
    for p in &providers {
        tracing::info!(id = %p.id, r#type = %p.r#type, "external auth provider configured");
    }
    Ok(providers)
}

/// The built-in daemons' terraform: this executable serves the `coder/coder` provider, the
/// binary is `--terraform-path` or `terraform` from PATH, providers are cached in the cache
/// directory. A missing or old terraform is only a warning here: jobs fail with the reason.
async fn terraform_engine(config: &ServerConfig) -> Result<Arc<dyn provisionerd::Engine>, Error> {
    use provisionerd::engines::terraform::{Settings, TerraformEngine};
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    let mut settings = Settings::new(exe, config.cache_dir());
    if let Some(path) = &config.terraform_path {
        settings.terraform = path.clone();
    }
    let engine = TerraformEngine::new(settings)?;
    match engine.check().await {
        Ok((binary, version)) => tracing::info!(
            terraform = %binary.display(),
            %version,
            "built-in provisioners run terraform"
        ),
        Err(e) => tracing::warn!(error = %e, "terraform jobs of built-in provisioners will fail"),
    }
    Ok(Arc::new(engine))
}
