//! The simulated-agent fleets: P8 (2,000 agents) and P8b (10,000), on the suite's deployment
//! or alone (`--only agents`, P8b on its own server). A fleet is one workspace built through
//! the API from a template whose agent declares 2 metadata keys, cloned by seeding, each clone's
//! agent given a fresh token.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::Progress;
use crate::config::Config;
use crate::deploy::{Deployment, agent_template};
use crate::procs::Cluster;
use crate::report::{Check, Report, Row};
use crate::scenarios::agents;
use crate::seed::{self, Jobs, Source};
use crate::stats::Percentiles;

/// Seeds workspaces of the agent template until `count` agents exist (the template and its
/// first workspace are made on the first call), and returns a token for each of them.
pub(super) async fn fleet(deploy: &Deployment, count: usize) -> anyhow::Result<Vec<String>> {
    let existing: Option<uuid::Uuid> = sqlx::query_scalar(
        "SELECT w.id FROM workspaces w JOIN templates t ON t.id = w.template_id
         WHERE t.name = 'bench-agents' AND w.name = 'agents-source0'",
    )
    .fetch_optional(&deploy.pool)
    .await?;
    let source = match existing {
        Some(id) => id,
        None => {
            let (_, tpl) = deploy
                .template("bench-agents", &agent_template()?, &[], true)
                .await?;
            let tpl = tpl.context("the agent template was not created")?;
            deploy.workspaces(tpl.id, "agents-source", 1).await?[0].id
        }
    };
    let source = Source::of(&deploy.pool, source).await?;
    let have: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM workspaces w JOIN templates t ON t.id = w.template_id
         WHERE t.name = 'bench-agents' AND NOT w.deleted",
    )
    .fetch_one(&deploy.pool)
    .await?;
    seed::workspaces(
        &deploy.pool,
        source,
        count.saturating_sub(have as usize),
        &format!("agents-{have}-"),
        Jobs::Completed,
    )
    .await?;
    let jobs: Vec<uuid::Uuid> = sqlx::query_scalar(
        "SELECT b.job_id FROM workspace_builds b
         JOIN workspaces w ON w.id = b.workspace_id
         JOIN templates t ON t.id = w.template_id
         WHERE t.name = 'bench-agents' AND NOT w.deleted",
    )
    .fetch_all(&deploy.pool)
    .await?;
    let tokens = seed::agent_tokens(&deploy.pool, &jobs).await?;
    anyhow::ensure!(
        tokens.len() == count,
        "seeded {} agents, not {count}",
        tokens.len()
    );
    Ok(tokens)
}

/// Connects a fleet of `count` agents and measures its steady state.
pub(super) async fn measure(
    deploy: &Deployment,
    id: &str,
    count: usize,
    window: Duration,
    progress: &Progress,
) -> anyhow::Result<agents::AgentsRun> {
    progress.step(&format!(
        "{id} {count} simulated agents: seeding and connecting"
    ));
    let tokens = fleet(deploy, count).await?;
    agents::run(deploy, &tokens, window, &|what| {
        progress.step(&format!("{id} {what}"))
    })
    .await
}

/// `--only agents`: P8b on its own server, with one echo daemon for the fleet's first build.
pub(super) async fn only(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let want = 4096 + 2 * sizes.large_fleet as u64;
    let nofile = crate::procs::raise_nofile(want)?;
    anyhow::ensure!(
        nofile >= sizes.large_fleet as u64 + 1024,
        "the open-files limit is {nofile}, too low for {} simulated agents (raise `ulimit -n`)",
        sizes.large_fleet
    );
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = async {
        let mut deploy = Deployment::start(
            &config.coder_bin,
            &cluster,
            &work.join("server"),
            sizes.timeout,
        )
        .await?;
        report.conditions.with_database(&deploy.pool).await?;
        deploy.start_daemons(&config.coder_bin, 1).await?;
        let run = measure(
            &deploy,
            "P8b",
            sizes.large_fleet,
            sizes.agent_window,
            progress,
        )
        .await;
        deploy.stop().await?;
        run
    }
    .await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    rows(report, "P8b", &run);
    Ok(())
}

