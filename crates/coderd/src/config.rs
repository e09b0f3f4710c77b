//! `coder server`'s configuration: every flag with its `CODER_*` variable, parsed once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use oauth_client::KeyRing;
use url::Url;

use coderd_sso::{GithubSettings, OidcSettings};

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

    /// Largest number of connections to PostgreSQL of the main pool. The job path (claims,
    /// payload reads, completions) has a pool of its own, of up to a third as many besides.
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

    /// How long audit log entries are kept (e.g. 365d); 0 keeps them forever.
    #[arg(long, env = "CODER_AUDIT_LOGS_RETENTION", default_value = "0", value_parser = retention)]
    pub audit_logs_retention: Duration,

    /// Longest lifetime an API token may be created with.
    #[arg(long, env = "CODER_MAX_TOKEN_LIFETIME", default_value = "8760h", value_parser = humantime::parse_duration)]
    pub max_token_lifetime: Duration,

    /// Only a workspace's owner may connect to it (SSH, port forwarding, terminal): site owners
    /// and administrators may not.
    #[arg(long, env = "CODER_DISABLE_OWNER_WORKSPACE_ACCESS")]
    pub disable_owner_workspace_access: bool,
    /// Let owners rename their workspaces. A rename breaks what names the workspace (its
    /// resources, app hosts, SSH configs), so it is off by default, as in Coder.
    #[arg(long, env = "CODER_ALLOW_WORKSPACE_RENAMES")]
    pub allow_workspace_renames: bool,
    /// The prefix of the SSH hosts `coder config-ssh` writes (`<prefix><workspace>`).
    #[arg(long, env = "CODER_SSH_HOSTNAME_PREFIX", default_value = "coder.")]
    pub ssh_hostname_prefix: String,
    /// The suffix of workspace host names (`<workspace>.<agent>.<suffix>`) that IDEs and
    /// `coder ssh` accept.
    #[arg(long, env = "CODER_WORKSPACE_HOSTNAME_SUFFIX", default_value = "coder")]
    pub workspace_hostname_suffix: String,
    /// This replica's own internal URL, where the deployment's other replicas reach it (never
    /// the access URL: a load balancer would send the hop to any replica). Required once
    /// another replica is running on the same database.
    #[arg(long, env = "CODER_DERP_SERVER_RELAY_URL")]
    pub derp_server_relay_url: Option<url::Url>,
    /// Coder's embedded pubsub cluster; accepted and ignored: replicas coordinate through
    /// PostgreSQL alone.
    #[arg(long, env = "CODER_CLUSTER_HOST", hide = true)]
    pub cluster_host: Option<String>,
    /// The algorithm of the git SSH keys made for users (`coder publickey`). Coder also offers
    /// ecdsa and rsa4096; only ed25519 is made here, and asking for another refuses startup
    /// rather than silently making a different key.
    #[arg(long, env = "CODER_SSH_KEYGEN_ALGORITHM", default_value = "ed25519", value_parser = keygen_algorithm)]
    pub ssh_keygen_algorithm: String,
    /// SSH options clients add to every workspace host, as "Key=Value" (comma-separated).
    #[arg(long, env = "CODER_SSH_CONFIG_OPTIONS", value_delimiter = ',', value_parser = ssh_option)]
    pub ssh_config_options: Vec<(String, String)>,
    /// How often the lifecycle executor looks for workspaces to start, stop, make dormant or
    /// delete.
    #[arg(
        long,
        env = "CODER_AUTOBUILD_POLL_INTERVAL",
        default_value = "1m",
        value_parser = poll_interval,
        hide = true
    )]
    pub autobuild_poll_interval: Duration,

    /// How often the prebuilds reconciler compares each preset's prebuilt workspaces with the
    /// count it wants.
    #[arg(
        long,
        env = "CODER_WORKSPACE_PREBUILDS_RECONCILIATION_INTERVAL",
        default_value = "15s",
        value_parser = poll_interval
    )]
    pub workspace_prebuilds_reconciliation_interval: Duration,

    /// The wait before a preset whose prebuild failed is tried again; it doubles with each
    /// further failure.
    #[arg(
        long,
        env = "CODER_WORKSPACE_PREBUILDS_RECONCILIATION_BACKOFF_INTERVAL",
        default_value = "15s",
        value_parser = poll_interval
    )]
    pub workspace_prebuilds_reconciliation_backoff_interval: Duration,

    /// When workspaces are restarted for their template's autostop requirement, as a daily
    /// schedule ("CRON_TZ=<zone> <minute> <hour> * * *").
    #[arg(
        long = "default-quiet-hours-schedule",
        env = "CODER_QUIET_HOURS_DEFAULT_SCHEDULE",
        default_value = coderd_core::state::DEFAULT_QUIET_HOURS,
        value_parser = quiet_hours
    )]
    pub quiet_hours: String,

    /// Issuer URL of the OpenID Connect provider people sign in with; enables OIDC login
    /// (register `<access URL>/api/v2/users/oidc/callback` as its redirect URI).
    #[arg(long, env = "CODER_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<Url>,

    /// Client ID of this deployment at the OIDC provider.
    #[arg(long, env = "CODER_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// Client secret of this deployment at the OIDC provider.
    #[arg(long, env = "CODER_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,

    /// Only emails in these domains may sign in with OIDC (comma-separated; empty: any).
    #[arg(long, env = "CODER_OIDC_EMAIL_DOMAIN", value_delimiter = ',')]
    pub oidc_email_domain: Vec<String>,

    /// Create users on their first OIDC sign-in.
    #[arg(long, env = "CODER_OIDC_ALLOW_SIGNUPS", default_value_t = true, action = clap::ArgAction::Set)]
    pub oidc_allow_signups: bool,

    /// Scopes requested from the OIDC provider.
    #[arg(
        long,
        env = "CODER_OIDC_SCOPES",
        value_delimiter = ',',
        default_value = "openid,profile,email"
    )]
    pub oidc_scopes: Vec<String>,

    /// Accept emails the OIDC provider marks as not verified.
    #[arg(long, env = "CODER_OIDC_IGNORE_EMAIL_VERIFIED")]
    pub oidc_ignore_email_verified: bool,

    /// OIDC claim the username of a new user is taken from.
    #[arg(
        long,
        env = "CODER_OIDC_USERNAME_FIELD",
        default_value = "preferred_username"
    )]
    pub oidc_username_field: String,

    /// OIDC claim holding the email address.
    #[arg(long, env = "CODER_OIDC_EMAIL_FIELD", default_value = "email")]
    pub oidc_email_field: String,

    /// OIDC claim holding the display name.
    #[arg(long, env = "CODER_OIDC_NAME_FIELD", default_value = "name")]
    pub oidc_name_field: String,

    /// Extra parameters of the OIDC authorization request, as a JSON object of strings.
    #[arg(
        long,
        env = "CODER_OIDC_AUTH_URL_PARAMS",
        default_value = r#"{"access_type": "offline"}"#
    )]
    pub oidc_auth_url_params: String,

    /// Use only the ID token's claims, never the userinfo endpoint's.
    #[arg(long, env = "CODER_OIDC_IGNORE_USERINFO")]
    pub oidc_ignore_userinfo: bool,

    /// Text of the OIDC login button.
    #[arg(
        long,
        env = "CODER_OIDC_SIGN_IN_TEXT",
        default_value = "OpenID Connect"
    )]
    pub oidc_sign_in_text: String,

    /// Icon of the OIDC login button.
    #[arg(long, env = "CODER_OIDC_ICON_URL", default_value = "")]
    pub oidc_icon_url: String,

    /// OIDC claim holding the user's groups; set, it turns group sync on (memberships in
    /// groups the claim names are set at every sign-in).
    #[arg(long, env = "CODER_OIDC_GROUP_FIELD", default_value = "")]
    pub oidc_group_field: String,

    /// Maps group names in the OIDC claim to Coder group names, as a JSON object of strings.
    #[arg(long, env = "CODER_OIDC_GROUP_MAPPING", default_value = "{}")]
    pub oidc_group_mapping: String,

    /// Create groups named by the OIDC claim that do not exist yet.
    #[arg(long, env = "CODER_OIDC_GROUP_AUTO_CREATE")]
    pub oidc_group_auto_create: bool,

    /// Only groups (after mapping) matching this regular expression are synced.
    #[arg(long, env = "CODER_OIDC_GROUP_REGEX_FILTER", default_value = "")]
    pub oidc_group_regex_filter: String,

    /// Only people with one of these groups in their OIDC claim may sign in (comma-separated).
    #[arg(long, env = "CODER_OIDC_ALLOWED_GROUPS", value_delimiter = ',')]
    pub oidc_allowed_groups: Vec<String>,

    /// Disables the login abuse limits. Not for production.
    /// Client ID of the GitHub OAuth app people sign in with; enables GitHub login (register
    /// `<access URL>/api/v2/users/oauth2/github/callback` as its callback URL).
    #[arg(
        long = "oauth2-github-client-id",
        env = "CODER_OAUTH2_GITHUB_CLIENT_ID"
    )]
    pub github_client_id: Option<String>,

    /// Client secret of the GitHub OAuth app.
    #[arg(
        long = "oauth2-github-client-secret",
        env = "CODER_OAUTH2_GITHUB_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub github_client_secret: Option<String>,

    /// Members of these GitHub organizations may sign in (comma-separated).
    #[arg(
        long = "oauth2-github-allowed-orgs",
        env = "CODER_OAUTH2_GITHUB_ALLOWED_ORGS",
        value_delimiter = ','
    )]
    pub github_allowed_orgs: Vec<String>,

    /// Only members of these teams may sign in, as `<org>/<team slug>` (comma-separated).
    #[arg(
        long = "oauth2-github-allowed-teams",
        env = "CODER_OAUTH2_GITHUB_ALLOWED_TEAMS",
        value_delimiter = ','
    )]
    pub github_allowed_teams: Vec<String>,

    /// Create users on their first GitHub sign-in.
    #[arg(
        long = "oauth2-github-allow-signups",
        env = "CODER_OAUTH2_GITHUB_ALLOW_SIGNUPS"
    )]
    pub github_allow_signups: bool,

    /// Anyone with a GitHub account may sign in (instead of allowed organizations).
    #[arg(
        long = "oauth2-github-allow-everyone",
        env = "CODER_OAUTH2_GITHUB_ALLOW_EVERYONE"
    )]
    pub github_allow_everyone: bool,

    /// Base URL of a GitHub Enterprise Server to sign in with instead of github.com.
    #[arg(
        long = "oauth2-github-enterprise-base-url",
        env = "CODER_OAUTH2_GITHUB_ENTERPRISE_BASE_URL"
    )]
    pub github_enterprise_base_url: Option<Url>,

    /// Disables all rate limits (the API's and the login abuse limits). Not for production.
    #[arg(long, env = "CODER_RATE_LIMIT_DISABLE_ALL")]
    pub dangerous_disable_rate_limits: bool,

    /// Requests a minute allowed to the API per user, or per client address without a
    /// session; negative (or 0) for no limit. Password login keeps its own stricter limits.
    #[arg(
        long,
        env = "CODER_API_RATE_LIMIT",
        default_value_t = 512,
        allow_negative_numbers = true
    )]
    pub api_rate_limit: i64,

    /// Only owners may sign in with a password; everyone else uses the identity provider.
    #[arg(long, env = "CODER_DISABLE_PASSWORD_AUTH")]
    pub disable_password_auth: bool,

    /// Base64 AES-256 keys (32 bytes each, comma-separated, the first encrypts) sealing
    /// identity-provider tokens at rest; without keys no provider token is kept.
    #[arg(
        long,
        env = "CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub external_token_encryption_keys: Vec<String>,

    /// Serve workspace apps only on subdomains (under the wildcard access URL), never on
    /// paths of the dashboard's origin.
    #[arg(long, env = "CODER_DISABLE_PATH_APPS")]
    pub disable_path_apps: bool,

    /// Let path-based apps keep their sharing level. Dangerous: they share the dashboard's
    /// origin, so a shared app can act as whoever opens it.
    #[arg(long, env = "CODER_DANGEROUS_ALLOW_PATH_APP_SHARING")]
    pub dangerous_allow_path_app_sharing: bool,

    /// Let site owners open other users' path-based apps. Dangerous for the same reason.
    #[arg(long, env = "CODER_DANGEROUS_ALLOW_PATH_APP_SITE_OWNER_ACCESS")]
    pub dangerous_allow_path_app_site_owner_access: bool,

    /// Wildcard host of subdomain apps and port URLs, e.g. `*.apps.example.com` (or
    /// `*--apps.example.com`); subdomain apps are unavailable without one.
    #[arg(long, env = "CODER_WILDCARD_ACCESS_URL", value_parser = wildcard)]
    pub wildcard_access_url: Option<String>,

    /// Set by the CLI from its global `--global-config`; holds the embedded database.
    #[arg(skip)]
    pub config_dir: PathBuf,

    /// Set by the CLI from the matches this was parsed from: every option with its source.
    #[arg(skip)]
    pub options: coderd_core::deployment_options::DeploymentOptions,
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
            .field("audit_logs_retention", &self.audit_logs_retention)
            .field("max_token_lifetime", &self.max_token_lifetime)
            .field(
                "disable_owner_workspace_access",
                &self.disable_owner_workspace_access,
            )
            .field("allow_workspace_renames", &self.allow_workspace_renames)
            .field("ssh_hostname_prefix", &self.ssh_hostname_prefix)
            .field("workspace_hostname_suffix", &self.workspace_hostname_suffix)
            .field("ssh_config_options", &self.ssh_config_options)
            .field(
                "oidc_issuer_url",
                &self.oidc_issuer_url.as_ref().map(Url::as_str),
            )
            .field("oidc_client_id", &self.oidc_client_id)
            .field("oidc_client_secret", &redact(&self.oidc_client_secret))
            .field("github_client_id", &self.github_client_id)
            .field("github_client_secret", &redact(&self.github_client_secret))
            .field("github_allowed_orgs", &self.github_allowed_orgs)
            .field("github_allowed_teams", &self.github_allowed_teams)
            .field("disable_password_auth", &self.disable_password_auth)
            .field(
                "external_token_encryption_keys",
                &format!("<{} redacted>", self.external_token_encryption_keys.len()),
            )
            .field("autobuild_poll_interval", &self.autobuild_poll_interval)
            .field(
                "workspace_prebuilds_reconciliation_interval",
                &self.workspace_prebuilds_reconciliation_interval,
            )
            .field(
                "workspace_prebuilds_reconciliation_backoff_interval",
                &self.workspace_prebuilds_reconciliation_backoff_interval,
            )
            .field("quiet_hours", &self.quiet_hours)
            .field("disable_path_apps", &self.disable_path_apps)
            .field("wildcard_access_url", &self.wildcard_access_url)
            .field("config_dir", &self.config_dir)
            .finish_non_exhaustive()
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

    /// The OIDC login's settings, when an issuer is configured.
    pub fn oidc_settings(&self) -> Result<Option<OidcSettings>, String> {
        let Some(issuer) = self.oidc_issuer_url.clone() else {
            return Ok(None);
        };
        let client_id = self
            .oidc_client_id
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or("CODER_OIDC_ISSUER_URL is set, so CODER_OIDC_CLIENT_ID must be too")?;
        let params: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&self.oidc_auth_url_params).map_err(|e| {
                format!("CODER_OIDC_AUTH_URL_PARAMS must be a JSON object of strings: {e}")
            })?;
        let mut settings = OidcSettings::new(
            issuer,
            client_id,
            self.oidc_client_secret.clone().unwrap_or_default(),
        );
        settings.email_domains = non_empty(&self.oidc_email_domain);
        settings.allow_signups = self.oidc_allow_signups;
        settings.scopes = non_empty(&self.oidc_scopes);
        settings.ignore_email_verified = self.oidc_ignore_email_verified;
        settings.username_field = self.oidc_username_field.clone();
        settings.email_field = self.oidc_email_field.clone();
        settings.name_field = self.oidc_name_field.clone();
        settings.auth_url_params = params.into_iter().collect();
        settings.ignore_userinfo = self.oidc_ignore_userinfo;
        settings.sign_in_text = self.oidc_sign_in_text.clone();
        settings.icon_url = self.oidc_icon_url.clone();
        settings.groups = coderd_sso::groups::sync::GroupSyncSettings {
            field: self.oidc_group_field.clone(),
            mapping: serde_json::from_str(&self.oidc_group_mapping).map_err(|e| {
                format!("CODER_OIDC_GROUP_MAPPING must be a JSON object of strings: {e}")
            })?,
            auto_create: self.oidc_group_auto_create,
            regex_filter: (!self.oidc_group_regex_filter.is_empty())
                .then(|| regex::Regex::new(&self.oidc_group_regex_filter))
                .transpose()
                .map_err(|e| format!("CODER_OIDC_GROUP_REGEX_FILTER is not a regex: {e}"))?,
            allowed_groups: non_empty(&self.oidc_allowed_groups),
        };
        Ok(Some(settings))
    }

    /// The GitHub login's settings, when a client ID is configured.
    pub fn github_settings(&self) -> Result<Option<GithubSettings>, String> {
        let Some(client_id) = self.github_client_id.clone().filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let mut settings = GithubSettings::new(
            client_id,
            self.github_client_secret.clone().unwrap_or_default(),
            non_empty(&self.github_allowed_orgs),
            &non_empty(&self.github_allowed_teams),
            self.github_allow_everyone,
        )?;
        settings.allow_signups = self.github_allow_signups;
        settings.enterprise_base_url = self.github_enterprise_base_url.clone();
        Ok(Some(settings))
    }

    /// The app proxy's settings (the wildcard takes the access URL's scheme unless it names one).
    pub fn app_settings(
        &self,
        access_url: &Url,
    ) -> Result<coderd_core::app_urls::Settings, String> {
        let wildcard = self
            .wildcard_access_url
            .as_deref()
            .filter(|w| !w.is_empty())
            .map(|w| coderd_core::app_urls::Wildcard::parse(w, access_url.scheme()))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(coderd_core::app_urls::Settings {
            disable_path_apps: self.disable_path_apps,
            allow_path_app_sharing: self.dangerous_allow_path_app_sharing,
            allow_path_app_site_owner_access: self.dangerous_allow_path_app_site_owner_access,
            wildcard,
            ..Default::default()
        })
    }

    /// The keys sealing provider tokens, when configured.
    pub fn token_keys(&self) -> Result<Option<KeyRing>, String> {
        let keys = non_empty(&self.external_token_encryption_keys);
        if keys.is_empty() {
            return Ok(None);
        }
        KeyRing::from_base64(&keys)
            .map(Some)
            .map_err(|e| format!("CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS: {e}"))
    }
}

