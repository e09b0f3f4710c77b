//! The read scenarios and their rows: P4 (the dashboard's read mix at a fixed open-loop rate),
//! P4b (the same mix stepped up until its p95 passes 30 ms: the capacity), P5 (listing every
//! workspace) and P12 (the insights over 90 days of usage, beside P5's workspaces). In the full suite they run on the deployment the build scenarios left (P4b's
//! ladder on a second coderd of it, see [`capacity`]); alone
//! (`--only reads`) on their own server, after one closed-loop build window that leaves the
//! template a build history like the one the suite's P2 leaves.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

use super::Progress;
use crate::config::{Config, Sizes};
use crate::deploy::{Deployment, build_template};
use crate::procs::Cluster;
use crate::report::{Check, Report, Row};
use crate::scenarios::api::{self, Mix};
use crate::scenarios::cpu_cost::{self, CpuCost};
use crate::scenarios::{builds, insights, list, watch};
use crate::seed::{self, Jobs, Source};
use crate::stats::Percentiles;

/// P4b's limit: the highest rate whose p95 stays under this is the capacity.
const CAPACITY_P95_MS: f64 = 30.0;

/// The rate the CPU cost of each read is measured at: low enough that no run queues.
const COST_RATE: f64 = 200.0;

/// One step of P4b.
pub(super) struct Step {
    rate: f64,
    offered: f64,
    p95: f64,
    errors: usize,
}

impl Step {
    fn passed(&self) -> bool {
        self.errors == 0 && self.p95 <= CAPACITY_P95_MS
    }
}

