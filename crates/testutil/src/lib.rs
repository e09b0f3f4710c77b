#![doc = include_str!("../README.md")]

pub mod github;
pub mod gitserver;
pub mod idp;
mod pg;
pub mod provisioning;

use std::time::Duration;

use coderd::{ServeOptions, serve_state};
use coderd_core::state::{AppState, Options};
use codersdk::Client;
use codersdk::users::{CreateFirstUserRequest, CreateUserRequest, LoginWithPasswordRequest};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use url::Url;
use uuid::Uuid;

pub use pg::TestDb;
pub use provisioning::{
    DaemonSpec, TestDaemon, eventually, running_workspace, wait_build, wait_job,
};

/// Password every test user gets.
pub const PASSWORD: &str = "SomeSecurePassword!";

/// Logs to the test's captured output; `RUST_LOG` widens it.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// A coderd serving on 127.0.0.1 from a fresh database, inside the test's process.
pub struct TestApp {
    pub url: Url,
    pub db: TestDb,
    /// The server's core, for tests that call the domain layer directly.
    pub state: AppState,
    shutdown: CancellationToken,
    server: Option<Server>,
}

impl TestApp {
    pub async fn new() -> anyhow::Result<Self> {
        Self::with_options(|_| {}).await
    }

    /// Starts coderd after letting the test adjust its options.
    pub async fn with_options(adjust: impl FnOnce(&mut ServeOptions)) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::with_listener(listener, adjust).await
    }

    /// Starts coderd on a listener the test bound already (to register its URL somewhere, such
    /// as an identity provider's redirect URIs, before the server starts).
    pub async fn with_listener(
        listener: TcpListener,
        adjust: impl FnOnce(&mut ServeOptions),
    ) -> anyhow::Result<Self> {
        init_tracing();
        let db = TestDb::new().await?;
        let (url, state, shutdown, server) = launch(db.pool.clone(), listener, adjust).await?;
        let app = Self {
            url,
            db,
            state,
            shutdown,
            server: Some(server),
        };
        app.wait_healthy().await?;
        Ok(app)
    }

    /// Another coderd on this one's database: a second replica, with its own connection pool,
    /// pubsub listener, dispatcher and built-in daemons.
    pub async fn replica(&self, adjust: impl FnOnce(&mut ServeOptions)) -> anyhow::Result<Replica> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(20)
            .connect_with(self.db.options.clone())
            .await?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let (url, state, shutdown, server) = launch(pool, listener, adjust).await?;
        let client = Client::new(url.clone());
        crate::eventually(Duration::from_secs(5), "replica ready", || async {
            Ok(client.build_info().await.is_ok())
        })
        .await?;
        Ok(Replica {
            url,
            state,
            shutdown,
            _server: server,
        })
    }

    async fn wait_healthy(&self) -> anyhow::Result<()> {
        let client = self.client();
        for _ in 0..500 {
            if client.build_info().await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("coderd did not become ready")
    }

    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// An unauthenticated client.
    pub fn client(&self) -> Client {
        Client::new(self.url.clone())
    }

    /// Creates the first user (the Owner) and returns a client logged in as it.
    pub async fn owner(
        &self,
    ) -> anyhow::Result<(Client, codersdk::users::CreateFirstUserResponse)> {
        let client = self.client();
        let first = client
            .create_first_user(&CreateFirstUserRequest {
                email: "owner@example.com".into(),
                username: "owner".into(),
                name: "Owner".into(),
                password: PASSWORD.into(),
                trial: false,
            })
            .await?;
        let client = self.login("owner@example.com", PASSWORD).await?;
        Ok((client, first))
    }

    pub async fn login(&self, email: &str, password: &str) -> anyhow::Result<Client> {
        let resp = self
            .client()
            .login_with_password(&LoginWithPasswordRequest {
                email: email.into(),
                password: password.into(),
            })
            .await?;
        Ok(self.client().with_token(resp.session_token))
    }

    /// Creates `username` with the given site roles (by `admin`) and logs in as it.
    pub async fn user(
        &self,
        admin: &Client,
        username: &str,
        roles: &[&str],
    ) -> anyhow::Result<(Client, codersdk::users::User)> {
        let email = format!("{username}@example.com");
        let user = admin
            .create_user(&CreateUserRequest {
                email: email.clone(),
                username: username.into(),
                password: PASSWORD.into(),
                roles: roles.iter().map(|r| r.to_string()).collect(),
                ..Default::default()
            })
            .await?;
        Ok((self.login(&email, PASSWORD).await?, user))
    }

    /// Stops the server and waits for it to finish draining.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        if let Some(server) = self.server.take() {
            server.await??;
        }
        Ok(())
    }
}

type Server = tokio::task::JoinHandle<Result<(), coderd::server::Error>>;

/// Starts a coderd core and its API on `pool`.
async fn launch(
    pool: PgPool,
    listener: TcpListener,
    adjust: impl FnOnce(&mut ServeOptions),
) -> anyhow::Result<(Url, AppState, CancellationToken, Server)> {
    let url = Url::parse(&format!("http://{}", listener.local_addr()?))?;
    let mut options = ServeOptions::new(Options::new(url.clone()));
    // What `coder server --access-url <url>` would list (tests may replace it).
    options.deployment.config_options =
        coderd::deployment_options::parse(["--access-url", url.as_str()])?;
    // Each replica is reached by its peers at its own address.
    options.deployment.relay_url = Some(url.clone());
    adjust(&mut options);
    let shutdown = CancellationToken::new();
    let state = AppState::start(pool, options.deployment.clone(), shutdown.clone()).await?;
    let server = tokio::spawn(serve_state(
        state.clone(),
        options,
        listener,
        shutdown.clone(),
    ));
    Ok((url, state, shutdown, server))
}

/// A second coderd on a [`TestApp`]'s database; stops when dropped.
pub struct Replica {
    pub url: Url,
    pub state: AppState,
    shutdown: CancellationToken,
    _server: Server,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A random suffix for names that must be unique within a test database.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &Uuid::new_v4().simple().to_string()[..8])
}
