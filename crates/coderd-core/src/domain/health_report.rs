//! The health report (`health::report`) in Coder's shape, for `GET /api/v2/debug/health`.

use codersdk::deployment::RegionsResponse;
use codersdk::health::{
    AccessURLReport, BaseReport, DERPHealthReport, DatabaseReport, HealthMessage,
    HealthcheckReport, ProvisionerDaemonsReport, ProvisionerDaemonsReportItem, WebsocketReport,
    WorkspaceProxyReport,
};

use super::health::{self, DATABASE_LATENCY_THRESHOLD, Report, Section, Severity};
use super::{Result, jobs};
use crate::state::AppState;
use coderd_authz::Subject;

/// A section's severity, findings and dismissal, its first finding as its error when it
/// failed; an absent section is healthy.
fn base(section: Option<&Section>) -> BaseReport {
    let Some(s) = section else {
        return BaseReport {
            severity: Severity::Ok.as_str().to_owned(),
            warnings: Vec::new(),
            dismissed: false,
            error: None,
        };
    };
    BaseReport {
        severity: s.severity.as_str().to_owned(),
        warnings: s
            .warnings
            .iter()
            .map(|w| HealthMessage {
                code: w.code.into(),
                message: w.message.clone(),
            })
            .collect(),
        dismissed: s.dismissed,
        error: (s.severity == Severity::Error)
            .then(|| s.warnings.first().map(|w| w.message.clone()))
            .flatten(),
    }
}

/// Runs every check and answers as Coder's report does.
pub async fn coder_report(state: &AppState, subject: &Subject) -> Result<HealthcheckReport> {
    let report: Report = health::report(state, subject).await?;
    let healthy = |key: &str| {
        report
            .section(key)
            .is_none_or(|s| s.severity != Severity::Error)
    };

    let latency = report.database.latency;
    let database = DatabaseReport {
        healthy: healthy("Database"),
        base: base(report.section("Database")),
        reachable: report.database.reachable,
        latency: format!("{latency:?}"),
        latency_ms: i64::try_from(latency.as_millis()).unwrap_or(i64::MAX),
        threshold_ms: i64::try_from(DATABASE_LATENCY_THRESHOLD.as_millis()).unwrap_or(0),
    };

    let access_url = AccessURLReport {
        healthy: healthy("AccessURL"),
        base: base(report.section("AccessURL")),
        access_url: report.access_url.url.clone(),
        reachable: report.access_url.reachable,
        status_code: report.access_url.status.map_or(0, i32::from),
        healthz_response: report.access_url.body.clone(),
    };

    let websocket = WebsocketReport {
        healthy: healthy("Websocket"),
        base: base(report.section("Websocket")),
        body: report.websocket.body.clone(),
        code: report.websocket.status.map_or(0, i32::from),
    };

    let derp = DERPHealthReport {
        healthy: healthy("DERP"),
        base: base(report.section("DERP")),
        regions: Default::default(),
        netcheck_logs: Vec::new(),
    };

    let workspace_proxy = WorkspaceProxyReport {
        healthy: healthy("WorkspaceProxy"),
        base: base(report.section("WorkspaceProxy")),
        workspace_proxies: RegionsResponse {
            regions: vec![super::deployment_config::primary_region(state)],
        },
    };

    let mut items = Vec::with_capacity(report.daemons.len());
    for (row, _) in report.daemons.iter().cloned() {
        items.push(ProvisionerDaemonsReportItem {
            provisioner_daemon: jobs::daemon(state, row).await?,
            warnings: Vec::new(),
        });
    }
    let provisioner_daemons = ProvisionerDaemonsReport {
        base: base(report.section("ProvisionerDaemons")),
        items,
    };

    Ok(HealthcheckReport {
        time: report.time,
        healthy: report.healthy(),
        severity: report.severity.as_str().to_owned(),
        derp,
        access_url,
        websocket,
        database,
        workspace_proxy,
        provisioner_daemons,
        coder_version: codersdk::version::VERSION.to_string(),
    })
}