/// The rows of one fleet's run, under `id` (P8, P8b).
pub(super) fn rows(report: &mut Report, id: &str, run: &agents::AgentsRun) {
    let n = run.agents;
    let key = id.to_lowercase();
    report.counts.insert(format!("{key}_agents"), n);
    report
        .counts
        .insert(format!("{key}_calls"), run.calls.len());
    report.counts.insert(format!("{key}_errors"), run.errors);
    let window = run.window.as_secs_f64();
    report.rows.push(
        Row::new(
            id,
            &format!("{n} simulated agents: coderd CPU"),
            "vCPU",
            &[run.cpu],
        )
        .goal("≤ 1 vCPU", Check::max(1.0))
        .note(format!(
            "{window:.0} s steady state; per agent a 2-key metadata batch every {} s and stats \
             every {} s",
            agents::METADATA_EVERY.as_secs(),
            agents::STATS_EVERY.as_secs()
        )),
    );
    report.rows.push(
        Row::new(
            id,
            "coderd RSS peak during the window",
            "MiB",
            &[run.rss_peak],
        )
        .baseline("RSS before the agents connected", Ok(&[run.rss_before]))
        .goal("≤ 1 GiB", Check::max(1024.0))
        .note("sampled every 500 ms"),
    );
    report.rows.push(
        Row::new(
            id,
            "coderd RSS growth from connecting the agents to the window's peak",
            "MiB",
            &[run.rss_peak - run.rss_before],
        )
        .note(format!(
            "{:.1} KiB per agent",
            (run.rss_peak - run.rss_before) * 1024.0 / n.max(1) as f64
        )),
    );
    report.rows.push(Row::new(
        id,
        "coderd RSS at the window's end",
        "MiB",
        &[run.rss_end],
    ));
    let all: Vec<Duration> = run.calls.iter().map(|(_, d)| *d).collect();
    if let Some(p) = Percentiles::of(&all) {
        report
            .rows
            .push(Row::new(id, "agent API p50", "ms", &[p.p50]).note(format!(
                "{} calls in the window, timed by the agent",
                p.count
            )));
        report
            .rows
            .push(Row::new(id, "agent API p95", "ms", &[p.p95]).goal("≤ 50 ms", Check::max(50.0)));
        report
            .rows
            .push(Row::new(id, "agent API p99", "ms", &[p.p99]));
    } else {
        report.rows.push(
            Row::not_measured(id, "agent API p95", "no call was sent in the window")
                .goal("≤ 50 ms", Check::max(50.0)),
        );
    }
    for (call, what) in [
        (agents::Call::Metadata, "metadata batch p95"),
        (agents::Call::Stats, "stats report p95"),
    ] {
        let of: Vec<Duration> = run
            .calls
            .iter()
            .filter(|(c, _)| *c == call)
            .map(|(_, d)| *d)
            .collect();
        if let Some(p) = Percentiles::of(&of) {
            report.rows.push(Row::new(id, what, "ms", &[p.p95]));
        }
    }
    let expected = n as f64
        * (1.0 / agents::METADATA_EVERY.as_secs_f64() + 1.0 / agents::STATS_EVERY.as_secs_f64());
    report.rows.push(
        Row::new(
            id,
            "agent calls answered in the window",
            "calls/s",
            &[run.calls.len() as f64 / window],
        )
        .note(format!("scheduled {expected:.0}/s")),
    );
    report.rows.push(
        Row::new(
            id,
            "database transactions",
            "xacts/s",
            &[run.xacts_per_second],
        )
        .goal("≤ 100 xacts/s", Check::max(100.0)),
    );
    report.rows.push(
        Row::new(id, "failed agent calls", "", &[run.errors as f64]).goal("none", Check::max(0.0)),
    );
    if let Some(e) = &run.first_error {
        report.notes.push(format!(
            "{id}: {} failed agent calls, first: {e}",
            run.errors
        ));
    }
    report.rows.push(
        Row::new(
            id,
            "connect, manifest and `ready` for all agents",
            "s",
            &[run.connect.as_secs_f64()],
        )
        .note("ramp-up, 32 at a time; not part of the window"),
    );
}
