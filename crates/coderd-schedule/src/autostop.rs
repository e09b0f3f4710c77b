//! When a started workspace stops: its `deadline` (the time to live from the build, pushed on
//! by activity) and its `max_deadline` (the template's autostop requirement: a restart during
//! the owner's quiet hours on the required days, every n weeks), as Coder computes them when a
//! start build completes.

use chrono::{DateTime, Datelike, Days, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::cron::{Schedule, day_allowed};

/// A start within this long of the quiet hours skips to the next required day, so a workspace
/// is never stopped right after it started.
const LEEWAY: Duration = Duration::hours(1);
/// Searching for the quiet hours starts this long before midnight: a quiet-hours time of
/// exactly midnight must count for the day that starts there.
const BUFFER: Duration = Duration::minutes(15);
/// Most weeks between required restarts (Coder's limit).
pub const MAX_REQUIREMENT_WEEKS: i64 = 16;

/// The template settings a deadline depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplatePolicy {
    pub default_ttl_ms: i64,
    pub allow_user_autostop: bool,
    /// Days a restart is required (bit 0 Monday … bit 6 Sunday); 0: never.
    pub autostop_requirement_days: u8,
    /// Every how many weeks (0 and 1: weekly).
    pub autostop_requirement_weeks: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Autostop {
    pub deadline: Option<DateTime<Utc>>,
    pub max_deadline: Option<DateTime<Utc>>,
}

/// The time to live that applies to a workspace: its own, unless the template decides.
pub fn effective_ttl_ms(workspace_ttl_ms: Option<i64>, template: &TemplatePolicy) -> Option<i64> {
    let ttl = if template.allow_user_autostop {
        workspace_ttl_ms
    } else {
        Some(template.default_ttl_ms)
    };
    ttl.filter(|ms| *ms > 0)
}

/// The deadlines of a start build that completes at `now`.
pub fn autostop(
    now: DateTime<Utc>,
    workspace_ttl_ms: Option<i64>,
    template: &TemplatePolicy,
    quiet_hours: &Schedule,
) -> Autostop {
    let deadline = effective_ttl_ms(workspace_ttl_ms, template)
        .and_then(|ms| now.checked_add_signed(Duration::milliseconds(ms)));
    let max_deadline = if template.autostop_requirement_days & super::ALL_DAYS == 0 {
        None
    } else {
        required_stop(now, template, quiet_hours)
    };
    let deadline = match (deadline, max_deadline) {
        (Some(d), Some(max)) => Some(d.min(max)),
        (None, Some(max)) => Some(max),
        (d, None) => d,
    };
    Autostop {
        deadline,
        max_deadline,
    }
}

/// The next quiet-hours time on a required day (and week), at least [`LEEWAY`] after `now`.
fn required_stop(
    now: DateTime<Utc>,
    template: &TemplatePolicy,
    quiet_hours: &Schedule,
) -> Option<DateTime<Utc>> {
    let zone = quiet_hours.zone();
    let mut day = (now + LEEWAY).with_timezone(&zone).date_naive();
    if template.autostop_requirement_weeks > 1 {
        day = first_day_of_applicable_week(day, template.autostop_requirement_weeks)?;
    }
    let first_check = quiet_hours.next_after(midnight(zone, day)? - BUFFER)?;
    if first_check < now + LEEWAY {
        day = day.checked_add_days(Days::new(1))?;
    }
    for _ in 0..7 {
        if day_allowed(template.autostop_requirement_days, day.weekday()) {
            break;
        }
        day = day.checked_add_days(Days::new(1))?;
    }
    let start = midnight(zone, day)?;
    let check = if start < now + LEEWAY {
        now + LEEWAY
    } else {
        start - BUFFER
    };
    quiet_hours.next_after(check)
}

/// Weeks are counted from Monday 2 January 2023 (Coder's epoch), so every deployment agrees
/// which weeks are restart weeks. Returns `day` in a restart week, else the Monday of the next.
fn first_day_of_applicable_week(day: NaiveDate, every: i64) -> Option<NaiveDate> {
    let epoch = NaiveDate::from_ymd_opt(2023, 1, 2)?;
    let days = day.signed_duration_since(epoch).num_days();
    if days < 0 {
        return Some(day);
    }
    let week = days / 7;
    let remainder = week % every;
    if remainder == 0 {
        return Some(day);
    }
    let weeks_ahead = u64::try_from(week + every - remainder).ok()?;
    epoch.checked_add_days(Days::new(weeks_ahead * 7))
}

/// Midnight of `day` in `zone` (the first instant of the day when midnight is skipped).
fn midnight(zone: Tz, day: NaiveDate) -> Option<DateTime<Utc>> {
    let naive = day.and_time(NaiveTime::MIN);
    zone.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            zone.from_local_datetime(&(naive + Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::days_to_bitmap;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("test timestamp")
    }

    fn policy(days: &[&str], weeks: i64) -> TemplatePolicy {
        TemplatePolicy {
            default_ttl_ms: 0,
            allow_user_autostop: true,
            autostop_requirement_days: days_to_bitmap(days).unwrap_or_default(),
            autostop_requirement_weeks: weeks,
        }
    }

    fn midnight_utc() -> Schedule {
        Schedule::daily("CRON_TZ=UTC 0 0 * * *").expect("static schedule")
    }

    #[test]
    fn the_deadline_is_the_ttl_or_the_templates_when_users_may_not_choose() {
        let now = utc("2027-01-06T10:00:00Z");
        let mut p = policy(&[], 1);
        let a = autostop(now, Some(3_600_000), &p, &midnight_utc());
        assert_eq!(a.deadline, Some(utc("2027-01-06T11:00:00Z")));
        assert_eq!(a.max_deadline, None);
        assert_eq!(autostop(now, None, &p, &midnight_utc()).deadline, None);
        p.allow_user_autostop = false;
        p.default_ttl_ms = 7_200_000;
        assert_eq!(
            autostop(now, Some(60_000), &p, &midnight_utc()).deadline,
            Some(utc("2027-01-06T12:00:00Z"))
        );
    }

    #[test]
    fn the_requirement_caps_the_deadline_at_the_next_required_quiet_hours() {
        // Wednesday 6 January 2027, 10:00 UTC; restarts required on Fridays.
        let now = utc("2027-01-06T10:00:00Z");
        let a = autostop(
            now,
            Some(30 * 86_400_000),
            &policy(&["friday"], 1),
            &midnight_utc(),
        );
        assert_eq!(a.max_deadline, Some(utc("2027-01-08T00:00:00Z")));
        assert_eq!(a.deadline, a.max_deadline);
        // Without a TTL the deadline is the requirement.
        let a = autostop(now, None, &policy(&["friday"], 1), &midnight_utc());
        assert_eq!(a.deadline, Some(utc("2027-01-08T00:00:00Z")));
    }

    #[test]
    fn a_start_just_before_the_quiet_hours_waits_for_the_next_required_day() {
        // Thursday 23:30 UTC: Friday's midnight is under an hour away.
        let now = utc("2027-01-07T23:30:00Z");
        let a = autostop(now, None, &policy(&["friday"], 1), &midnight_utc());
        assert_eq!(a.max_deadline, Some(utc("2027-01-15T00:00:00Z")));
    }

    #[test]
    fn quiet_hours_are_in_the_owners_zone_and_weeks_count_from_coders_epoch() {
        let dublin = Schedule::daily("CRON_TZ=Europe/Dublin 0 2 * * *").expect("static");
        // Monday 5 July 2027 (IST); Tuesdays only → 02:00 IST Tuesday = 01:00 UTC.
        let a = autostop(
            utc("2027-07-05T09:00:00Z"),
            None,
            &policy(&["tuesday"], 1),
            &dublin,
        );
        assert_eq!(a.max_deadline, Some(utc("2027-07-06T01:00:00Z")));
        // 2027-01-04 is week 209 since 2023-01-02; every 2 weeks means week 210.
        let a = autostop(
            utc("2027-01-04T09:00:00Z"),
            None,
            &policy(&["monday"], 2),
            &midnight_utc(),
        );
        assert_eq!(a.max_deadline, Some(utc("2027-01-11T00:00:00Z")));
    }
}
