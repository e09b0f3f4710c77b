//! The deployment's health report, as Coder's `/api/v2/debug/health` sections it: the database
//! (reachable, how slow), the access URL (does this server answer there), WebSockets through
//! the access URL (does an upgrade reach this server), the provisioner daemons (any online to
//! run builds), and Coder's DERP and workspace-proxy sections (none here, so nothing to fail).
//! Findings carry Coder's codes; sections administrators dismissed still show but no longer
//! count toward the overall severity. Only those who may read the deployment's configuration
//! may see it; only those who may change it may dismiss sections.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use codersdk::ValidationError;
use codersdk::health::{HEALTH_SECTIONS, HealthSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Error, Result, jobs};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};
use coderd_store::DaemonRow;

/// Coder's default: a database slower than this to answer a ping is a warning.
pub const DATABASE_LATENCY_THRESHOLD: Duration = Duration::from_millis(15);
/// How long the access URL may take to answer.
const ACCESS_URL_TIMEOUT: Duration = Duration::from_secs(3);
/// Where the WebSocket probe upgrades: an echo route of the API.
pub const WEBSOCKET_PROBE_PATH: &str = "/api/v2/debug/ws";
const SETTINGS_KEY: &str = "health_settings";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Ok,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// A finding with Coder's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

/// One checked part of the deployment.
#[derive(Debug, Clone)]
pub struct Section {
    /// Coder's name of the section (`Database`, `AccessURL`, …).
    pub key: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// One sentence for the person reading it.
    pub summary: String,
    /// What was measured, as label and value.
    pub facts: Vec<(&'static str, String)>,
    pub warnings: Vec<Warning>,
    pub dismissed: bool,
}

/// What the database check measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseCheck {
    pub reachable: bool,
    pub latency: Duration,
}

/// What the access URL check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUrlCheck {
    pub url: String,
    pub reachable: bool,
    /// `/healthz`'s status, when it answered over HTTP.
    pub status: Option<u16>,
    pub body: String,
}

/// What the WebSocket probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebsocketCheck {
    /// The status the upgrade was answered with (101 when it went through).
    pub status: Option<u16>,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub time: DateTime<Utc>,
    /// The worst severity of the sections not dismissed.
    pub severity: Severity,
    pub sections: Vec<Section>,
    pub database: DatabaseCheck,
    pub access_url: AccessUrlCheck,
    pub websocket: WebsocketCheck,
    /// The daemons known, and whether each is online.
    pub daemons: Vec<(DaemonRow, bool)>,
}

impl Report {
    pub fn healthy(&self) -> bool {
        self.severity != Severity::Error
    }

    pub fn section(&self, key: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.key == key)
    }
}

fn authorize_read(subject: &Subject) -> Result<()> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    Ok(())
}

/// The sections administrators dismissed.
pub async fn settings(state: &AppState, subject: &Subject) -> Result<HealthSettings> {
    authorize_read(subject)?;
    saved_settings(state).await
}

async fn saved_settings(state: &AppState) -> Result<HealthSettings> {
    match state.store.site_config(SETTINGS_KEY).await? {
        Some(json) => serde_json::from_str(&json).map_err(Error::internal),
        None => Ok(HealthSettings::default()),
    }
}

/// Replaces the dismissed sections; `None` when nothing changed.
pub async fn update_settings(
    state: &AppState,
    subject: &Subject,
    settings: &HealthSettings,
) -> Result<Option<HealthSettings>> {
    if !subject.can(Action::Update, &Object::site(Resource::DeploymentConfig)) {
        authorize_read(subject)?;
        return Err(Error::forbidden(
            "Insufficient permissions to update health settings.",
        ));
    }
    let unknown: Vec<ValidationError> = settings
        .dismissed_healthchecks
        .iter()
        .filter(|s| !HEALTH_SECTIONS.contains(&s.as_str()))
        .map(|s| ValidationError {
            field: "dismissed_healthchecks".into(),
            detail: format!(
                "{s:?} is not a section; they are {}",
                HEALTH_SECTIONS.join(", ")
            ),
        })
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Validation(unknown));
    }
    let mut wanted = settings.clone();
    wanted.dismissed_healthchecks.sort();
    wanted.dismissed_healthchecks.dedup();
    if saved_settings(state).await? == wanted {
        return Ok(None);
    }
    let json = serde_json::to_string(&wanted).map_err(Error::internal)?;
    state.store.set_site_config(SETTINGS_KEY, &json).await?;
    Ok(Some(wanted))
}

