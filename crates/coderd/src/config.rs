//! `coder server`'s configuration: every flag with its `CODER_*` variable, parsed once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

/// Flags of `coder server`.
#[derive(Clone, clap::Args)]
pub struct ServerConfig {
    /// Address to serve the API and dashboard on.
    #[arg(long, env = "CODER_HTTP_ADDRESS", default_value = "127.0.0.1:3000")]
    pub http_address: SocketAddr,

    /// URL workspaces and users reach this server at. Defaults to http://<http-address>.
    #[arg(long, env = "CODER_ACCESS_URL")]
    pub access_url: Option<Url>,

    /// PostgreSQL connection URL. Without one, coderd runs its own PostgreSQL cluster in the
    /// config directory, using the system's PostgreSQL binaries.
    #[arg(long, env = "CODER_PG_CONNECTION_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,

    /// Directory with the PostgreSQL server binaries for the embedded database (searched for in
    /// `pg_config --bindir`, /usr/lib/postgresql/*/bin and PATH when unset).
    #[arg(long, env = "CODER_PG_BIN_DIR")]
    pub postgres_bin_dir: Option<PathBuf>,

    /// Largest number of connections to PostgreSQL.
    #[arg(long, env = "CODER_PG_CONN_MAX_OPEN", default_value_t = 30)]
    pub postgres_max_conns: u32,

    /// Directory for caches (terraform plugins, provisioner work directories).
    #[arg(long, env = "CODER_CACHE_DIRECTORY")]
    pub cache_dir: Option<PathBuf>,

    /// Number of provisioner daemons to run inside the server (0 disables them).
    #[arg(long, env = "CODER_PROVISIONER_DAEMONS", default_value_t = 3)]
    pub provisioner_daemons: u32,

    /// Terraform binary of the built-in provisioner daemons [default: terraform from PATH].
    #[arg(
        long,
        env = "CODER_PROVISIONER_DAEMON_TERRAFORM_PATH",
        value_name = "PATH"
    )]
    pub terraform_path: Option<PathBuf>,

    /// Pre-shared key external provisioner daemons may authenticate with.
    #[arg(long, env = "CODER_PROVISIONER_DAEMON_PSK", hide_env_values = true)]
    pub provisioner_daemon_psk: Option<String>,

    /// How long a password login lasts without use; use extends it.
    #[arg(long, env = "CODER_SESSION_DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub session_duration: Duration,

    /// Longest lifetime an API token may be created with.
    #[arg(long, env = "CODER_MAX_TOKEN_LIFETIME", default_value = "8760h", value_parser = humantime::parse_duration)]
    pub max_token_lifetime: Duration,

    /// Only a workspace's owner may connect to it (SSH, port forwarding, terminal): site owners
    /// and administrators may not.
    #[arg(long, env = "CODER_DISABLE_OWNER_WORKSPACE_ACCESS")]
    pub disable_owner_workspace_access: bool,

    /// Set by the CLI from its global `--global-config`; holds the embedded database.
    #[arg(skip)]
    pub config_dir: PathBuf,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("ServerConfig")
            .field("http_address", &self.http_address)
            .field("access_url", &self.access_url.as_ref().map(Url::as_str))
            .field("postgres_url", &redact(&self.postgres_url))
            .field("postgres_bin_dir", &self.postgres_bin_dir)
            .field("postgres_max_conns", &self.postgres_max_conns)
            .field("cache_dir", &self.cache_dir)
            .field("provisioner_daemons", &self.provisioner_daemons)
            .field("terraform_path", &self.terraform_path)
            .field(
                "provisioner_daemon_psk",
                &redact(&self.provisioner_daemon_psk),
            )
            .field("session_duration", &self.session_duration)
            .field("max_token_lifetime", &self.max_token_lifetime)
            .field(
                "disable_owner_workspace_access",
                &self.disable_owner_workspace_access,
            )
            .field("config_dir", &self.config_dir)
            .finish()
    }
}

impl ServerConfig {
    /// The access URL, or one derived from the listen address.
    pub fn resolved_access_url(&self, bound: SocketAddr) -> Url {
        self.access_url.clone().unwrap_or_else(|| {
            let host = if bound.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                bound.ip().to_string()
            };
            let host = if bound.is_ipv6() && !bound.ip().is_unspecified() {
                format!("[{host}]")
            } else {
                host
            };
            Url::parse(&format!("http://{host}:{}", bound.port()))
                .unwrap_or_else(|_| Url::parse("http://127.0.0.1:3000").expect("static URL"))
        })
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| self.config_dir.join("cache"))
    }
}
