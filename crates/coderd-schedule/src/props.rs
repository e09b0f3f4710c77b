//! Property tests of schedule strings, which users type and the API stores: any input is
//! either refused with a reason or parsed, and a parsed schedule's next times keep its
//! promises in every zone, across daylight-saving changes.

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::cron::{Schedule, day_allowed};

/// Zones with ordinary, half-hour, thirty-minute-DST and southern-hemisphere rules.
const ZONES: [&str; 6] = [
    "UTC",
    "Europe/Dublin",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "America/Santiago",
];

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    // 2020-01-01 to 2035-01-01.
    (1_577_836_800i64..2_051_222_400)
        .prop_map(|s| Utc.timestamp_opt(s, 0).single().unwrap_or_default())
}

/// A schedule in Coder's form: a zone, a minute, an hour and a set of days (bit 0 Sunday, as
/// cron numbers them).
fn schedule() -> impl Strategy<Value = (String, u32, u32, u8)> {
    (
        prop::sample::select(ZONES.as_slice()),
        0u32..60,
        0u32..24,
        1u8..128,
    )
        .prop_map(|(zone, minute, hour, days)| (zone.to_string(), minute, hour, days))
}

fn cron_days(days: u8) -> String {
    (0..7)
        .filter(|d| days & (1 << d) != 0)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_text_is_parsed_or_refused_with_a_reason(raw in ".{0,80}") {
        if let Err(e) = Schedule::weekly(&raw) {
            prop_assert!(!e.to_string().is_empty());
        }
        let _ = Schedule::daily(&raw);
    }

    #[test]
    fn cron_like_text_never_panics(
        fields in prop::collection::vec("[0-9*,/-]{1,6}|[A-Za-z]{3}|CRON_TZ=[A-Za-z/_]{0,20}", 0..8),
    ) {
        let raw = fields.join(" ");
        if let Ok(parsed) = Schedule::weekly(&raw) {
            // What was accepted is stored in a form that parses to the same schedule.
            prop_assert_eq!(Schedule::weekly(&parsed.to_string()), Ok(parsed));
        }
    }

    #[test]
    fn next_times_fall_on_the_scheduled_minute_and_day(
        (zone, minute, hour, days) in schedule(),
        after in instant(),
    ) {
        let raw = format!("CRON_TZ={zone} {minute} {hour} * * {}", cron_days(days));
        let parsed = Schedule::weekly(&raw).map_err(|e| TestCaseError::fail(format!("{raw}: {e}")))?;
        prop_assert_eq!(Schedule::weekly(&parsed.to_string()), Ok(parsed.clone()));
        let tz: Tz = parsed.zone();
        let next = parsed.next_after(after);
        let next = next.ok_or_else(|| TestCaseError::fail(format!("{raw}: no next time after {after}")))?;
        prop_assert!(next > after, "{raw}: {next} is not after {after}");
        prop_assert!(next - after <= Duration::days(8), "{raw}: {next} is too far after {after}");
        let local = next.with_timezone(&tz);
        let weekday = local.weekday().num_days_from_sunday();
        prop_assert!(days & (1 << weekday) != 0, "{raw}: {local} is not a scheduled day");
        if (local.hour(), local.minute()) != (hour, minute) {
            // Only a time the zone skips that day may move, and only to just after the gap.
            let wanted = local.date_naive().and_hms_opt(hour, minute, 0);
            prop_assert!(
                wanted.is_some_and(|w| tz.from_local_datetime(&w).earliest().is_none()),
                "{raw}: fired at {local}"
            );
        }
    }

    #[test]
    fn allowed_days_narrow_but_never_skip_a_permitted_time(
        (zone, minute, hour, days) in schedule(),
        after in instant(),
        allowed in 0u8..128,
    ) {
        let raw = format!("CRON_TZ={zone} {minute} {hour} * * {}", cron_days(days));
        let parsed = Schedule::weekly(&raw).map_err(|e| TestCaseError::fail(format!("{raw}: {e}")))?;
        let next = parsed.next_after(after);
        match parsed.next_allowed_after(after, allowed) {
            None => prop_assert!(allowed == 0 || next.is_none() || cron_and_allowed_disjoint(days, allowed),
                "{raw} with days {allowed:07b}: nothing found"),
            Some(t) => {
                prop_assert!(Some(t) >= next, "{raw}: {t} is before the schedule's next time");
                prop_assert!(day_allowed(allowed, t.with_timezone(&parsed.zone()).weekday()));
            }
        }
    }
}

/// Whether no scheduled day (cron bits, Sunday first) is allowed (bits Monday first).
fn cron_and_allowed_disjoint(cron: u8, allowed: u8) -> bool {
    (0..7).all(|sunday_first: u8| {
        let monday_first = (sunday_first + 6) % 7;
        cron & (1 << sunday_first) == 0 || allowed & (1 << monday_first) == 0
    })
}