/// Runs every check now.
pub async fn report(state: &AppState, subject: &Subject) -> Result<Report> {
    authorize_read(subject)?;
    let dismissed = saved_settings(state).await?.dismissed_healthchecks;
    let ((database, db_section), (access_url, url_section), (websocket, ws_section)) =
        tokio::join!(database(state), access_url(state), websocket(state));
    let (daemons, daemons_section) = provisioners(state).await?;
    let mut sections = vec![
        db_section,
        url_section,
        ws_section,
        relay(state),
        daemons_section,
    ];
    for section in &mut sections {
        section.dismissed = dismissed.iter().any(|d| d == section.key);
    }
    let severity = sections
        .iter()
        .filter(|s| !s.dismissed)
        .map(|s| s.severity)
        .max()
        .unwrap_or(Severity::Ok);
    Ok(Report {
        time: Utc::now(),
        severity,
        sections,
        database,
        access_url,
        websocket,
        daemons,
    })
}

impl Section {
    /// A section whose severity follows from its findings: an error when the check failed, a
    /// warning when it found something, fine otherwise.
    fn checked(
        key: &'static str,
        name: &'static str,
        error: bool,
        summary: String,
        facts: Vec<(&'static str, String)>,
        warnings: Vec<Warning>,
    ) -> Self {
        let severity = if error {
            Severity::Error
        } else if warnings.is_empty() {
            Severity::Ok
        } else {
            Severity::Warning
        };
        Self {
            key,
            name,
            severity,
            summary,
            facts,
            warnings,
            dismissed: false,
        }
    }
}

async fn database(state: &AppState) -> (DatabaseCheck, Section) {
    let started = Instant::now();
    let ping = state.store.ping().await;
    let latency = started.elapsed();
    let facts = vec![
        ("Latency", format!("{} ms", latency.as_millis())),
        (
            "Threshold",
            format!("{} ms", DATABASE_LATENCY_THRESHOLD.as_millis()),
        ),
    ];
    let mut warnings = Vec::new();
    let (error, summary) = match ping {
        Err(e) => {
            tracing::warn!(error = %e, "health report: database unreachable");
            warnings.push(Warning {
                code: "EDB01",
                message: "The database does not answer a ping.".into(),
            });
            (true, "The database does not answer.".to_owned())
        }
        Ok(()) if latency > DATABASE_LATENCY_THRESHOLD => {
            warnings.push(Warning {
                code: "EDB02",
                message: format!(
                    "The database's latency, {} ms, is above the threshold of {} ms.",
                    latency.as_millis(),
                    DATABASE_LATENCY_THRESHOLD.as_millis()
                ),
            });
            (
                false,
                "The database answers, but slower than the threshold.".to_owned(),
            )
        }
        Ok(()) => (false, "The database answers.".to_owned()),
    };
    let check = DatabaseCheck {
        reachable: !error,
        latency,
    };
    let section = Section::checked("Database", "Database", error, summary, facts, warnings);
    (check, section)
}

/// Sends `request` to the access URL's host and reads the head of the answer: its status and
/// what follows the headers. `None` for https (coderd carries no TLS client): then only that
/// it accepts connections.
async fn ask_access_url(
    url: &url::Url,
    request: &str,
) -> std::result::Result<Option<(u16, String)>, &'static str> {
    let host = url.host_str().ok_or("the access URL has no host")?;
    let port = url
        .port_or_known_default()
        .ok_or("the access URL has no port")?;
    let mut stream = TcpStream::connect((host, port))
        .await
        .map_err(|_| "nothing accepts connections there")?;
    if url.scheme() != "http" {
        return Ok(None);
    }
    stream
        .write_all(request.replace("{host}", host).as_bytes())
        .await
        .map_err(|_| "the connection closed")?;
    let mut head = vec![0u8; 1024];
    let n = stream.read(&mut head).await.map_err(|_| "no answer came")?;
    let text = String::from_utf8_lossy(&head[..n]).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or("the answer was not HTTP")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.trim().to_owned())
        .unwrap_or_default();
    Ok(Some((status, body)))
}

