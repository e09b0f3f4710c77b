//! Workspace schedules as people read and write them: `coder schedule start`'s
//! `<start-time> [day-of-week] [location]`, durations like `8h` or `90m`, and the columns
//! `coder list` and `coder schedule show` print (a schedule as "9:30AM Mon-Fri
//! (Europe/Dublin)", the next start and stop in the schedule's zone, with how far away).

use anyhow::{Context, bail};
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use codersdk::workspaces::{Workspace, WorkspaceStatus};

/// Builds a schedule from `coder schedule start`'s arguments after the workspace: a time
/// (`9:30AM`, `17:00`), then optionally days of the week (`Mon-Fri`, `1,3,5`) and an IANA
/// location, in either order (default: every day, in `local`).
pub fn from_args(args: &[String], local: Tz) -> anyhow::Result<String> {
    let (time, rest) = args
        .split_first()
        .context("give a start time (e.g. 9:30AM or 17:00), or \"manual\"")?;
    let (hour, minute) = parse_time(time)?;
    let mut days = None;
    let mut zone = None;
    for arg in rest {
        match arg.parse::<Tz>() {
            Ok(tz) if zone.is_none() => zone = Some(tz),
            Ok(_) => bail!("more than one location given ({arg:?})"),
            Err(_) if days.is_none() => days = Some(arg.clone()),
            Err(_) => bail!("{arg:?} is neither days of the week nor a known location"),
        }
    }
    let schedule = format!(
        "CRON_TZ={} {minute} {hour} * * {}",
        zone.unwrap_or(local).name(),
        days.unwrap_or_else(|| "*".into())
    );
    coderd_schedule::Schedule::weekly(&schedule).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(schedule)
}

/// `9:30AM`, `9:30 pm`, `09:30`, `17:00` → (hour, minute).
fn parse_time(s: &str) -> anyhow::Result<(u32, u32)> {
    let lower = s.trim().to_ascii_lowercase();
    let (clock, offset) = if let Some(t) = lower.strip_suffix("am") {
        (t.trim(), Some(0))
    } else if let Some(t) = lower.strip_suffix("pm") {
        (t.trim(), Some(12))
    } else {
        (lower.as_str(), None)
    };
    let bad = || format!("{s:?} is not a time of day (use hh:mm, 24-hour, or hh:mm{{am|pm}})");
    let (h, m) = clock.split_once(':').with_context(bad)?;
    let (hour, minute): (u32, u32) = (h.parse().with_context(bad)?, m.parse().with_context(bad)?);
    let hour = match offset {
        Some(add) if (1..=12).contains(&hour) => hour % 12 + add,
        Some(_) => bail!(bad()),
        None => hour,
    };
    if hour > 23 || minute > 59 {
        bail!(bad());
    }
    Ok((hour, minute))
}

/// The zone `coder schedule start` uses without a location: `TZ`, else `/etc/localtime`'s,
/// else UTC.
pub fn local_zone() -> Tz {
    let from_env = std::env::var("TZ").ok().and_then(|tz| tz.parse().ok());
    let from_link = || {
        let link = std::fs::read_link("/etc/localtime").ok()?;
        let path = link.to_string_lossy();
        let (_, name) = path.split_once("zoneinfo/")?;
        name.parse().ok()
    };
    from_env.or_else(from_link).unwrap_or(Tz::UTC)
}

/// `coder schedule stop`'s durations: `3h2m`, `90m`, or a bare number of minutes.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let std = match s.trim().parse::<u64>() {
        Ok(minutes) => std::time::Duration::from_secs(minutes * 60),
        Err(_) => humantime::parse_duration(s.trim())
            .with_context(|| format!("{s:?} is not a duration (e.g. 8h, 90m, 1h30m)"))?,
    };
    Duration::from_std(std).context("duration too long")
}