/// What P4, P4b and P5 measured.
pub(super) struct ReadsRun {
    p4: Vec<Percentiles>,
    p4_kinds: Vec<Vec<Percentiles>>,
    p4_errors: usize,
    p4_offered: Vec<f64>,
    steps: Vec<Step>,
    /// CPU per request of the mix (first) and of each kind alone, in `api::Kind::ALL` order.
    costs: Vec<(Mix, CpuCost)>,
    p5: Vec<f64>,
    p5_bytes: usize,
    listed: usize,
    /// P12: each insights route's latencies.
    p12: Vec<(&'static str, Percentiles)>,
}

/// Clones `source` until `count` workspaces exist; returns how many there are.
async fn seed_up_to(
    deploy: &Deployment,
    source: Source,
    count: usize,
    prefix: &str,
) -> anyhow::Result<usize> {
    let have = seed::workspace_count(&deploy.pool).await? as usize;
    seed::workspaces(
        &deploy.pool,
        source,
        count.saturating_sub(have),
        prefix,
        Jobs::Completed,
    )
    .await?;
    Ok(seed::workspace_count(&deploy.pool).await? as usize)
}

/// Seeds up to `sizes.api_workspaces` clones of `source`, runs P4 and P4b over them, then
/// seeds up to `sizes.list_workspaces` and runs P5.
pub(super) async fn measure(
    sizes: &Sizes,
    deploy: &Deployment,
    source: Source,
    template: Uuid,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<ReadsRun> {
    let warmups = usize::from(sizes.warmup);
    seed_up_to(deploy, source, sizes.api_workspaces, "api-").await?;
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM workspaces WHERE NOT deleted")
        .fetch_all(&deploy.pool)
        .await?;
    report.counts.insert("p4_workspaces".into(), ids.len());
    progress.step(&format!(
        "P4 API reads at {} req/s over {} workspaces",
        sizes.api_rate,
        ids.len()
    ));
    if sizes.warmup {
        api::run(
            &deploy.owner,
            &ids,
            template,
            Mix::Dashboard,
            sizes.api_rate,
            Duration::from_secs(1),
        )
        .await?;
    }
    let mut run = ReadsRun {
        p4: Vec::new(),
        p4_kinds: vec![Vec::new(); api::Kind::ALL.len()],
        p4_errors: 0,
        p4_offered: Vec::new(),
        steps: Vec::new(),
        costs: Vec::new(),
        p5: Vec::new(),
        p5_bytes: 0,
        listed: 0,
        p12: Vec::new(),
    };
    for _ in 0..sizes.runs {
        let measured = api::run(
            &deploy.owner,
            &ids,
            template,
            Mix::Dashboard,
            sizes.api_rate,
            sizes.api_duration,
        )
        .await?;
        run.p4_errors += measured.errors;
        if let Some(e) = measured.first_error {
            report.notes.push(format!(
                "P4: {} failed requests, first: {e}",
                measured.errors
            ));
        }
        *report.counts.entry("p4_requests".into()).or_default() +=
            measured.samples.len() + measured.errors;
        run.p4_offered.push(measured.offered);
        let all: Vec<Duration> = measured.samples.iter().map(|(_, d)| *d).collect();
        run.p4
            .push(Percentiles::of(&all).context("P4 measured no request")?);
        for (k, kind) in api::Kind::ALL.iter().enumerate() {
            let of_kind: Vec<Duration> = measured
                .samples
                .iter()
                .filter(|(sk, _)| sk == kind)
                .map(|(_, d)| *d)
                .collect();
            if let Some(p) = Percentiles::of(&of_kind) {
                run.p4_kinds[k].push(p);
            }
        }
    }
    report.counts.insert("p4_errors".into(), run.p4_errors);

    // Where P4b's capacity goes: CPU per request, by process, for the mix and each kind.
    let mixes = std::iter::once(Mix::Dashboard).chain(api::Kind::ALL.into_iter().map(Mix::Only));
    for mix in mixes {
        progress.step(&format!("P4 CPU cost of {mix:?} at {COST_RATE} req/s"));
        let cost = cpu_cost::measure(
            deploy,
            &ids,
            template,
            mix,
            COST_RATE,
            sizes.capacity_window,
        )
        .await?;
        run.costs.push((mix, cost));
    }

    progress.step("P4b: starting a second coder server on the same database for the ladder");
    run.steps = capacity(sizes, deploy, &ids, template, progress).await?;

    // P5
    let total = seed_up_to(deploy, source, sizes.list_workspaces, "list-").await?;
    progress.step(&format!("P5 listing all {total} workspaces"));
    for r in 0..warmups + sizes.runs {
        let listed = list::run(deploy, total).await?;
        if r >= warmups {
            run.p5.push(listed.elapsed.as_secs_f64());
            run.p5_bytes = listed.bytes;
        }
    }
    run.listed = total;
    report.counts.insert("p5_listed".into(), total);

    run.p12 = measure_insights(sizes, deploy, template, report, progress).await?;
    Ok(run)
}

/// P12: seeds the usage, then times each insights route.
async fn measure_insights(
    sizes: &Sizes,
    deploy: &Deployment,
    template: Uuid,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<Vec<(&'static str, Percentiles)>> {
    progress.step(&format!(
        "P12 insights: seeding {} users with {} days of usage",
        sizes.insights_users,
        insights::DAYS
    ));
    let hourly = insights::seed(&deploy.pool, template, sizes.insights_users).await?;
    report
        .counts
        .insert("p12_hourly_rows".into(), usize::try_from(hourly)?);
    let mut measured = Vec::new();
    for (label, path) in insights::routes(template) {
        progress.step(&format!("P12 {label}"));
        let samples = insights::time(deploy, &path, 2, sizes.insights_requests).await?;
        measured.push((
            label,
            Percentiles::of(&samples).context("P12 measured no request")?,
        ));
    }
    Ok(measured)
}

/// P12 and P13 alone: the template's build history, its workspaces cloned up to P5's count,
/// then the insights over them and a watched workspace's builds.
pub(super) async fn insights_only(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    progress.step(&format!(
        "insights: starting PostgreSQL (fsync on) in {}",
        work.display()
    ));
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        let deploy = super::echo_deployment(config, &cluster, work, report).await?;
        let (_, tpl) = deploy
            .template("bench-echo", &build_template()?, &[], true)
            .await?;
        let tpl = tpl.context("the build template was not created")?;
        let mut cycling = super::cycling(&deploy, tpl.id, sizes.build_workspaces).await?;
        builds::run(&deploy, &mut cycling, sizes.build_window).await?;
        deploy.quiesce().await?;
        let running = cycling.iter().find(|w| w.running).unwrap_or(&cycling[0]);
        let source = Source::of(&deploy.pool, running.id).await?;
        let total = seed_up_to(&deploy, source, sizes.list_workspaces, "list-").await?;
        report.counts.insert("p12_workspaces".into(), total);
        let p12 = measure_insights(sizes, &deploy, tpl.id, report, progress).await;
        progress.step(&format!(
            "P13 watch-ws: {} builds of a running workspace",
            sizes.insights_requests
        ));
        let p13 = match p12 {
            Ok(_) => watch::run(&deploy, running.id, sizes.insights_requests, deploy.timeout).await,
            Err(_) => Ok(Vec::new()),
        };
        deploy.stop().await?;
        Ok::<_, anyhow::Error>((p12?, p13?, total))
    }
    .await;
    let stopped = cluster.stop().await;
    let (p12, p13, total) = measured?;
    stopped?;
    insights_rows(report, sizes, &p12, total);
    let p13 = Percentiles::of(&p13).context("P13 measured no build")?;
    report.rows.push(
        Row::new(
            "P13",
            "watch-ws: build created → its event p95",
            "ms",
            &[p13.p95],
        )
        .goal("≤ 100 ms", Check::max(100.0))
        .note(format!(
            "p50 {:.1} ms; from sending the create request, so its round trip counts; \
                 {total} workspaces",
            p13.p50
        )),
    );
    Ok(())
}

fn insights_rows(
    report: &mut Report,
    sizes: &Sizes,
    p12: &[(&'static str, Percentiles)],
    workspaces: usize,
) {
    for (label, p) in p12 {
        report.rows.push(
            Row::new("P12", &format!("insights: {label} p95"), "ms", &[p.p95])
                .goal("≤ 100 ms", Check::max(100.0))
                .note(format!(
                    "p50 {:.1} ms; {} users × {} days of usage, {workspaces} workspaces",
                    p.p50,
                    sizes.insights_users,
                    insights::DAYS,
                )),
        );
    }
}

/// P4b: the mix stepped up until a step fails.
///
/// The ladder is meant to end in overload, and an overloaded coderd keeps the heap its backlog
/// grew (an RSS of 448 MiB after one 1,400 req/s step): every row measured after it
/// on the same process would start from that state. So it runs on a second coderd on the same
/// database (a replica, as a deployment with two would have), stopped once the ladder ends;
/// the database's rows are the same 2,000 workspaces P4 read.
async fn capacity(
    sizes: &Sizes,
    deploy: &Deployment,
    ids: &[Uuid],
    template: Uuid,
    progress: &Progress,
) -> anyhow::Result<Vec<Step>> {
    let (server, owner) = deploy.replica("p4b").await?;
    let steps = async {
        if sizes.warmup {
            api::run(
                &owner,
                ids,
                template,
                Mix::Dashboard,
                sizes.api_rate,
                Duration::from_secs(1),
            )
            .await?;
        }
        let mut steps = Vec::new();
        // A step's overload must not spill into the next, so each one starts after the server
        // has drained.
        for &rate in &sizes.capacity_rates {
            progress.step(&format!(
                "P4b the same mix at {rate} req/s for {:.0} s",
                sizes.capacity_window.as_secs_f64()
            ));
            let measured = api::run(
                &owner,
                ids,
                template,
                Mix::Dashboard,
                rate,
                sizes.capacity_window,
            )
            .await?;
            let all: Vec<Duration> = measured.samples.iter().map(|(_, d)| *d).collect();
            let step = Step {
                rate,
                offered: measured.offered,
                p95: Percentiles::of(&all).map_or(f64::INFINITY, |p| p.p95),
                errors: measured.errors,
            };
            let passed = step.passed();
            steps.push(step);
            if !passed {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        anyhow::Ok(steps)
    }
    .await;
    server
        .stop(Duration::from_secs(10))
        .await
        .context("stopping the ladder's coder server")?;
    steps
}

/// The P4, P4b, P5 and P12 rows.
pub(super) fn rows(report: &mut Report, sizes: &Sizes, run: &ReadsRun) {
    insights_rows(report, sizes, &run.p12, run.listed);
    let p4 = |f: fn(&Percentiles) -> f64| -> Vec<f64> { run.p4.iter().map(f).collect() };
    report.rows.push(
        Row::new("P4", "API reads p50", "ms", &p4(|p| p.p50)).note(format!(
            "{} req/s open loop, {} workspaces",
            sizes.api_rate, sizes.api_workspaces
        )),
    );
    report.rows.push(
        Row::new("P4", "API reads p95", "ms", &p4(|p| p.p95))
            .goal("≤ 30 ms", Check::max(CAPACITY_P95_MS)),
    );
    report
        .rows
        .push(Row::new("P4", "API reads p99", "ms", &p4(|p| p.p99)));
    for (k, kind) in api::Kind::ALL.iter().enumerate() {
        report.rows.push(Row::new(
            "P4",
            &format!("{} p95", kind.label()),
            "ms",
            &run.p4_kinds[k].iter().map(|p| p.p95).collect::<Vec<_>>(),
        ));
    }
    report.rows.push(
        Row::new("P4", "failed requests", "", &[run.p4_errors as f64])
            .goal("none", Check::max(0.0)),
    );
    report.rows.push(Row::new(
        "P4",
        "offered rate (schedule fidelity)",
        "req/s",
        &run.p4_offered,
    ));
    for (mix, cost) in &run.costs {
        let label = match mix {
            Mix::Dashboard => "the P4 mix".to_string(),
            Mix::Only(kind) => kind.label().to_string(),
        };
        let mut note = format!(
            "coderd {:.0} µs + PostgreSQL {:.0} µs, {COST_RATE} req/s",
            cost.coderd_us, cost.postgres_us
        );
        if *mix == Mix::Dashboard {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            note.push_str(&format!(
                "; {cores} cores fully used would serve {:.0} req/s",
                cores as f64 * 1e6 / cost.total_us()
            ));
        }
        report.rows.push(
            Row::new(
                "P4b",
                &format!("CPU per request: {label}"),
                "µs",
                &[cost.total_us()],
            )
            .note(note),
        );
    }
    let capacity = run
        .steps
        .iter()
        .take_while(|s| s.passed())
        .last()
        .map_or(0.0, |s| s.rate);
    let ladder: Vec<String> = run
        .steps
        .iter()
        .map(|s| {
            let failed = if s.errors > 0 {
                format!(", {} failed", s.errors)
            } else {
                String::new()
            };
            format!(
                "{:.0}/s (sent {:.0}/s): p95 {:.1} ms{failed}",
                s.rate, s.offered, s.p95
            )
        })
        .collect();
    report.rows.push(
        Row::new(
            "P4b",
            "capacity: highest rate of the P4 mix with p95 ≤ 30 ms",
            "req/s",
            &[capacity],
        )
        .goal("≥ 1,000 req/s", Check::min(1000.0))
        .note(format!(
            "{} workspaces, {:.0} s per step, on a second coderd of the same database \
             (stopped after the ladder); {}",
            sizes.api_workspaces,
            sizes.capacity_window.as_secs_f64(),
            ladder.join("; ")
        )),
    );
    report.rows.push(
        Row::new(
            "P5",
            &format!("list all {} workspaces", run.listed),
            "s",
            &run.p5,
        )
        .goal("≤ 0.5 s", Check::max(0.5))
        .note(format!(
            "{:.1} MiB of JSON",
            run.p5_bytes as f64 / 1048576.0
        )),
    );
}

/// `--only reads`: P4, P4b and P5 on their own server.
pub(super) async fn only(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        progress.step("reads: starting coder server and the provisioner daemons");
        let deploy = super::echo_deployment(config, &cluster, work, report).await?;
        let (_, tpl) = deploy
            .template("bench-echo", &build_template()?, &[], true)
            .await?;
        let tpl = tpl.context("the build template was not created")?;
        let mut cycling = super::cycling(&deploy, tpl.id, sizes.build_workspaces).await?;
        progress.step(&format!(
            "reads: a {:.0} s closed-loop build window for the template's history",
            sizes.build_window.as_secs_f64()
        ));
        let history = builds::run(&deploy, &mut cycling, sizes.build_window).await?;
        report
            .counts
            .insert("history_builds".into(), history.completed);
        deploy.quiesce().await?;
        let running = cycling.iter().find(|w| w.running).unwrap_or(&cycling[0]);
        let source = Source::of(&deploy.pool, running.id).await?;
        let run = measure(sizes, &deploy, source, tpl.id, report, progress).await;
        deploy.stop().await?;
        run
    }
    .await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    rows(report, sizes, &run);
    Ok(())
}
