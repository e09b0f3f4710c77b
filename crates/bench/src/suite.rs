//! The order of the run and the rows it reports. Scenarios run one after another on one
//! deployment, in an order that keeps each one's conditions what its goal says: builds before
//! the bulk seeding (P6 reads memory after real builds only), P3 right after P2, the read
//! scenarios on exactly 2,000 and then 10,000 workspaces, and the bare-job drains (which add
//! workspaces) last.
//!
//! P7 (terraform overhead) and P8 (simulated agents) run last on the same deployment: P7 adds a
//! terraform daemon only for its own builds, and P8 samples coderd's memory itself, since its
//! peak (VmHWM) already holds the P5 listings by then.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use provisionerd::engines::echo::EchoTemplate;

use crate::conditions::Conditions;
use crate::config::Config;
use crate::deploy::{Deployment, build_template};
use crate::graphile::{self, GraphileResults};
use crate::procs::{Cluster, open_dir};
use crate::report::{Check, Report, Row};
use crate::scenarios::{
    Cycling, agentbin, bare, builds, ceiling, pickup, startup, terraform, uploads,
};
use crate::seed::{self, Source};
use crate::stats::Percentiles;
use apps::app_rows;
use dashboard::dashboard_rows;
use relay::relay_rows;

mod apps;
mod create;
mod dashboard;
mod fleets;
mod reads;
mod relay;

/// Progress on stderr (stdout is for the table).
struct Progress(Instant);

impl Progress {
    fn step(&self, what: &str) {
        eprintln!(
            "[coder-bench {:>6.1}s] {what}",
            self.0.elapsed().as_secs_f64()
        );
    }
}

pub async fn run(config: &Config) -> anyhow::Result<Report> {
    let progress = Progress(Instant::now());
    let sizes = &config.sizes;
    anyhow::ensure!(
        config.coder_bin.is_file(),
        "the coder binary {} does not exist; build it first (`cargo build --release -p cli`) \
         or pass --coder-bin",
        config.coder_bin.display()
    );
    // Each simulated agent is a socket here and one in `coder server` (which inherits this
    // limit), on top of the pools, daemons and load clients.
    let fleet = sizes.agents.max(sizes.large_fleet);
    let want = 4096 + 2 * fleet as u64;
    let nofile = crate::procs::raise_nofile(want)?;
    anyhow::ensure!(
        nofile >= fleet as u64 + 1024,
        "the open-files limit is {nofile}, too low for {fleet} simulated agents (raise `ulimit -n`)"
    );
    let temp;
    let work = match &config.work_dir {
        Some(dir) => open_dir(dir)?,
        None => {
            temp = tempfile::Builder::new()
                .prefix("coder-bench-")
                .tempdir_in("/tmp")?;
            open_dir(temp.path())?
        }
    };
    let mut report = Report {
        conditions: Conditions::of_machine(&config.profile, &config.coder_bin, sizes.daemons),
        rows: Vec::new(),
        notes: Vec::new(),
        counts: BTreeMap::new(),
    };
    progress.step(&format!(
        "starting PostgreSQL (fsync on) in {}",
        work.display()
    ));
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = control_plane(config, &cluster, &work, &mut report, &progress, Scope::All).await;
    let stopped = cluster.stop().await;
    measured?;
    stopped?;

    progress.step("coder server start-up on an existing embedded cluster");
    let (runs, download) = startup::run(
        &config.coder_bin,
        &work.join("startup"),
        sizes.startup_runs,
        sizes.timeout,
    )
    .await
    .context("measuring start-up")?;
    let ready: Vec<f64> = runs.iter().map(|r| r.ready.as_secs_f64()).collect();
    let rss: Vec<f64> = runs.iter().map(|r| r.idle.rss_mib).collect();
    report.rows.push(
        Row::new(
            "-",
            "coder server start → /healthz, existing embedded cluster",
            "s",
            &ready,
        )
        .note("issue 2; includes starting PostgreSQL"),
    );
    report.rows.push(
        Row::new(
            "-",
            "coder server idle RSS, embedded cluster, defaults",
            "MiB",
            &rss,
        )
        .note("3 built-in daemons; PostgreSQL's own processes not included"),
    );
    report.counts.insert("startup_runs".into(), runs.len());
    agent_download_rows(&download, &mut report);
    create::create_rows(config, &work, &mut report, &progress).await?;
    upload_rows(config, &work, &mut report, &progress).await?;
    relay_rows(config, &work, &mut report, &progress).await?;
    app_rows(config, &work, &mut report, &progress).await?;
    dashboard_rows(config, &work, &mut report, &progress).await?;
    progress.step("done");
    Ok(report)
}