/// Asks the access URL's `/healthz`.
async fn access_url(state: &AppState) -> (AccessUrlCheck, Section) {
    let url = state.options.access_url.clone();
    let mut facts = vec![("Access URL", url.to_string())];
    let mut warnings = Vec::new();
    let mut check = AccessUrlCheck {
        url: url.to_string(),
        reachable: false,
        status: None,
        body: String::new(),
    };
    let probe = ask_access_url(
        &url,
        "GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
    );
    let (error, summary) = match tokio::time::timeout(ACCESS_URL_TIMEOUT, probe).await {
        Err(_) => {
            warnings.push(Warning {
                code: "EACS03",
                message: "The access URL's /healthz did not answer in time.".into(),
            });
            (true, "The access URL did not answer in time.".to_owned())
        }
        Ok(Err(why)) => {
            warnings.push(Warning {
                code: "EACS03",
                message: format!("Could not fetch the access URL's /healthz: {why}."),
            });
            (
                true,
                format!("The access URL is not reachable from the server: {why}."),
            )
        }
        Ok(Ok(None)) => {
            check.reachable = true;
            (false, "The access URL accepts connections.".to_owned())
        }
        Ok(Ok(Some((status, body)))) => {
            check.reachable = true;
            check.status = Some(status);
            check.body = body;
            facts.push(("GET /healthz", status.to_string()));
            if status == 200 {
                (false, "The access URL reaches this server.".to_owned())
            } else {
                warnings.push(Warning {
                    code: "EACS04",
                    message: format!("The access URL's /healthz answered {status}, not 200."),
                });
                (
                    true,
                    format!("The access URL's /healthz answered {status}."),
                )
            }
        }
    };
    let section = Section::checked("AccessURL", "Access URL", error, summary, facts, warnings);
    (check, section)
}

/// Upgrades to a WebSocket through the access URL: a proxy in front that drops the upgrade
/// would break terminals, agents and the relay while plain requests still work.
async fn websocket(state: &AppState) -> (WebsocketCheck, Section) {
    let url = state.options.access_url.clone();
    let request = format!(
        "GET {WEBSOCKET_PROBE_PATH} HTTP/1.1\r\nHost: {{host}}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: Y29kZXItcnMgaGVhbHRoIQ==\r\n\r\n"
    );
    let mut warnings = Vec::new();
    let mut check = WebsocketCheck {
        status: None,
        body: String::new(),
    };
    let (error, summary) =
        match tokio::time::timeout(ACCESS_URL_TIMEOUT, ask_access_url(&url, &request)).await {
            Err(_) | Ok(Err(_)) => {
                warnings.push(Warning {
                    code: "EWS01",
                    message: "A WebSocket could not be opened through the access URL.".into(),
                });
                (
                    true,
                    "A WebSocket could not be opened through the access URL.".to_owned(),
                )
            }
            Ok(Ok(None)) => (
                false,
                "The access URL is https; its upgrades are not probed from the server.".to_owned(),
            ),
            Ok(Ok(Some((status, body)))) => {
                check.status = Some(status);
                check.body = body;
                if status == 101 {
                    (
                        false,
                        "WebSockets reach this server through the access URL.".to_owned(),
                    )
                } else {
                    warnings.push(Warning {
                        code: "EWS01",
                        message: format!(
                            "The WebSocket upgrade was answered {status}, not 101: a proxy in \
                             front may drop upgrades."
                        ),
                    });
                    (
                        true,
                        format!("The WebSocket upgrade was answered {status}."),
                    )
                }
            }
        };
    let facts = vec![(
        "Upgrade answered",
        check
            .status
            .map_or_else(|| "—".to_owned(), |s| s.to_string()),
    )];
    let section = Section::checked("Websocket", "WebSockets", error, summary, facts, warnings);
    (check, section)
}

fn relay(state: &AppState) -> Section {
    let agents = state.agents.len();
    // Connections here take the relay where Coder's take DERP.
    Section::checked(
        "DERP",
        "Workspace relay",
        false,
        "Agents connect to this replica over WebSocket; connections into workspaces are \
         relayed through them."
            .to_owned(),
        vec![("Agents connected to this replica", agents.to_string())],
        Vec::new(),
    )
}

async fn provisioners(state: &AppState) -> Result<(Vec<(DaemonRow, bool)>, Section)> {
    let daemons: Vec<(DaemonRow, bool)> = state
        .store
        .daemons(None, None)
        .await?
        .into_iter()
        .map(|d| {
            let online = jobs::daemon_online(state, &d);
            (d, online)
        })
        .collect();
    let online = daemons.iter().filter(|(_, up)| *up).count();
    let mut warnings = Vec::new();
    let summary = if online == 0 {
        warnings.push(Warning {
            code: "EPD01",
            message: "No provisioner daemons are available.".into(),
        });
        "No provisioner daemon is online: builds will wait.".to_owned()
    } else {
        "Provisioner daemons are online to run builds.".to_owned()
    };
    let facts = vec![
        ("Online", online.to_string()),
        ("Known", daemons.len().to_string()),
    ];
    let section = Section::checked(
        "ProvisionerDaemons",
        "Provisioner daemons",
        false,
        summary,
        facts,
        warnings,
    );
    Ok((daemons, section))
}
