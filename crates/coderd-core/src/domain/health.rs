//! The deployment's health report, as Coder's `/api/v2/debug/health` sections it: the database
//! (reachable, how slow), the access URL (does this server answer there), the workspace relay
//! (agents connected to this replica) and the provisioner daemons (any online to run builds).
//! Only those who may read the deployment's configuration may see it.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Result, jobs};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

/// Coder's default: a database slower than this to answer a ping is a warning.
pub const DATABASE_LATENCY_THRESHOLD: Duration = Duration::from_millis(15);
/// How long the access URL may take to answer.
const ACCESS_URL_TIMEOUT: Duration = Duration::from_secs(3);

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

/// One checked part of the deployment.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: &'static str,
    pub severity: Severity,
    /// One sentence for the person reading it.
    pub summary: String,
    /// What was measured, as label and value.
    pub facts: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub time: DateTime<Utc>,
    /// The worst section's severity.
    pub severity: Severity,
    pub sections: Vec<Section>,
}

impl Report {
    pub fn healthy(&self) -> bool {
        self.severity != Severity::Error
    }
}

/// Runs every check now.
pub async fn report(state: &AppState, subject: &Subject) -> Result<Report> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    let (database, access_url) = tokio::join!(database(state), access_url(state));
    let sections = vec![
        database,
        access_url,
        relay(state),
        provisioners(state).await?,
    ];
    let severity = sections
        .iter()
        .map(|s| s.severity)
        .max()
        .unwrap_or(Severity::Ok);
    Ok(Report {
        time: Utc::now(),
        severity,
        sections,
    })
}

async fn database(state: &AppState) -> Section {
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
    let (severity, summary) = match ping {
        Err(e) => {
            tracing::warn!(error = %e, "health report: database unreachable");
            (Severity::Error, "The database does not answer.".to_owned())
        }
        Ok(()) if latency > DATABASE_LATENCY_THRESHOLD => (
            Severity::Warning,
            "The database answers, but slower than the threshold.".to_owned(),
        ),
        Ok(()) => (Severity::Ok, "The database answers.".to_owned()),
    };
    Section {
        name: "Database",
        severity,
        summary,
        facts,
    }
}

/// Asks the access URL's `/healthz` (over plain HTTP; for https only that it accepts
/// connections, as coderd carries no TLS client).
async fn access_url(state: &AppState) -> Section {
    let url = state.options.access_url.clone();
    let mut facts = vec![("Access URL", url.to_string())];
    let probe = async {
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
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|_| "the connection closed")?;
        let mut head = vec![0u8; 512];
        let n = stream.read(&mut head).await.map_err(|_| "no answer came")?;
        let text = String::from_utf8_lossy(&head[..n]).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or("the answer was not HTTP")?;
        Ok::<_, &'static str>(Some(status))
    };
    let (severity, summary) = match tokio::time::timeout(ACCESS_URL_TIMEOUT, probe).await {
        Err(_) => (
            Severity::Error,
            "The access URL did not answer in time.".to_owned(),
        ),
        Ok(Err(why)) => (
            Severity::Error,
            format!("The access URL is not reachable from the server: {why}."),
        ),
        Ok(Ok(None)) => (
            Severity::Ok,
            "The access URL accepts connections.".to_owned(),
        ),
        Ok(Ok(Some(status))) => {
            facts.push(("GET /healthz", status.to_string()));
            if status == 200 {
                (
                    Severity::Ok,
                    "The access URL reaches this server.".to_owned(),
                )
            } else {
                (
                    Severity::Error,
                    format!("The access URL's /healthz answered {status}."),
                )
            }
        }
    };
    Section {
        name: "Access URL",
        severity,
        summary,
        facts,
    }
}

fn relay(state: &AppState) -> Section {
    let agents = state.agents.len();
    Section {
        name: "Workspace relay",
        severity: Severity::Ok,
        summary: "Agents connect to this replica over WebSocket; connections into workspaces \
                  are relayed through them."
            .to_owned(),
        facts: vec![("Agents connected to this replica", agents.to_string())],
    }
}

async fn provisioners(state: &AppState) -> Result<Section> {
    let daemons = state.store.daemons(None, None).await?;
    let online = daemons
        .iter()
        .filter(|d| jobs::daemon_online(state, d))
        .count();
    let (severity, summary) = if online == 0 {
        (
            Severity::Warning,
            "No provisioner daemon is online: builds will wait.".to_owned(),
        )
    } else {
        (
            Severity::Ok,
            "Provisioner daemons are online to run builds.".to_owned(),
        )
    };
    Ok(Section {
        name: "Provisioner daemons",
        severity,
        summary,
        facts: vec![
            ("Online", online.to_string()),
            ("Known", daemons.len().to_string()),
        ],
    })
}