/// Comma-separated lists: trimmed, without empty entries.
fn non_empty(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn poll_interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// Validated here so a bad wildcard stops the server at startup with the flag's name.
fn wildcard(s: &str) -> Result<String, String> {
    coderd_core::app_urls::Wildcard::parse(s, "http")
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// Validated here so a bad schedule stops the server at startup with the flag's name.
/// One SSH option, `Key=Value` or `Key Value` as ssh_config writes them.
fn keygen_algorithm(s: &str) -> Result<String, String> {
    let wanted = s.trim().to_ascii_lowercase();
    match wanted.as_str() {
        "ed25519" => Ok(wanted),
        "ecdsa" | "rsa4096" => Err(format!("{s:?} keys are not made by coder-rs; use ed25519")),
        _ => Err(format!(
            "invalid key type: {s}, must be one of: ed25519,ecdsa,rsa4096"
        )),
    }
}

fn ssh_option(s: &str) -> Result<(String, String), String> {
    let s = s.trim();
    let (key, value) = s
        .split_once('=')
        .or_else(|| s.split_once(char::is_whitespace))
        .ok_or_else(|| format!("{s:?} is not \"Key=Value\""))?;
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!("{key:?} is not an SSH option name"));
    }
    if value.is_empty() || value.contains(['\n', '\r']) {
        return Err(format!("the value of {key} must be one non-empty line"));
    }
    Ok((key.to_string(), value.to_string()))
}

