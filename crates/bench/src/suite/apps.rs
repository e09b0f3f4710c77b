//! The app proxy's rows (issue 13): small-GET latency and requests/s, and a large download,
//! through coderd's path-app proxy against the same server reached directly, from one run of
//! `scenarios::apps`.

use std::path::Path;

use anyhow::Context;

use super::Progress;
use crate::config::Config;
use crate::report::{Check, Report, Row};
use crate::scenarios::apps::{self, PathRun};

pub(super) async fn app_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let plan = apps::Plan {
        bytes: sizes.app_bytes,
        requests: sizes.app_requests,
        connections: sizes.app_connections,
        window: sizes.app_window,
        runs: sizes.runs,
        warmup: sizes.warmup,
        timeout: sizes.timeout,
    };
    let run = apps::run(&config.coder_bin, &work.join("apps"), &plan, &|what| {
        progress.step(what)
    })
    .await
    .context("measuring the app proxy")?;
    let of =
        |runs: &[PathRun], f: fn(&PathRun) -> f64| -> Vec<f64> { runs.iter().map(f).collect() };
    // Differences run by run: each run's direct figure is its own baseline, so drift between
    // runs (other load on the machine) does not count as proxy latency.
    let added = |f: fn(&PathRun) -> f64| -> Vec<f64> {
        run.proxied
            .iter()
            .zip(&run.direct)
            .map(|(p, d)| f(p) - f(d))
            .collect()
    };
    let direct = "same server, direct (loopback)";
    let path = "/@user/ws/apps/<slug>/: coderd → relay stream → coder agent → server";

    report.rows.push(
        Row::new(
            "-",
            "app proxy: small GET p50, keep-alive",
            "ms",
            &of(&run.proxied, |r| r.latency.p50),
        )
        .baseline(direct, Ok(&of(&run.direct, |r| r.latency.p50)))
        .note(format!(
            "issue 13; {} sequential GETs per run on one connection; {path}",
            plan.requests
        )),
    );
    report.rows.push(
        Row::new(
            "-",
            "app proxy: added latency p50 (proxied − direct, same run)",
            "ms",
            &added(|r| r.latency.p50),
        )
        .goal("≤ 1 ms", Check::max(1.0)),
    );
    report.rows.push(
        Row::new(
            "-",
            "app proxy: small GET p99, keep-alive",
            "ms",
            &of(&run.proxied, |r| r.latency.p99),
        )
        .baseline(direct, Ok(&of(&run.direct, |r| r.latency.p99))),
    );
    report.rows.push(Row::new(
        "-",
        "app proxy: added latency p99 (proxied − direct, same run)",
        "ms",
        &added(|r| r.latency.p99),
    ));
    let median = |values: Vec<f64>| crate::stats::Summary::of(&values).map_or(0.0, |s| s.median);
    report.rows.push(
        Row::new(
            "-",
            &format!(
                "app proxy: small GETs, {} keep-alive connections",
                plan.connections
            ),
            "req/s",
            &of(&run.proxied, |r| r.per_second),
        )
        .baseline(direct, Ok(&of(&run.direct, |r| r.per_second)))
        .goal("≥ 5,000 req/s", Check::min(5000.0))
        .note(format!(
            "{:.1} s closed loops per run; CPU per proxied request: coderd {:.0} µs, agent \
             {:.0} µs, bench client + server {:.0} µs",
            plan.window.as_secs_f64(),
            median(run.cpu.iter().map(|c| c.coderd_us).collect()),
            median(run.cpu.iter().map(|c| c.agent_us).collect()),
            median(run.cpu.iter().map(|c| c.bench_us).collect()),
        )),
    );
    report.rows.push(
        Row::new(
            "-",
            &format!("app proxy: download ({} MiB)", plan.bytes >> 20),
            "MB/s",
            &of(&run.proxied, |r| r.download),
        )
        .baseline(direct, Ok(&of(&run.direct, |r| r.download)))
        .goal("≥ 0.8× direct", Check::ratio_min(0.8))
        .note(format!(
            "one GET, body streamed and counted; during it coderd {:.2} vCPU, agent {:.2} vCPU",
            median(run.download_cpu.iter().map(|c| c.0).collect()),
            median(run.download_cpu.iter().map(|c| c.1).collect()),
        )),
    );
    report.rows.push(
        Row::new("-", "app proxy: failed requests", "", &[run.errors as f64])
            .goal("none", Check::max(0.0)),
    );
    if let Some(e) = &run.first_error {
        report.notes.push(format!(
            "app proxy: {} failed requests, first: {e}",
            run.errors
        ));
    }
    report.counts.insert("app_requests".into(), run.requests);
    report
        .counts
        .insert("app_downloads".into(), run.proxied.len());
    Ok(())
}
