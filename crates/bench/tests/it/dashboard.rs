//! `coder-bench --only dashboard`, tiny: the dashboard scenario runs against the real `coder`
//! binary and its figures are sane (every page timed and checked, the browser measured when it
//! is installed and required under CI, every live build seen, the idle sockets all opened) —
//! never how fast anything is.

use anyhow::Context;
use bench::{Config, Only, Sizes, Verdict};

use super::{coder_bin, count, median, row};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tiny_dashboard_run_measures_every_goal() -> anyhow::Result<()> {
    let bin = coder_bin()?;
    anyhow::ensure!(bin.is_file(), "{} is missing", bin.display());
    let sizes = Sizes::tiny();
    let report = bench::run_only(&Config::new("tiny", sizes.clone(), bin), Only::Dashboard).await?;
    println!("{}", report.table());

    assert_eq!(
        count(&report, "dashboard_workspaces")?,
        sizes.list_workspaces
    );
    assert_eq!(count(&report, "dashboard_live_builds")?, sizes.runs * 2);
    assert_eq!(count(&report, "dashboard_idle_sockets")?, 20);

    let last = sizes.list_workspaces.div_ceil(25);
    for page in [
        format!("page 1 of {last}"),
        format!("page {last} of {last}"),
    ] {
        let metric = format!("dashboard /workspaces {page}");
        assert!(median(&report, "-", &format!("{metric}: server p95"))? > 0.0);
        assert!(median(&report, "-", &format!("{metric}: HTML size"))? > 1.0);
    }
    assert!(median(&report, "-", "dashboard workspace page: server p95")? > 0.0);

    let browser = report
        .rows
        .iter()
        .filter(|r| r.metric.contains("DOMContentLoaded"))
        .collect::<Vec<_>>();
    assert_eq!(browser.len(), 2);
    let installed = ["chromium", "chromedriver"].iter().all(|name| {
        std::process::Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    for r in browser {
        if installed || ci {
            let ms = r.ours.context("the browser was not measured")?.median;
            assert!(ms > 0.0, "{}: {ms}", r.metric);
        } else {
            assert_eq!(r.verdict, Verdict::Skipped);
            assert!(r.note.contains("PATH"), "{}", r.note);
        }
    }

    let fragment = median(&report, "-", "dashboard live: build created → its status")?;
    let line = median(
        &report,
        "-",
        "dashboard live: build created → its first log",
    )?;
    assert!(fragment > 0.0 && line > 0.0, "{fragment} {line}");
    let growth = median(&report, "-", "dashboard: coderd RSS growth")?;
    assert!(growth.is_finite(), "{growth}");
    let sockets = row(&report, "-", "dashboard: coderd RSS growth")?;
    assert!(sockets.note.contains("per socket"), "{}", sockets.note);

    for r in &report.rows {
        if r.check.is_some() {
            assert_ne!(r.verdict, Verdict::Info, "{}", r.metric);
        }
    }
    Ok(())
}