fn agent_download_rows(download: &agentbin::AgentDownload, report: &mut Report) {
    const MB: f64 = 1e6;
    report.rows.push(
        Row::new(
            "P11b",
            "bytes a workspace downloads to start its agent, first start",
            "MB",
            &[download.first_start_bytes as f64 / MB],
        )
        .goal("≤ 15 MB", Check::max(15.0))
        .note(format!(
            "{} of a {:.1} MB binary in {:.2} s, loopback",
            download.encoding,
            download.binary_bytes as f64 / MB,
            download.first_start.as_secs_f64()
        )),
    );
    report.rows.push(
        Row::new(
            "P11b",
            "bytes a workspace downloads to start its agent, binary kept from a start before",
            "MB",
            &[download.next_start_bytes as f64 / MB],
        )
        .note("304 Not Modified: the init script's cached binary has the served hash"),
    );
    report.rows.push(
        Row::new(
            "-",
            "CLI download by an IDE holding the current binary (If-None-Match: its SHA-1)",
            "bytes",
            &[download.ide_cached_bytes as f64],
        )
        .goal("a 304 with no body", Check::max(0.0)),
    );
    report.rows.push(
        Row::new(
            "-",
            "CLI download, JetBrains plugin (Accept-Encoding: gzip)",
            "MB",
            &[download.gzip_bytes as f64 / MB],
        )
        .note("gzip level 3 on the fly; the full binary (no slim client build yet)"),
    );
    report.rows.push(
        Row::new(
            "-",
            "CLI download, VS Code extension (Accept-Encoding: identity)",
            "MB",
            &[download.identity_bytes as f64 / MB],
        )
        .note("uncompressed, as the extension asks; the full binary"),
    );
}

/// A scenario that can run alone (`coder-bench --only <scenario>`), on its own server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// Sequential large template imports and coderd's memory after them (issue 11).
    Uploads,
    /// The relay against direct baselines: P9, P10, keystrokes, connect time, memory per
    /// idle stream (issue 12).
    Relay,
    /// The workspace-app proxy against the same app server reached directly: added latency,
    /// requests/s, download throughput (issue 13).
    Apps,
    /// P11c: claiming a prebuilt workspace, from the request to a ready agent (issue 18).
    Prebuilds,
    /// P4, P4b and P5: the API's read mix at a fixed rate, its capacity, and listing every
    /// workspace (issue 15).
    Reads,
    /// P8b: the large fleet of simulated agents on one coderd (issue 15).
    Agents,
    /// P11: `coder create --wait` of the local-process template to a ready agent, with where
    /// the time goes (issue 15).
    Create,
    /// The dashboard on 10,000 workspaces: list and workspace pages server side and in
    /// Chromium, build events on the live socket, idle live sockets' memory (issue 14).
    Dashboard,
    /// The job path: P1, P2, P2b with the SQL ceiling and the graphile-worker baseline, on
    /// their own server and cluster (issue 15).
    Jobs,
    /// P12 and P13: the insights routes over 90 days of usage beside P5's workspaces, and
    /// watch-ws events of a workspace's builds (issue 34).
    Insights,
}

