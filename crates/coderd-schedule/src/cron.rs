//! Coder's schedule strings: `CRON_TZ=<IANA zone> <minute> <hour> * * <days of week>`, the
//! form of a workspace's `autostart_schedule` and of the deployment's quiet hours. The day of
//! the month and the month are always `*` (a schedule is weekly); without `CRON_TZ` the zone is
//! UTC, never the server's local time.

use chrono::{DateTime, Datelike, Days, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// Why a schedule string was refused; the text is shown to the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(String);

const FORM: &str = "expected \"CRON_TZ=<zone> <minute> <hour> * * <days of week>\", \
                    e.g. \"CRON_TZ=Europe/Dublin 30 9 * * 1-5\"";

/// A parsed weekly schedule.
#[derive(Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
    /// The five cron fields, as written.
    fields: String,
}

impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CRON_TZ={} {}", self.zone.name(), self.fields)
    }
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Schedule({self})")
    }
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.zone == other.zone && self.fields == other.fields
    }
}

impl Schedule {
    /// Parses and validates a weekly schedule (Coder's `Weekly`).
    pub fn weekly(raw: &str) -> Result<Self, ScheduleError> {
        let parts: Vec<&str> = raw.split_whitespace().collect();
        let (zone, fields) = match parts.split_first() {
            Some((first, rest)) if first.starts_with("CRON_TZ=") => {
                let name = &first["CRON_TZ=".len()..];
                let zone = name.parse::<Tz>().map_err(|_| {
                    ScheduleError(format!(
                        "unknown time zone {name:?}: use an IANA name such as \"Europe/Dublin\" \
                         or \"America/Chicago\""
                    ))
                })?;
                (zone, rest)
            }
            _ => (Tz::UTC, parts.as_slice()),
        };
        if fields
            .iter()
            .any(|f| f.starts_with("CRON_TZ=") || f.starts_with('@'))
        {
            return Err(ScheduleError(FORM.into()));
        }
        if fields.len() != 5 {
            return Err(ScheduleError(format!(
                "{FORM}: found {} fields after the time zone",
                fields.len()
            )));
        }
        if fields[2] != "*" || fields[3] != "*" {
            return Err(ScheduleError(
                "the day of the month and the month must be \"*\" (schedules repeat weekly)".into(),
            ));
        }
        let fields = fields.join(" ");
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&fields)
            .map_err(|e| ScheduleError(format!("{FORM}: {e}")))?;
        Ok(Self { cron, zone, fields })
    }

    /// A schedule that must fire every day (the quiet hours): the day of the week is `*` too.
    pub fn daily(raw: &str) -> Result<Self, ScheduleError> {
        let schedule = Self::weekly(raw)?;
        if schedule.fields.split_whitespace().nth(4) != Some("*") {
            return Err(ScheduleError(
                "the day of the week must be \"*\" (this schedule fires daily)".into(),
            ));
        }
        Ok(schedule)
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first time of the schedule strictly after `t`. Times that do not exist on a
    /// spring-forward day fire at the first instant after the gap; times that happen twice on
    /// a fall-back day fire once.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.zone), false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// The first time strictly after `t` that falls on a day (in the schedule's zone) whose
    /// bit is set in `allowed_days` (bit 0 is Monday … bit 6 Sunday); `None` when no day is
    /// allowed.
    pub fn next_allowed_after(&self, t: DateTime<Utc>, allowed_days: u8) -> Option<DateTime<Utc>> {
        if allowed_days & ALL_DAYS == 0 {
            return None;
        }
        let mut after = t;
        // Every iteration either returns or moves past a whole disallowed day, and a weekly
        // schedule fires within eight days of any instant.
        for _ in 0..16 {
            let next = self.next_after(after)?;
            let local = next.with_timezone(&self.zone);
            if day_allowed(allowed_days, local.weekday()) {
                return Some(next);
            }
            after = end_of_day(self.zone, local.date_naive())?;
        }
        None
    }
}

/// All seven days.
pub const ALL_DAYS: u8 = 0b0111_1111;

/// Coder's day names, Monday first (the bit order of the day bitmaps).
pub const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

pub fn day_allowed(days: u8, day: Weekday) -> bool {
    days & (1 << day.num_days_from_monday()) != 0
}

/// Day names to a bitmap; names are case-insensitive and may repeat.
pub fn days_to_bitmap<S: AsRef<str>>(days: &[S]) -> Result<u8, String> {
    days.iter().try_fold(0u8, |bits, day| {
        let day = day.as_ref();
        WEEKDAYS
            .iter()
            .position(|name| name.eq_ignore_ascii_case(day))
            .map(|i| bits | (1 << i))
            .ok_or_else(|| {
                format!(
                    "{day:?} is not a day of the week (use {})",
                    WEEKDAYS.join(", ")
                )
            })
    })
}

pub fn bitmap_to_days(bits: u8) -> Vec<String> {
    WEEKDAYS
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, name)| (*name).to_string())
        .collect()
}

