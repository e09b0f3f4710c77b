//! P11's rows: `coder create --wait` of the `local-process` template to a ready agent, and
//! where its time goes (from the build's recorded timings), from `scenarios::create`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::Progress;
use crate::config::Config;
use crate::report::{Check, Report, Row};
use crate::scenarios::{create, terraform};
use crate::stats::Percentiles;

pub(super) async fn create_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let what = "coder create --wait → agent ready, local-process template";
    if terraform::on_path().is_none() {
        progress.step("P11 skipped: terraform is not on PATH");
        let mut row = Row::not_measured("P11", what, "");
        row.note = "skipped: terraform is not on PATH (install terraform ≥ 1.5 to measure)".into();
        report.rows.push(row);
        return Ok(());
    }
    let creates = config.sizes.creates;
    let runs = create::run(
        &config.coder_bin,
        &work.join("create"),
        creates,
        config.sizes.timeout,
        &|what| progress.step(what),
    )
    .await
    .context("measuring coder create --wait")?;
    report.counts.insert("p11_creates".into(), runs.len());
    let p50 = |values: Vec<f64>| -> Option<f64> {
        let samples: Vec<Duration> = values
            .iter()
            .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1e3))
            .collect();
        Percentiles::of(&samples).map(|p| p.p50)
    };
    let totals: Vec<f64> = runs.iter().map(|c| c.total).collect();
    report.rows.push(
        Row::new("P11", what, "ms", &totals)
            .goal("≤ 2 s p50", Check::max(2000.0))
            .note(format!(
                "{creates} creates, one at a time, each deleted before the next, after a warm-up \
                 create (provider plugin cache warm); 1 terraform daemon; the agent downloaded \
                 by the init script from this coderd"
            )),
    );
    for (i, part) in create::PARTS.iter().enumerate() {
        let values: Vec<f64> = runs
            .iter()
            .filter_map(|c| c.parts.get(i))
            .map(|p| p.1)
            .collect();
        if let Some(p) = p50(values) {
            report
                .rows
                .push(Row::new("P11", &format!("{part} p50"), "ms", &[p]));
        }
    }
    Ok(())
}