/// Only one scenario; its rows alone.
pub async fn run_only(config: &Config, only: Only) -> anyhow::Result<Report> {
    let progress = Progress(Instant::now());
    let temp = tempfile::Builder::new()
        .prefix("coder-bench-")
        .tempdir_in("/tmp")?;
    let work = match &config.work_dir {
        Some(dir) => open_dir(dir)?,
        None => open_dir(temp.path())?,
    };
    let daemons = if matches!(only, Only::Reads | Only::Jobs | Only::Insights) {
        config.sizes.daemons
    } else {
        1
    };
    let mut report = Report {
        conditions: Conditions::of_machine(&config.profile, &config.coder_bin, daemons),
        rows: Vec::new(),
        notes: Vec::new(),
        counts: BTreeMap::new(),
    };
    match only {
        Only::Uploads => upload_rows(config, &work, &mut report, &progress).await?,
        Only::Relay => relay_rows(config, &work, &mut report, &progress).await?,
        Only::Apps => app_rows(config, &work, &mut report, &progress).await?,
        Only::Prebuilds => prebuild_rows(config, &work, &mut report, &progress).await?,
        Only::Reads => reads::only(config, &work, &mut report, &progress).await?,
        Only::Insights => reads::insights_only(config, &work, &mut report, &progress).await?,
        Only::Agents => fleets::only(config, &work, &mut report, &progress).await?,
        Only::Create => create::create_rows(config, &work, &mut report, &progress).await?,
        Only::Dashboard => dashboard_rows(config, &work, &mut report, &progress).await?,
        Only::Jobs => {
            progress.step(&format!(
                "starting PostgreSQL (fsync on) in {}",
                work.display()
            ));
            let cluster = Cluster::start(&work.join("pg")).await?;
            let measured =
                control_plane(config, &cluster, &work, &mut report, &progress, Scope::Jobs).await;
            let stopped = cluster.stop().await;
            measured?;
            stopped?;
        }
    }
    progress.step("done");
    Ok(report)
}

async fn prebuild_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let claims = sizes.runs.max(2);
    let times = crate::scenarios::prebuilds::run(
        &config.coder_bin,
        &work.join("prebuilds"),
        claims,
        sizes.timeout,
        &|what| progress.step(what),
    )
    .await
    .context("measuring prebuild claims")?;
    let ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1000.0).collect();
    report.rows.push(
        Row::new(
            "P11c",
            "create with a preset → claimed prebuild's agent ready",
            "ms",
            &ms,
        )
        .goal("≤ 300 ms p50", Check::max(300.0))
        .note(format!(
            "issue 18; {claims} claims, each of a fresh prebuild with a running coder agent; \
             the claim build (echo) and the agent's re-authentication included"
        )),
    );
    report.counts.insert("prebuild_claims".into(), times.len());
    Ok(())
}

async fn upload_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let mib = sizes.upload_bytes as f64 / 1048576.0;
    progress.step(&format!(
        "{} sequential template imports of {mib:.0} MiB",
        sizes.upload_imports
    ));
    let run = uploads::run(
        &config.coder_bin,
        &work.join("uploads"),
        sizes.upload_imports,
        sizes.upload_bytes,
        sizes.timeout,
    )
    .await
    .context("measuring large template imports")?;
    report.rows.push(
        Row::new(
            "-",
            &format!(
                "coderd RSS after {} sequential {mib:.0} MiB template imports",
                run.imports
            ),
            "MiB",
            &[run.after.rss_mib],
        )
        .baseline("idle RSS", Ok(&[run.idle.rss_mib]))
        .goal("< 200 MiB", Check::max(200.0))
        .note(format!(
            "issue 11; peak {:.1} MiB; {:.1} s; own server, 1 echo daemon",
            run.after.hwm_mib,
            run.elapsed.as_secs_f64()
        )),
    );
    report.counts.insert("upload_imports".into(), run.imports);
    report
        .counts
        .insert("upload_archive_bytes".into(), run.archive_bytes);
    Ok(())
}

