//! The honesty test: a tiny run of the whole suite against the real `coder` binary. It asserts
//! that everything ran and that the figures are sane (what was asked for was measured,
//! percentiles are ordered, rates and memory are positive, baselines are there or say why
//! not) — never how fast anything is.
//!
//! It needs the `coder` binary of the same build: `target/<profile>/coder`, which
//! `cargo test --workspace` / `cargo nextest run --workspace` build because the `cli` package
//! has integration tests; alone, run `cargo build -p cli --bin coder` first. Or point
//! `CODER_BENCH_CODER_BIN` at one.

mod dashboard;

use std::path::PathBuf;

use anyhow::{Context, ensure};
use bench::report::Row;
use bench::{Config, Report, Sizes, Verdict};

fn coder_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("CODER_BENCH_CODER_BIN") {
        return Ok(path.into());
    }
    // This test runs as target/<profile>/deps/it-<hash>.
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("unexpected test executable location")?;
    Ok(profile_dir.join("coder"))
}

fn row<'a>(report: &'a Report, id: &str, metric: &str) -> anyhow::Result<&'a Row> {
    report
        .rows
        .iter()
        .find(|r| r.id == id && r.metric.starts_with(metric))
        .with_context(|| format!("no row {id} {metric:?}"))
}

fn median(report: &Report, id: &str, metric: &str) -> anyhow::Result<f64> {
    Ok(row(report, id, metric)?
        .ours
        .with_context(|| format!("row {id} {metric:?} has no figure"))?
        .median)
}