fn quiet_hours(s: &str) -> Result<String, String> {
    coderd_schedule::Schedule::daily(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// A duration, or `0` for "forever" (humantime wants a unit).
fn retention(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: super::ServerConfig,
    }

    #[test]
    fn audit_retention_defaults_to_forever_and_takes_days() -> Result<(), clap::Error> {
        let default = Cli::try_parse_from(["coder"])?;
        assert_eq!(default.config.audit_logs_retention, Duration::ZERO);
        let year = Cli::try_parse_from(["coder", "--audit-logs-retention", "365d"])?;
        assert_eq!(
            year.config.audit_logs_retention,
            Duration::from_secs(365 * 86400)
        );
        assert!(Cli::try_parse_from(["coder", "--audit-logs-retention", "soon"]).is_err());
        Ok(())
    }

    #[test]
    fn prebuilds_reconcile_every_15s_unless_told() -> Result<(), clap::Error> {
        let default = Cli::try_parse_from(["coder"])?;
        let defaults = coderd_executors::prebuilds::Options::default();
        assert_eq!(
            default.config.workspace_prebuilds_reconciliation_interval,
            defaults.interval
        );
        assert_eq!(
            default
                .config
                .workspace_prebuilds_reconciliation_backoff_interval,
            defaults.backoff
        );
        let fast = Cli::try_parse_from([
            "coder",
            "--workspace-prebuilds-reconciliation-interval",
            "500ms",
        ])?;
        assert_eq!(
            fast.config.workspace_prebuilds_reconciliation_interval,
            Duration::from_millis(500)
        );
        assert!(
            Cli::try_parse_from([
                "coder",
                "--workspace-prebuilds-reconciliation-interval",
                "0s"
            ])
            .is_err()
        );
        Ok(())
    }
}