/// A percentile's label and how to read it.
type Pick = (&'static str, fn(&Percentiles) -> f64);

fn percentile_rows(report: &mut Report, id: &str, what: &str, runs: &[Percentiles], pick: &[Pick]) {
    for (label, f) in pick {
        let values: Vec<f64> = runs.iter().map(f).collect();
        report
            .rows
            .push(Row::new(id, &format!("{what} {label}"), "ms", &values));
    }
}

/// `coder server` on `cluster` with the suite's external echo daemons.
async fn echo_deployment(
    config: &Config,
    cluster: &Cluster,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<Deployment> {
    let sizes = &config.sizes;
    let mut deploy = Deployment::start(
        &config.coder_bin,
        cluster,
        &work.join("server"),
        sizes.timeout,
    )
    .await?;
    report.conditions.with_database(&deploy.pool).await?;
    deploy
        .start_daemons(&config.coder_bin, sizes.daemons)
        .await?;
    Ok(deploy)
}

/// `count` started workspaces of `template`, created through the API, for the build scenarios
/// to cycle between start and stop.
async fn cycling(
    deploy: &Deployment,
    template: uuid::Uuid,
    count: usize,
) -> anyhow::Result<Vec<Cycling>> {
    Ok(deploy
        .workspaces(template, "w", count)
        .await?
        .iter()
        .map(|w| Cycling {
            id: w.id,
            last_job: w.latest_build.job.id,
            running: true,
        })
        .collect())
}

/// What [`control_plane`] measures: everything, or only the job path (P1, P2, P2b and their
/// baselines), which skips the scenarios that need the bulk seeding or other daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    All,
    Jobs,
}

async fn control_plane(
    config: &Config,
    cluster: &Cluster,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
    scope: Scope,
) -> anyhow::Result<()> {
    let all = scope == Scope::All;
    let sizes = &config.sizes;
    let warmups = usize::from(sizes.warmup);
    progress.step("starting coder server and the provisioner daemons");
    let deploy = echo_deployment(config, cluster, work, report).await?;
    let (_, build_tpl) = deploy
        .template("bench-echo", &build_template()?, &[], true)
        .await?;
    let build_tpl = build_tpl.context("the build template was not created")?;
    let (_, bare_tpl) = deploy
        .template("bench-bare", &EchoTemplate::default(), &[], true)
        .await?;
    let bare_tpl = bare_tpl.context("the bare template was not created")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = deploy.server.memory()?;

    progress.step(&format!(
        "creating {} workspaces through the API",
        sizes.build_workspaces
    ));
    let mut cycling = cycling(&deploy, build_tpl.id, sizes.build_workspaces).await?;
    let bare_ws = deploy.workspaces(bare_tpl.id, "bare-source", 1).await?;
    let bare_source = Source::of(&deploy.pool, bare_ws[0].id).await?;

    // P1
    progress.step("P1 pickup latency");
    let mut pickups = Vec::new();
    let mut claims = Vec::new();
    for run in 0..warmups + sizes.runs {
        let jobs = if run < warmups {
            (sizes.pickup_jobs / 5).max(5)
        } else {
            sizes.pickup_jobs
        };
        let measured = pickup::run(&deploy, &mut cycling, jobs, sizes.pickup_rate).await?;
        if run >= warmups {
            *report.counts.entry("p1_jobs".into()).or_default() += measured.pickup.len();
            pickups.push(Percentiles::of(&measured.pickup).context("P1 measured no job")?);
            claims.push(Percentiles::of(&measured.claim).context("P1 measured no job")?);
        }
    }

    // P2
    progress.step("P2 echo builds, closed loop");
    if sizes.warmup {
        builds::run(&deploy, &mut cycling, Duration::from_secs(3)).await?;
    }
    let mut p2 = Vec::new();
    let mut p2_latency = Vec::new();
    for _ in 0..sizes.runs {
        let run = builds::run(&deploy, &mut cycling, sizes.build_window).await?;
        *report.counts.entry("p2_builds".into()).or_default() += run.completed;
        p2.push(run.per_second);
        p2_latency.push(Percentiles::of(&run.latencies).context("P2 completed no build")?);
    }

    // P6, after real builds only.
    let builds_done: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM provisioner_jobs WHERE type = 'workspace_build' AND completed_at IS NOT NULL",
    )
    .fetch_one(&deploy.pool)
    .await?;
    let after_builds = deploy.server.memory()?;

    // P3, P4, P4b, P5
    let mut p3 = Vec::new();
    let reads_run = if all {
        p3 = poisoned_builds(sizes, &deploy, &mut cycling, report, progress).await?;
        // A started workspace (resource, agent, app), as most listed workspaces are.
        let running = cycling.iter().find(|w| w.running).unwrap_or(&cycling[0]);
        let source = Source::of(&deploy.pool, running.id).await?;
        Some(reads::measure(sizes, &deploy, source, build_tpl.id, report, progress).await?)
    } else {
        None
    };

    // P2b and the baselines.
    progress.step("P2b bare jobs through the daemons");
    if sizes.warmup {
        bare::run(&deploy, bare_source, (sizes.bare_jobs / 5).max(10), "bw-").await?;
    }
    let mut p2b = Vec::new();
    for r in 0..sizes.runs {
        let run = bare::run(&deploy, bare_source, sizes.bare_jobs, &format!("b{r}-")).await?;
        *report.counts.entry("p2b_jobs".into()).or_default() += run.jobs;
        p2b.push(run.per_second);
    }
    progress.step("baseline: the SQL ceiling (acquire + complete, same concurrency)");
    let bare_result = ceiling::BareResult::of(&deploy.pool, bare_source).await?;
    let mut sql = Vec::new();
    for r in 0..warmups + sizes.runs {
        let run = ceiling::run(
            &deploy,
            bare_source,
            &bare_result,
            sizes.bare_jobs,
            sizes.daemons,
            &format!("c{r}-"),
        )
        .await?;
        if r >= warmups {
            *report.counts.entry("ceiling_jobs".into()).or_default() += run.jobs;
            sql.push(run.per_second);
        }
    }
    progress.step("baseline: graphile-worker (npm install, then latency and drain)");
    let graphile = if !config.graphile {
        Err("disabled (--no-graphile)".to_string())
    } else {
        graphile::run(
            &graphile::Plan {
                version: config.graphile_version.clone(),
                concurrency: sizes.daemons,
                rate: sizes.pickup_rate,
                latency_jobs: sizes.pickup_jobs,
                drain_jobs: sizes.bare_jobs,
                runs: sizes.runs,
                warmup: sizes.warmup,
                timeout: sizes.timeout,
            },
            cluster,
            &work.join("graphile"),
        )
        .await
    };
    let end = deploy.server.memory()?;

    if all {
        // P7
        match terraform::on_path() {
            Some(binary) => {
                progress.step(&format!(
                    "P7 {} terraform builds, one at a time",
                    sizes.terraform_builds
                ));
                let daemon = deploy.terraform_daemon(&config.coder_bin).await?;
                let run = terraform::run(&deploy, sizes.terraform_builds).await;
                daemon.stop(Duration::from_secs(10)).await?;
                terraform_rows(report, &run?, &binary);
            }
            None => {
                progress.step("P7 skipped: terraform is not on PATH");
                let mut row = Row::not_measured(
                    "P7",
                    "terraform build overhead beyond terraform's own time",
                    "",
                );
                row.note =
                    "skipped: terraform is not on PATH (install terraform ≥ 1.5 to measure)".into();
                report.rows.push(row);
            }
        }

        // P8, then P8b on the same deployment (its fleet includes P8's agents).
        let p8 = fleets::measure(&deploy, "P8", sizes.agents, sizes.agent_window, progress).await?;
        fleets::rows(report, "P8", &p8);
        let p8b = fleets::measure(
            &deploy,
            "P8b",
            sizes.large_fleet,
            sizes.agent_window,
            progress,
        )
        .await?;
        fleets::rows(report, "P8b", &p8b);
    }
    deploy.stop().await?;

    // Rows.
    let gw_latency: Result<Vec<Percentiles>, String> = graphile
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|g: &GraphileResults| {
            g.latency_ms
                .iter()
                .map(|run| {
                    let samples: Vec<Duration> = run
                        .iter()
                        .map(|m| Duration::from_secs_f64(m.max(0.0) / 1e3))
                        .collect();
                    Percentiles::of(&samples).ok_or_else(|| "a latency run had no jobs".to_string())
                })
                .collect()
        });
    let gw = |f: fn(&Percentiles) -> f64| -> Result<Vec<f64>, String> {
        gw_latency
            .as_ref()
            .map(|runs| runs.iter().map(f).collect())
            .map_err(Clone::clone)
    };
    if let Ok(g) = &graphile {
        report.counts.insert(
            "graphile_latency_jobs".into(),
            g.latency_ms.iter().map(Vec::len).sum(),
        );
        report
            .counts
            .insert("graphile_drain_runs".into(), g.drain_jobs_per_s.len());
        report.notes.push(format!(
            "graphile-worker {} in its default (unbatched) mode, concurrency {}, same database; \
             its latency is add() call → task start inside one Node process",
            g.version, sizes.daemons
        ));
    }
    let gw_name = "graphile-worker add→start";
    let p1 = |f: fn(&Percentiles) -> f64| -> Vec<f64> { pickups.iter().map(f).collect() };
    let note = format!(
        "{} jobs/run at {}/s, {} daemons",
        sizes.pickup_jobs, sizes.pickup_rate, sizes.daemons
    );
    report.rows.push(
        Row::new(
            "P1",
            "pickup p50 (created → daemon starts it)",
            "ms",
            &p1(|p| p.p50),
        )
        .baseline(
            &format!("{gw_name} p50"),
            gw(|p| p.p50).as_deref().map_err(String::as_str),
        )
        .goal(
            "≤ 3 ms and ≤ 1.0× graphile-worker",
            Check::max(3.0).and_ratio_max(1.0),
        )
        .note(note),
    );
    report
        .rows
        .push(Row::new("P1", "pickup p90", "ms", &p1(|p| p.p90)).baseline(
            &format!("{gw_name} p90"),
            gw(|p| p.p90).as_deref().map_err(String::as_str),
        ));
    report.rows.push(
        Row::new("P1", "pickup p99", "ms", &p1(|p| p.p99))
            .baseline(
                &format!("{gw_name} p99"),
                gw(|p| p.p99).as_deref().map_err(String::as_str),
            )
            .goal(
                "≤ 10 ms and ≤ 1.0× graphile-worker",
                Check::max(10.0).and_ratio_max(1.0),
            ),
    );
    report
        .rows
        .push(Row::new("P1", "pickup max", "ms", &p1(|p| p.max)).baseline(
            &format!("{gw_name} max"),
            gw(|p| p.max).as_deref().map_err(String::as_str),
        ));
    percentile_rows(
        report,
        "P1",
        "claim (created → acquire statement)",
        &claims,
        &[("p50", |p| p.p50), ("p99", |p| p.p99)],
    );
    report.rows.push(
        Row::new(
            "P2",
            &format!("echo builds end to end, {} daemons", sizes.daemons),
            "builds/s",
            &p2,
        )
        .goal("≥ 500 builds/s", Check::min(500.0))
        .note(format!(
            "{} s × {} runs, {} workspaces cycling start/stop",
            sizes.build_window.as_secs_f64(),
            sizes.runs,
            sizes.build_workspaces
        )),
    );
    percentile_rows(
        report,
        "P2",
        "build latency (API create → completion committed)",
        &p2_latency,
        &[("p50", |p| p.p50), ("p99", |p| p.p99)],
    );
    if all {
        report.rows.push(
            Row::new("P3", "echo builds with poisoned queue", "builds/s", &p3)
                .baseline("P2 (same run)", Ok(&p2))
                .goal("≥ 0.5× P2 (falls ≤ 2×)", Check::ratio_min(0.5))
                .note(format!(
                    "{} pending jobs no daemon matches",
                    sizes.poison_jobs
                )),
        );
    }
    let gw_drain: Result<&[f64], &str> = graphile
        .as_ref()
        .map(|g| g.drain_jobs_per_s.as_slice())
        .map_err(String::as_str);
    report.rows.push(
        Row::new(
            "P2b",
            &format!("bare jobs drained through {} daemons", sizes.daemons),
            "jobs/s",
            &p2b,
        )
        .baseline("graphile-worker drain", gw_drain)
        .goal("≥ 1.0× graphile-worker", Check::ratio_min(1.0))
        .note(format!("{} queued jobs per run", sizes.bare_jobs)),
    );
    report.rows.push(
        Row::new("P2b", "bare jobs vs the raw SQL ceiling", "jobs/s", &p2b)
            .baseline("Store::complete_job_and_claim", Ok(&sql))
            .note(format!(
                "same jobs, {} concurrent SQL workers",
                sizes.daemons
            )),
    );
    let Some(reads_run) = reads_run else {
        return Ok(());
    };
    reads::rows(report, sizes, &reads_run);
    report.rows.push(
        Row::new("P6", "coderd RSS idle", "MiB", &[idle.rss_mib])
            .goal("≤ 30 MB", Check::max(30.0 * 1e6 / 1048576.0))
            .note(format!(
                "server up, {} daemons connected, templates imported",
                sizes.daemons
            )),
    );
    // What the idle figure is made of: the process's own memory, and the executable's pages the
    // kernel mapped (each page fault in code maps up to 16 cached pages around it).
    report.rows.push(
        Row::new(
            "P6",
            "coderd RSS idle: anonymous (heap, stacks)",
            "MiB",
            &[idle.anon_mib],
        )
        .note(format!(
            "the rest, {:.1} MiB, is file-backed: clean pages of the executable",
            idle.file_mib
        )),
    );
    report.rows.push(
        Row::new(
            "P6",
            &format!("coderd RSS after {builds_done} builds"),
            "MiB",
            &[after_builds.rss_mib],
        )
        .baseline("idle RSS", Ok(&[idle.rss_mib]))
        .goal("≤ 2× idle", Check::ratio_max(2.0)),
    );
    report.rows.push(
        Row::new(
            "P6",
            "coderd peak RSS (VmHWM) after those builds",
            "MiB",
            &[after_builds.hwm_mib],
        )
        .baseline("idle RSS", Ok(&[idle.rss_mib])),
    );
    report.rows.push(
        Row::new(
            "-",
            "coderd RSS / peak at the end (after P4/P5 listings)",
            "MiB",
            &[end.rss_mib],
        )
        .note(format!("peak {:.1} MiB", end.hwm_mib)),
    );
    report
        .counts
        .insert("p6_builds".into(), builds_done as usize);
    Ok(())
}