fn count(report: &Report, key: &str) -> anyhow::Result<usize> {
    report
        .counts
        .get(key)
        .copied()
        .with_context(|| format!("no count {key:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tiny_run_completes_with_sane_figures() -> anyhow::Result<()> {
    let bin = coder_bin()?;
    ensure!(
        bin.is_file(),
        "{} is missing: build it with `cargo build -p cli --bin coder` (a workspace-wide \
         `cargo test`/`nextest` run builds it), or set CODER_BENCH_CODER_BIN",
        bin.display()
    );
    let sizes = Sizes::tiny();
    let report = bench::run(&Config::new("tiny", sizes.clone(), bin)).await?;
    println!("{}", report.table());

    // Everything that was asked for was measured.
    let runs = sizes.runs;
    assert_eq!(count(&report, "p1_jobs")?, runs * sizes.pickup_jobs);
    assert!(count(&report, "p2_builds")? > 0);
    assert!(count(&report, "p3_builds")? > 0);
    assert_eq!(count(&report, "p3_poison_removed")?, sizes.poison_jobs - 1);
    assert_eq!(count(&report, "p2b_jobs")?, runs * sizes.bare_jobs);
    assert_eq!(count(&report, "ceiling_jobs")?, runs * sizes.bare_jobs);
    assert_eq!(count(&report, "p4_workspaces")?, sizes.api_workspaces);
    let per_run = (sizes.api_rate * sizes.api_duration.as_secs_f64()).round() as usize;
    assert_eq!(count(&report, "p4_requests")?, runs * per_run);
    assert_eq!(count(&report, "p4_errors")?, 0);
    assert_eq!(count(&report, "p5_listed")?, sizes.list_workspaces);
    assert!(count(&report, "p6_builds")? >= count(&report, "p2_builds")?);
    assert_eq!(count(&report, "startup_runs")?, sizes.startup_runs);

    // Percentiles are ordered.
    let (p50, p90, p99, max) = (
        median(&report, "P1", "pickup p50")?,
        median(&report, "P1", "pickup p90")?,
        median(&report, "P1", "pickup p99")?,
        median(&report, "P1", "pickup max")?,
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max,
        "{p50} {p90} {p99} {max}"
    );
    let claim = median(&report, "P1", "claim (created → acquire statement) p50")?;
    assert!(
        claim <= p50,
        "the claim is part of the pickup: {claim} > {p50}"
    );
    let (a50, a95, a99) = (
        median(&report, "P4", "API reads p50")?,
        median(&report, "P4", "API reads p95")?,
        median(&report, "P4", "API reads p99")?,
    );
    assert!(0.0 < a50 && a50 <= a95 && a95 <= a99, "{a50} {a95} {a99}");

    // Rates, times and memory are positive.
    for (id, metric) in [
        ("P2", "echo builds end to end"),
        ("P3", "echo builds with poisoned queue"),
        ("P2b", "bare jobs drained"),
        ("P5", "list all"),
        ("P6", "coderd RSS idle"),
        ("P6", "coderd RSS after"),
        ("-", "coder server start"),
        ("-", "coder server idle RSS"),
    ] {
        assert!(median(&report, id, metric)? > 0.0, "{id} {metric}");
    }
    assert!(
        median(&report, "P6", "coderd peak RSS")? >= median(&report, "P6", "coderd RSS after")?
    );

    // Baselines are there, or say why not.
    let ceiling = row(&report, "P2b", "bare jobs vs the raw SQL ceiling")?;
    assert!(
        ceiling
            .baseline
            .as_ref()
            .and_then(|b| b.value)
            .is_some_and(|v| v.median > 0.0)
    );
    assert!(ceiling.ratio.is_some_and(|r| r > 0.0));
    for (id, metric) in [("P1", "pickup p50"), ("P2b", "bare jobs drained")] {
        let baseline = row(&report, id, metric)?
            .baseline
            .as_ref()
            .context("graphile-worker baseline missing")?;
        match (&baseline.value, &baseline.skipped) {
            (Some(v), _) => assert!(v.median > 0.0),
            (None, Some(reason)) => {
                assert!(!reason.is_empty());
                // With node present, only an unreachable registry may excuse it.
                let node = std::process::Command::new("node").arg("--version").output();
                if node.is_ok_and(|o| o.status.success()) {
                    assert!(
                        reason.contains("npm install"),
                        "graphile-worker failed: {reason}"
                    );
                }
            }
            (None, None) => panic!("baseline without figure or reason"),
        }
    }

    // Every goal got a verdict.
    for r in &report.rows {
        if r.check.is_some() {
            assert_ne!(r.verdict, Verdict::Info, "{} {}", r.id, r.metric);
        }
    }

    // P7: every build measured and split sensibly when terraform is there; said why not when
    // it is not.
    if bench::scenarios::terraform::on_path().is_some() {
        assert_eq!(count(&report, "p7_builds")?, sizes.terraform_builds);
        let (p50, p95, max) = (
            median(&report, "P7", "terraform build overhead (wall")?,
            median(&report, "P7", "terraform build overhead p95")?,
            median(&report, "P7", "terraform build overhead max")?,
        );
        assert!(0.0 < p50 && p50 <= p95 && p95 <= max, "{p50} {p95} {max}");
        let wall = median(&report, "P7", "build wall time")?;
        let terraform = median(&report, "P7", "terraform's own time")?;
        assert!(
            0.0 < terraform && terraform < wall,
            "terraform {terraform} ms within a build of {wall} ms"
        );
        for part in ["job queued", "daemon setup", "between terraform", "result"] {
            let v = median(&report, "P7", &format!("overhead: {part}"))?;
            assert!((0.0..wall).contains(&v), "{part}: {v}");
        }
    } else {
        let r = row(&report, "P7", "terraform build overhead")?;
        assert!(r.ours.is_none() && r.note.contains("terraform"));
        assert_eq!(r.verdict, Verdict::Skipped);
    }

    // P8: every agent connected, reported, and was answered; the figures are plausible.
    assert_eq!(count(&report, "p8_agents")?, sizes.agents);
    assert_eq!(count(&report, "p8_errors")?, 0);
    assert!(count(&report, "p8_calls")? > 0);
    let cpu = median(
        &report,
        "P8",
        &format!("{} simulated agents: coderd CPU", sizes.agents),
    )?;
    assert!((0.0..=2.0 * 8.0).contains(&cpu), "{cpu} vCPU");
    let (rss_peak, rss_end) = (
        median(&report, "P8", "coderd RSS peak")?,
        median(&report, "P8", "coderd RSS at the window's end")?,
    );
    assert!(0.0 < rss_end && rss_end <= rss_peak, "{rss_end} {rss_peak}");
    let (g50, g95, g99) = (
        median(&report, "P8", "agent API p50")?,
        median(&report, "P8", "agent API p95")?,
        median(&report, "P8", "agent API p99")?,
    );
    assert!(0.0 < g50 && g50 <= g95 && g95 <= g99, "{g50} {g95} {g99}");
    assert!(median(&report, "P8", "database transactions")? > 0.0);
    assert!(median(&report, "P8", "agent calls answered")? > 0.0);

    // P8b: the larger fleet, every agent of it answered.
    assert_eq!(count(&report, "p8b_agents")?, sizes.large_fleet);
    assert_eq!(count(&report, "p8b_errors")?, 0);
    assert!(median(&report, "P8b", "agent API p95")? > 0.0);

    // P4b: the ladder ran, from its first rate; the capacity is one of its rates (or 0 when the
    // first step already failed).
    let capacity = row(&report, "P4b", "capacity")?;
    let found = capacity.ours.as_ref().context("P4b has no figure")?.median;
    assert!(
        found == 0.0 || sizes.capacity_rates.contains(&found),
        "{found}"
    );
    assert!(
        capacity
            .note
            .contains(&format!("{:.0}/s", sizes.capacity_rates[0]))
    );

    // P11: every create measured and split into parts that fit in it, when terraform is
    // there; said why not when it is not.
    if bench::scenarios::terraform::on_path().is_some() {
        assert_eq!(count(&report, "p11_creates")?, sizes.creates);
        let total = median(&report, "P11", "coder create --wait")?;
        for part in bench::scenarios::create::PARTS {
            let v = median(&report, "P11", part)?;
            assert!((0.0..=total).contains(&v), "{part}: {v} of {total}");
        }
    } else {
        let r = row(&report, "P11", "coder create --wait")?;
        assert_eq!(r.verdict, Verdict::Skipped);
    }

    // The relay: every transfer and idle stream happened through a real agent; the direct
    // baselines are there (sshd's, or why not).
    assert_eq!(count(&report, "relay_transfers")?, runs);
    assert_eq!(count(&report, "relay_idle_streams")?, sizes.relay_streams);
    for (id, metric) in [
        ("P10", "TCP throughput, coder port-forward"),
        ("-", "TCP throughput, relay stream"),
        ("P9", "SSH throughput, coder ssh"),
        ("P9", "SSH throughput, OpenSSH via config-ssh"),
        ("-", "keystroke echo p50"),
        ("-", "connect time, ssh coder."),
        ("-", "connect time, coder ssh"),
    ] {
        assert!(median(&report, id, metric)? > 0.0, "{id} {metric}");
    }
    let forward = row(&report, "P10", "TCP throughput, coder port-forward")?;
    assert!(forward.ratio.is_some_and(|r| r > 0.0));
    let keys = row(&report, "-", "keystroke echo p50")?;
    assert!(
        keys.ratio.is_some_and(|r| r > 0.0),
        "the local PTY baseline"
    );
    let ssh = row(&report, "P9", "SSH throughput, coder ssh")?;
    let sshd = ssh.baseline.as_ref().context("the sshd baseline")?;
    assert!(
        sshd.value.is_some_and(|v| v.median > 0.0)
            || sshd.skipped.as_ref().is_some_and(|why| !why.is_empty()),
        "{sshd:?}"
    );
    let per_stream = median(&report, "-", "coderd memory per idle relay stream")?;
    assert!(per_stream.is_finite(), "{per_stream}");

    // The app proxy: every request answered through a real agent, with the direct baseline of
    // the same run beside it; percentiles ordered.
    assert_eq!(count(&report, "app_downloads")?, runs);
    assert!(count(&report, "app_requests")? >= runs * 2 * sizes.app_requests);
    assert_eq!(median(&report, "-", "app proxy: failed requests")?, 0.0);
    let (l50, l99) = (
        median(&report, "-", "app proxy: small GET p50")?,
        median(&report, "-", "app proxy: small GET p99")?,
    );
    assert!(0.0 < l50 && l50 <= l99, "{l50} {l99}");
    for metric in [
        "app proxy: small GET p50",
        "app proxy: small GETs",
        "app proxy: download",
    ] {
        let r = row(&report, "-", metric)?;
        assert!(r.ours.is_some_and(|v| v.median > 0.0), "{metric}");
        assert!(
            r.ratio.is_some_and(|v| v > 0.0),
            "{metric}: direct baseline"
        );
    }

    // The outputs are written, and the docs keep what humans wrote.
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("bench.json");
    report.write_json(&json)?;
    let parsed: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    assert!(
        parsed["rows"]
            .as_array()
            .is_some_and(|rows| rows.len() == report.rows.len())
    );
    let docs = dir.path().join("benchmarks.md");
    std::fs::write(&docs, "# Benchmarks\n\nWritten by a person.\n")?;
    report.write_docs(&docs)?;
    report.write_docs(&docs)?;
    let text = std::fs::read_to_string(&docs)?;
    assert!(text.contains("Written by a person.") && text.contains("| P2 |"));
    assert_eq!(text.matches(bench::report::BEGIN_MARKER).count(), 1);
    Ok(())
}
