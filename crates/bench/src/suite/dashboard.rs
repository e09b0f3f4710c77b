//! The dashboard's rows (issue 14), from one run of `scenarios::dashboard` on its own server:
//! list pages on 10,000 workspaces server side and in Chromium, the workspace page, build events
//! on the live socket, and coderd's memory for idle live sockets.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::Progress;
use crate::config::Config;
use crate::report::{Check, Report, Row};
use crate::scenarios::dashboard::{self, Plan};
use crate::stats::Percentiles;

/// Requests, navigations, builds and idle sockets per profile; the workspaces are P5's.
fn plan(config: &Config) -> Plan {
    let sizes = &config.sizes;
    let (requests, navigations, builds, sockets) = match config.profile.as_str() {
        "tiny" => (5, 2, 2, 20),
        "quick" => (60, 10, 5, 500),
        _ => (200, 20, 10, 500),
    };
    Plan {
        workspaces: sizes.list_workspaces,
        requests,
        navigations,
        builds,
        sockets,
        runs: sizes.runs,
        warmup: sizes.warmup,
        timeout: sizes.timeout,
    }
}

fn ms(samples: &[Duration]) -> Vec<f64> {
    samples.iter().map(|d| d.as_secs_f64() * 1e3).collect()
}

fn median(values: &[f64]) -> f64 {
    crate::stats::Summary::of(values).map_or(0.0, |s| s.median)
}

pub(super) async fn dashboard_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let plan = plan(config);
    let run = dashboard::run(&config.coder_bin, &work.join("dashboard"), &plan, &|what| {
        progress.step(what)
    })
    .await
    .context("measuring the dashboard")?;
    let n = run.workspaces;
    let p95 = |runs: &[Percentiles]| -> Vec<f64> { runs.iter().map(|p| p.p95).collect() };
    let p50 = |runs: &[Percentiles]| -> Vec<f64> { runs.iter().map(|p| p.p50).collect() };

    for (target, served) in &run.served {
        let latency: Vec<Percentiles> = served.iter().map(|s| s.latency).collect();
        let row = Row::new(
            "-",
            &format!("dashboard {}: server p95 (send → last byte)", target.label),
            "ms",
            &p95(&latency),
        )
        .goal("≤ 50 ms", Check::max(50.0))
        .note(format!(
            "issue 14; {n} workspaces; {} sequential GETs per run with the session cookie, \
             loopback; p50 {:.2} ms; `{}`",
            plan.requests,
            median(&p50(&latency)),
            target.path
        ));
        report.rows.push(row);
        if target.rows.is_some() {
            let kb: Vec<f64> = served.iter().map(|s| s.bytes as f64 / 1e3).collect();
            report.rows.push(
                Row::new(
                    "-",
                    &format!("dashboard {}: HTML size", target.label),
                    "KB",
                    &kb,
                )
                .goal("≤ 80 KB", Check::max(80.0))
                .note("uncompressed"),
            );
        }
    }

    match &run.browser {
        Ok(pages) => {
            for (target, runs) in pages {
                report.rows.push(
                    Row::new(
                        "-",
                        &format!(
                            "dashboard {}: DOMContentLoaded in headless Chromium, p95",
                            target.label
                        ),
                        "ms",
                        &p95(runs),
                    )
                    .goal("≤ 300 ms", Check::max(300.0))
                    .note(format!(
                        "{} navigations per run, Navigation Timing through WebDriver, assets \
                         cached by a first load; p50 {:.1} ms",
                        plan.navigations,
                        median(&p50(runs))
                    )),
                );
            }
        }
        Err(why) => {
            for page in ["page 1", "the deep page"] {
                report.rows.push(
                    Row::not_measured(
                        "-",
                        &format!("dashboard /workspaces {page}: DOMContentLoaded in Chromium"),
                        why,
                    )
                    .goal("≤ 300 ms", Check::max(300.0)),
                );
            }
        }
    }

    let worst = |runs: &[Vec<Duration>]| -> Vec<f64> {
        runs.iter()
            .map(|r| ms(r).into_iter().fold(0.0, f64::max))
            .collect()
    };
    let all = |runs: &[Vec<Duration>]| -> Vec<f64> { runs.iter().flat_map(|r| ms(r)).collect() };
    let builds: usize = run.live.fragment.iter().map(Vec::len).sum();
    report.rows.push(
        Row::new(
            "-",
            "dashboard live: build created → its status fragment on the open socket, slowest",
            "ms",
            &worst(&run.live.fragment),
        )
        .goal("≤ 1 s", Check::max(1000.0))
        .note(format!(
            "{builds} stop/start builds through the API (1 echo daemon), `/-/live` socket as \
             live.js opens it; median of all {:.1} ms",
            median(&all(&run.live.fragment))
        )),
    );
    report.rows.push(
        Row::new(
            "-",
            "dashboard live: build created → its first log line on the socket, slowest",
            "ms",
            &worst(&run.live.log_line),
        )
        .goal("≤ 500 ms", Check::max(500.0))
        .note(format!(
            "includes the daemon picking up the job; median of all {:.1} ms",
            median(&all(&run.live.log_line))
        )),
    );

    let idle = &run.idle;
    let delta_mb = (idle.after.rss_mib - idle.before.rss_mib) * 1048576.0 / 1e6;
    report.rows.push(
        Row::new(
            "-",
            &format!(
                "dashboard: coderd RSS growth for {} idle live sockets",
                idle.count
            ),
            "MB",
            &[delta_mb],
        )
        .goal("≤ 50 MB", Check::max(50.0))
        .note(format!(
            "each on its own workspace's page, after its first fragment; RSS {:.1} → {:.1} MiB \
             ({:.0} KiB per socket); opened in {:.2} s",
            idle.before.rss_mib,
            idle.after.rss_mib,
            delta_mb * 1e6 / 1024.0 / idle.count.max(1) as f64,
            idle.opened_in.as_secs_f64()
        )),
    );
    report.counts.insert("dashboard_workspaces".into(), n);
    report.counts.insert("dashboard_live_builds".into(), builds);
    report
        .counts
        .insert("dashboard_idle_sockets".into(), idle.count);
    Ok(())
}
