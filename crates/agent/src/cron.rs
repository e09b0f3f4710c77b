//! Scripts on a schedule. Coder's agent reads `cron` with seconds first and the day of week
//! optional (`sec min hour dom month [dow]`), days of week 0–6 from Sunday (names allowed),
//! in the workspace's local time zone.

use std::time::Duration;

use chrono::{DateTime, Local};
use codersdk::agentsdk::{ManifestScript, ScriptStage};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use tokio_util::sync::CancellationToken;

use crate::scripts::{ScriptRunner, display_name};

#[derive(Debug, Clone)]
pub(crate) struct Schedule(Cron);

impl Schedule {
    pub(crate) fn parse(expr: &str) -> Result<Self, String> {
        let fields = expr.split_whitespace().count();
        let full = match fields {
            // The day of week is optional: every day.
            5 => format!("{} *", expr.trim()),
            6 => expr.trim().to_string(),
            n if expr.trim_start().starts_with('@') && n == 1 => expr.trim().to_string(),
            n => {
                return Err(format!(
                    "expected 6 fields (seconds minutes hours day-of-month month day-of-week), got {n}"
                ));
            }
        };
        CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build()
            .parse(&full)
            .map(Self)
            .map_err(|e| e.to_string())
    }

    /// The first time strictly after `now`.
    pub(crate) fn next_after(&self, now: &DateTime<Local>) -> Option<DateTime<Local>> {
        self.0.find_next_occurrence(now, false).ok()
    }
}

/// Runs `script` at each time of its schedule until `cancel`. A run still going when the next
/// time comes delays it rather than overlapping it.
pub(crate) async fn run_on_schedule(
    runner: &ScriptRunner,
    script: &ManifestScript,
    cancel: &CancellationToken,
) {
    let name = display_name(script);
    let schedule = match Schedule::parse(&script.cron) {
        Ok(schedule) => schedule,
        Err(error) => {
            tracing::error!(script = %name, cron = %script.cron, %error, "invalid cron schedule; the script will not run on it");
            return;
        }
    };
    loop {
        let now = Local::now();
        let Some(next) = schedule.next_after(&now) else {
            tracing::warn!(script = %name, cron = %script.cron, "the schedule has no further times");
            return;
        };
        let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        runner.run(script, ScriptStage::Cron, cancel).await;
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Datelike, TimeZone, Timelike, Weekday};

    use super::*;
    use crate::reporter::tests::cancel_after;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> anyhow::Result<DateTime<Local>> {
        Local
            .with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .ok_or_else(|| anyhow::anyhow!("ambiguous local time"))
    }

    fn next(expr: &str, now: DateTime<Local>) -> anyhow::Result<DateTime<Local>> {
        Schedule::parse(expr)
            .map_err(|e| anyhow::anyhow!(e))?
            .next_after(&now)
            .ok_or_else(|| anyhow::anyhow!("no next time"))
    }

    #[test]
    fn the_first_field_is_seconds() -> anyhow::Result<()> {
        let now = at(2025, 3, 10, 12, 0, 0)?;
        assert_eq!(next("*/5 * * * * *", now)?, at(2025, 3, 10, 12, 0, 5)?);
        assert_eq!(next("30 * * * * *", now)?, at(2025, 3, 10, 12, 0, 30)?);
        assert_eq!(next("0 15 * * * *", now)?, at(2025, 3, 10, 12, 15, 0)?);
        Ok(())
    }

    #[test]
    fn the_day_of_week_is_optional_and_counts_from_sunday() -> anyhow::Result<()> {
        // 2025-03-10 is a Monday.
        let monday = at(2025, 3, 10, 12, 0, 0)?;
        assert_eq!(next("0 0 9 * *", monday)?, at(2025, 3, 11, 9, 0, 0)?);
        let sunday = next("0 0 9 * * 0", monday)?;
        assert_eq!(sunday.weekday(), Weekday::Sun);
        assert_eq!((sunday.day(), sunday.hour()), (16, 9));
        assert_eq!(next("0 0 9 * * FRI", monday)?.weekday(), Weekday::Fri);
        assert_eq!(
            next("0 0 9 ? * MON-WED", monday)?,
            at(2025, 3, 11, 9, 0, 0)?
        );
        Ok(())
    }

    #[test]
    fn malformed_schedules_are_refused() {
        for bad in [
            "",
            "* * * *",
            "* * * * * * *",
            "61 * * * * *",
            "@every 5m",
            "x * * * * *",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Schedule::parse("@hourly").is_ok());
    }

    #[tokio::test]
    async fn a_cancelled_schedule_stops_waiting() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let runner = ScriptRunner {
            shell: crate::process::ShellCommand {
                program: "/bin/sh".into(),
                env: Default::default(),
                dir: dir.path().to_path_buf(),
            },
            reporter: crate::reporter::Reporter::new(
                Duration::from_millis(10),
                Duration::from_secs(1),
            ),
            log_dir: dir.path().to_path_buf(),
            data_dir: dir.path().join("data"),
            home: None,
            graces: crate::scripts::Graces {
                kill: Duration::from_millis(100),
                pipes: Duration::from_millis(100),
            },
        };
        let marker = dir.path().join("ran");
        let script = ManifestScript {
            cron: "* * * * * *".into(),
            script: format!("echo x >> {}", marker.display()),
            ..ManifestScript::default()
        };
        let cancel = cancel_after(Duration::from_millis(2500));
        tokio::time::timeout(
            Duration::from_secs(5),
            run_on_schedule(&runner, &script, &cancel),
        )
        .await?;
        let runs = std::fs::read_to_string(&marker)?.lines().count();
        assert!((2..=3).contains(&runs), "ran {runs} times in 2.5 s");
        Ok(())
    }
}