/// A duration as Coder prints them: `8h`, `1h30m`, `45m`, `30s`.
pub fn human_duration(d: Duration) -> String {
    let total = d.num_seconds().max(0);
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// "9:30AM Mon-Fri (Europe/Dublin)" for "CRON_TZ=Europe/Dublin 30 9 * * 1-5".
pub fn humanize(schedule: &str) -> String {
    let parts: Vec<&str> = schedule.split_whitespace().collect();
    let (zone, fields) = match parts.split_first() {
        Some((first, rest)) if first.starts_with("CRON_TZ=") => (&first[8..], rest),
        _ => ("UTC", parts.as_slice()),
    };
    let [minute, hour, _, _, days] = fields else {
        return schedule.to_string();
    };
    let time = match (hour.parse::<u32>(), minute.parse::<u32>()) {
        (Ok(h), Ok(m)) if h < 24 && m < 60 => {
            let (h12, half) = match h {
                0 => (12, "AM"),
                1..=11 => (h, "AM"),
                12 => (12, "PM"),
                _ => (h - 12, "PM"),
            };
            format!("{h12}:{m:02}{half}")
        }
        _ => format!("cron({minute} {hour})"),
    };
    let days = if *days == "*" {
        "daily".to_string()
    } else {
        const NAMES: [&str; 8] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
        days.split(',')
            .map(|part| {
                part.split('-')
                    .map(|d| {
                        d.parse::<usize>()
                            .ok()
                            .and_then(|i| NAMES.get(i))
                            .map_or(d, |n| n)
                    })
                    .collect::<Vec<_>>()
                    .join("-")
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("{time} {days} ({zone})")
}

/// A time in `zone`, with how far away it is: "2027-03-28 09:30 IST (in 18h)".
pub fn when(at: DateTime<Utc>, zone: Tz, now: DateTime<Utc>) -> String {
    let local = at.with_timezone(&zone).format("%Y-%m-%d %H:%M %Z");
    let delta = at - now;
    if delta >= Duration::zero() {
        format!("{local} (in {})", human_duration(delta))
    } else {
        format!("{local} ({} ago)", human_duration(-delta))
    }
}

fn schedule_zone(w: &Workspace, fallback: Tz) -> Tz {
    w.autostart_schedule
        .as_deref()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|first| first.strip_prefix("CRON_TZ="))
        .and_then(|z| z.parse().ok())
        .unwrap_or(fallback)
}

/// The schedule columns of a workspace: starts at, starts next, stops after, stops next.
pub struct Columns {
    pub starts_at: String,
    pub starts_next: String,
    pub stops_after: String,
    pub stops_next: String,
}

pub fn columns(w: &Workspace, now: DateTime<Utc>) -> Columns {
    let zone = schedule_zone(w, local_zone());
    let running = w.latest_build.status == WorkspaceStatus::Running;
    Columns {
        starts_at: w
            .autostart_schedule
            .as_deref()
            .map(humanize)
            .unwrap_or_default(),
        starts_next: w
            .next_start_at
            .map(|at| when(at, zone, now))
            .unwrap_or_default(),
        stops_after: w
            .ttl_ms
            .filter(|ms| *ms > 0)
            .map(|ms| human_duration(Duration::milliseconds(ms)))
            .unwrap_or_default(),
        stops_next: w
            .latest_build
            .deadline
            .filter(|_| running)
            .map(|at| when(at, zone, now))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_arguments_become_coders_schedule() -> anyhow::Result<()> {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let dublin: Tz = "Europe/Dublin".parse().map_err(anyhow::Error::msg)?;
        assert_eq!(
            from_args(&args(&["9:30AM", "Mon-Fri", "Europe/Dublin"]), Tz::UTC)?,
            "CRON_TZ=Europe/Dublin 30 9 * * Mon-Fri"
        );
        assert_eq!(
            from_args(&args(&["17:05"]), dublin)?,
            "CRON_TZ=Europe/Dublin 5 17 * * *"
        );
        assert_eq!(
            from_args(&args(&["12:15am", "America/Chicago", "1,3,5"]), Tz::UTC)?,
            "CRON_TZ=America/Chicago 15 0 * * 1,3,5"
        );
        assert_eq!(
            from_args(&args(&["12:00pm"]), Tz::UTC)?,
            "CRON_TZ=UTC 0 12 * * *"
        );
        for bad in [
            &["25:00"][..],
            &["9"],
            &["13:00pm"],
            &["9:00", "Someday"],
            &[],
        ] {
            assert!(from_args(&args(bad), Tz::UTC).is_err(), "{bad:?}");
        }
        Ok(())
    }

    #[test]
    fn durations_and_schedules_read_like_coders() -> anyhow::Result<()> {
        assert_eq!(parse_duration("2")?, Duration::minutes(2));
        assert_eq!(parse_duration("3h2m")?, Duration::minutes(182));
        assert!(parse_duration("soon").is_err());
        assert_eq!(human_duration(Duration::minutes(90)), "1h30m");
        assert_eq!(human_duration(Duration::seconds(5)), "5s");
        assert_eq!(
            humanize("CRON_TZ=Europe/Dublin 30 9 * * 1-5"),
            "9:30AM Mon-Fri (Europe/Dublin)"
        );
        assert_eq!(humanize("0 17 * * *"), "5:00PM daily (UTC)");
        let at = "2027-03-28T08:30:00Z".parse::<DateTime<Utc>>()?;
        let dublin: Tz = "Europe/Dublin".parse().map_err(anyhow::Error::msg)?;
        assert_eq!(
            when(at, dublin, at - Duration::hours(18)),
            "2027-03-28 09:30 IST (in 18h)"
        );
        Ok(())
    }
}