/// The last second of `day` in `zone`: the next search starts on the following day.
fn end_of_day(zone: Tz, day: chrono::NaiveDate) -> Option<DateTime<Utc>> {
    let next_day = day.checked_add_days(Days::new(1))?;
    let midnight = next_day.and_time(NaiveTime::MIN);
    let local = zone.from_local_datetime(&midnight).earliest().or_else(|| {
        zone.from_local_datetime(&(midnight + chrono::Duration::hours(1)))
            .earliest()
    })?;
    Some(local.with_timezone(&Utc) - chrono::Duration::seconds(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn coder_forms_parse_and_others_are_refused_with_a_reason() {
        for ok in [
            "CRON_TZ=Europe/Dublin 30 9 * * 1-5",
            "30 9 * * *",
            "CRON_TZ=US/Central 0 8 * * MON-FRI",
            "CRON_TZ=UTC 0 0 * * 0,6",
        ] {
            assert!(Schedule::weekly(ok).is_ok(), "{ok}");
        }
        let refused = |raw: &str| Schedule::weekly(raw).err().map(|e| e.to_string());
        assert!(refused("CRON_TZ=Mars/Olympus 0 9 * * *").is_some_and(|e| e.contains("time zone")));
        assert!(refused("0 9 1 * *").is_some_and(|e| e.contains("day of the month")));
        assert!(refused("0 9 * 1 *").is_some_and(|e| e.contains("month")));
        assert!(refused("0 9 * *").is_some_and(|e| e.contains("4 fields")));
        assert!(refused("@daily").is_some_and(|e| e.contains("CRON_TZ=<zone>")));
        assert!(refused("61 9 * * *").is_some());
        assert!(refused("0 25 * * *").is_some());
        assert!(refused("0 9 * * 9").is_some());
        assert!(refused("").is_some());
        assert!(Schedule::daily("CRON_TZ=UTC 0 0 * * 1").is_err());
        assert!(Schedule::daily("CRON_TZ=UTC 0 0 * * *").is_ok());
    }

    #[test]
    fn next_times_follow_the_zone_across_its_dst_changes() -> Result<(), ScheduleError> {
        // Europe/Dublin: IST (UTC+1) from 2027-03-28 01:00 UTC, GMT from 2027-10-31 01:00 UTC.
        let s = Schedule::weekly("CRON_TZ=Europe/Dublin 30 9 * * *")?;
        assert_eq!(
            s.next_after(utc("2027-03-27T10:00:00Z")),
            Some(utc("2027-03-28T08:30:00Z")),
            "09:30 IST on the spring-forward day"
        );
        assert_eq!(
            s.next_after(utc("2027-03-27T08:00:00Z")),
            Some(utc("2027-03-27T09:30:00Z")),
            "09:30 GMT the day before"
        );
        assert_eq!(
            s.next_after(utc("2027-10-30T09:00:00Z")),
            Some(utc("2027-10-31T09:30:00Z")),
            "09:30 GMT on the fall-back day"
        );
        // A time inside the skipped hour fires once, at the end of the gap.
        let gap = Schedule::weekly("CRON_TZ=Europe/Dublin 30 1 * * *")?;
        assert_eq!(
            gap.next_after(utc("2027-03-27T23:00:00Z")),
            Some(utc("2027-03-28T01:00:00Z"))
        );
        // A time inside the repeated hour fires once.
        let twice = Schedule::weekly("CRON_TZ=Europe/Dublin 30 1 * * *")?;
        let first = twice.next_after(utc("2027-10-30T23:00:00Z"));
        assert_eq!(first, Some(utc("2027-10-31T00:30:00Z")));
        assert_eq!(
            first.and_then(|f| twice.next_after(f)),
            Some(utc("2027-11-01T01:30:00Z"))
        );
        Ok(())
    }

    #[test]
    fn allowed_days_are_those_of_the_schedules_zone() -> Result<(), ScheduleError> {
        // 23:30 in Chicago on a Friday is already Saturday in UTC.
        let s = Schedule::weekly("CRON_TZ=America/Chicago 30 23 * * *")?;
        let friday_only = days_to_bitmap(&["friday"]).map_err(ScheduleError)?;
        let next = s.next_allowed_after(utc("2027-01-04T12:00:00Z"), friday_only);
        assert_eq!(
            next,
            Some(utc("2027-01-09T05:30:00Z")),
            "Friday 8th, 23:30 CST"
        );
        assert_eq!(s.next_allowed_after(utc("2027-01-04T12:00:00Z"), 0), None);
        Ok(())
    }

    #[test]
    fn day_bitmaps_round_trip() {
        assert_eq!(days_to_bitmap(&["Monday", "sunday"]), Ok(0b0100_0001));
        assert_eq!(bitmap_to_days(0b0100_0001), ["monday", "sunday"]);
        assert_eq!(bitmap_to_days(ALL_DAYS).len(), 7);
        assert!(days_to_bitmap(&["funday"]).is_err());
    }
}