/// P3: the P2 loop with a queue of jobs no daemon can take at its head (removed afterwards).
async fn poisoned_builds(
    sizes: &crate::config::Sizes,
    deploy: &Deployment,
    cycling: &mut [Cycling],
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<Vec<f64>> {
    progress.step(&format!(
        "P3 builds with {} pending jobs no daemon matches",
        sizes.poison_jobs
    ));
    let (poison_source, _) = deploy
        .template(
            "bench-poison",
            &EchoTemplate::default(),
            &[("coder-bench", "no-daemon-has-this-tag")],
            false,
        )
        .await?;
    seed::poison(
        &deploy.pool,
        poison_source,
        sizes.poison_jobs.saturating_sub(1),
    )
    .await?;
    if sizes.warmup {
        builds::run(deploy, cycling, Duration::from_secs(2)).await?;
    }
    let mut p3 = Vec::new();
    for _ in 0..sizes.runs {
        let run = builds::run(deploy, cycling, sizes.build_window).await?;
        *report.counts.entry("p3_builds".into()).or_default() += run.completed;
        p3.push(run.per_second);
    }
    let removed = seed::remove_poison(&deploy.pool, poison_source).await?;
    report
        .counts
        .insert("p3_poison_removed".into(), removed as usize);
    deploy.quiesce().await?;
    Ok(p3)
}

/// A share of a terraform build and how to read it.
type Part = (&'static str, fn(&terraform::Build) -> f64);

fn terraform_rows(report: &mut Report, run: &terraform::TerraformRun, binary: &Path) {
    let builds = &run.builds;
    let ms = |f: fn(&terraform::Build) -> f64| -> Vec<Duration> {
        builds
            .iter()
            .map(|b| Duration::from_secs_f64(f(b).max(0.0) / 1e3))
            .collect()
    };
    report.counts.insert("p7_builds".into(), builds.len());
    let Some(overhead) = Percentiles::of(&ms(terraform::Build::overhead)) else {
        report.rows.push(Row::not_measured(
            "P7",
            "terraform build overhead beyond terraform's own time",
            "no build was measured",
        ));
        return;
    };
    let version = std::process::Command::new(binary)
        .arg("version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "terraform (version unknown)".into());
    let commands = builds.iter().map(|b| b.commands).max().unwrap_or_default();
    report.rows.push(
        Row::new(
            "P7",
            "terraform build overhead (wall − terraform's own time) p50",
            "ms",
            &[overhead.p50],
        )
        .note(format!(
            "{} sequential start/stop builds, 1 daemon, {version}, ≤ {commands} terraform \
             commands per build",
            builds.len()
        )),
    );
    report.rows.push(
        Row::new("P7", "terraform build overhead p95", "ms", &[overhead.p95])
            .goal("≤ 200 ms p95", Check::max(200.0)),
    );
    report.rows.push(Row::new(
        "P7",
        "terraform build overhead max",
        "ms",
        &[overhead.max],
    ));
    let parts: [Part; 7] = [
        ("build wall time (API create → completion heard)", |b| {
            b.wall
        }),
        ("terraform's own time (sum of its commands)", |b| {
            b.terraform
        }),
        ("overhead: job queued (created → started)", |b| b.queued),
        ("overhead: daemon setup (started → first command)", |b| {
            b.before
        }),
        ("overhead: between terraform commands", |b| b.between),
        ("overhead: result (last command → completed)", |b| b.after),
        (
            "overhead: outside the job (API create, notification)",
            |b| b.outside(),
        ),
    ];
    for (what, f) in parts {
        if let Some(p) = Percentiles::of(&ms(f)) {
            report
                .rows
                .push(Row::new("P7", &format!("{what} p50"), "ms", &[p.p50]));
        }
    }
    report.notes.push(format!(
        "P7: template import (terraform init + plan, not measured) took {:.1} s",
        run.import.as_secs_f64()
    ));
}
