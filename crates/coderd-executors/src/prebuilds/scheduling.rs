//! A preset's prebuild `scheduling`: while the current minute, read in the block's time zone,
//! falls within one of its `schedule` crons, that schedule's `instances` is the pool's size;
//! otherwise the preset's own `instances` is. The first matching schedule wins, as in Coder.
//!
//! A cron here is a time range, not a trigger: `* 8-18 * * 1-5` means every minute from 08:00
//! to 18:59 on weekdays. Coder's provider refuses anything but `*` as the minute, so a range is
//! whole hours.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use chrono_tz::Tz;
use codersdk::proto::Scheduling;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// Why a preset's scheduling cannot be read; the reconciler then uses the preset's default
/// count and says why in its log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulingError {
    #[error("unknown time zone {0:?}")]
    Zone(String),
    #[error("schedule {cron:?}: {reason}")]
    Cron { cron: String, reason: String },
}

/// The number of prebuilds `scheduling` asks for at `now`, `default` when no schedule matches.
pub fn desired_instances(
    default: i32,
    scheduling: Option<&Scheduling>,
    now: DateTime<Utc>,
) -> Result<i32, SchedulingError> {
    let Some(scheduling) = scheduling.filter(|s| !s.schedule.is_empty()) else {
        return Ok(default);
    };
    let zone: Tz = if scheduling.timezone.is_empty() {
        Tz::UTC
    } else {
        scheduling
            .timezone
            .parse()
            .map_err(|_| SchedulingError::Zone(scheduling.timezone.clone()))?
    };
    // Matching is per minute: the seconds of `now` must not decide it.
    let minute = now
        .duration_trunc(TimeDelta::minutes(1))
        .unwrap_or(now)
        .with_timezone(&zone);
    for schedule in &scheduling.schedule {
        let cron = parse(&schedule.cron)?;
        let matches = cron
            .is_time_matching(&minute)
            .map_err(|e| SchedulingError::Cron {
                cron: schedule.cron.clone(),
                reason: e.to_string(),
            })?;
        if matches {
            return Ok(schedule.instances.max(0));
        }
    }
    Ok(default)
}

fn parse(raw: &str) -> Result<Cron, SchedulingError> {
    let invalid = |reason: String| SchedulingError::Cron {
        cron: raw.to_owned(),
        reason,
    };
    let fields: Vec<&str> = raw.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(invalid(format!(
            "expected 5 fields, found {}",
            fields.len()
        )));
    }
    if fields[0] != "*" {
        return Err(invalid(
            "the minute must be \"*\" (a schedule is a range of whole hours)".into(),
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(&fields.join(" "))
        .map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use codersdk::proto::Schedule;

    use super::*;

    fn scheduling(zone: &str, schedules: &[(&str, i32)]) -> Scheduling {
        Scheduling {
            timezone: zone.into(),
            schedule: schedules
                .iter()
                .map(|(cron, instances)| Schedule {
                    cron: (*cron).into(),
                    instances: *instances,
                })
                .collect(),
        }
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("a valid time")
    }

    #[test]
    fn no_schedule_is_the_default() {
        let now = at(2025, 6, 2, 9, 0, 0);
        assert_eq!(desired_instances(2, None, now), Ok(2));
        assert_eq!(
            desired_instances(2, Some(&scheduling("UTC", &[])), now),
            Ok(2)
        );
    }

    #[test]
    fn a_range_covers_whole_hours_and_the_first_match_wins() {
        // 2 June 2025 is a Monday, 7 June a Saturday.
        let s = scheduling(
            "UTC",
            &[("* 8-18 * * 1-5", 3), ("* 8-14 * * 6", 1), ("* 9 * * *", 7)],
        );
        let desired = |t| desired_instances(0, Some(&s), t);
        assert_eq!(desired(at(2025, 6, 2, 7, 59, 59)), Ok(0));
        assert_eq!(desired(at(2025, 6, 2, 8, 0, 0)), Ok(3));
        assert_eq!(
            desired(at(2025, 6, 2, 9, 30, 12)),
            Ok(3),
            "the first match wins"
        );
        assert_eq!(desired(at(2025, 6, 2, 18, 59, 59)), Ok(3));
        assert_eq!(desired(at(2025, 6, 2, 19, 0, 0)), Ok(0));
        assert_eq!(desired(at(2025, 6, 7, 10, 0, 0)), Ok(1));
        assert_eq!(
            desired(at(2025, 6, 8, 9, 0, 0)),
            Ok(7),
            "Sunday: only the last matches"
        );
    }

    #[test]
    fn hours_are_read_in_the_zone() {
        // 08:00 in Berlin is 06:00 UTC in summer.
        let s = scheduling("Europe/Berlin", &[("* 8-9 * * *", 4)]);
        assert_eq!(
            desired_instances(1, Some(&s), at(2025, 6, 2, 6, 0, 0)),
            Ok(4)
        );
        assert_eq!(
            desired_instances(1, Some(&s), at(2025, 6, 2, 8, 0, 0)),
            Ok(1)
        );
    }

    #[test]
    fn bad_schedules_are_errors() {
        let now = at(2025, 6, 2, 9, 0, 0);
        assert!(matches!(
            desired_instances(
                1,
                Some(&scheduling("Mars/Olympus", &[("* * * * *", 2)])),
                now
            ),
            Err(SchedulingError::Zone(_))
        ));
        for cron in ["0 8 * * *", "* 8 * *", "* 25 * * *"] {
            assert!(
                matches!(
                    desired_instances(1, Some(&scheduling("UTC", &[(cron, 2)])), now),
                    Err(SchedulingError::Cron { .. })
                ),
                "{cron}"
            );
        }
    }
}
