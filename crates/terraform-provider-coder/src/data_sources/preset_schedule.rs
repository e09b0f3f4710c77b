//! The rules Coder's provider applies to prebuild schedules of a `coder_workspace_preset`:
//! each `cron` is a 5-field expression whose minute field is `*` (a schedule covers whole
//! hours) and parses as a standard cron expression; `timezone` is an IANA zone; and the
//! schedules of one preset must not overlap. Messages are the Go provider's.

use std::collections::BTreeSet;
use std::path::Path;

/// Bounds of the five fields (minute, hour, day of month, month, day of week).
const FIELDS: [(u32, u32); 5] = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)];
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// What is wrong with a schedule's `cron`, if anything.
pub(crate) fn cron_problem(spec: &str) -> Option<String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(
            "cron spec failed validation: cron specification should consist of 5 fields".into(),
        );
    }
    if fields[0] != "*" {
        return Some("cron spec failed validation: minute field should be *".into());
    }
    for (at, (field, (min, max))) in fields.iter().zip(FIELDS).enumerate() {
        let names: &[&str] = match at {
            3 => &MONTHS,
            4 => &DAYS,
            _ => &[],
        };
        for part in field.split(',') {
            if let Err(why) = check_range(part, min, max, names) {
                return Some(format!("failed to parse cron spec: {why}"));
            }
        }
    }
    None
}

/// One comma-separated part of a field, checked as robfig/cron (the Go library) does.
fn check_range(part: &str, min: u32, max: u32, names: &[&str]) -> Result<(), String> {
    let slashes: Vec<&str> = part.split('/').collect();
    let hyphens: Vec<&str> = slashes[0].split('-').collect();
    let (start, end) = if slashes[0] == "*" || slashes[0] == "?" {
        (min, max)
    } else {
        let start = number_or_name(hyphens[0], names)?;
        let end = match hyphens.len() {
            1 => start,
            2 => number_or_name(hyphens[1], names)?,
            _ => return Err(format!("too many hyphens: {part}")),
        };
        (start, end)
    };
    match slashes.len() {
        1 => {}
        2 => {
            let step = number(slashes[1])?;
            if step == 0 {
                return Err(format!("step of range should be a positive number: {part}"));
            }
        }
        _ => return Err(format!("too many slashes: {part}")),
    }
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {part}"
        ));
    }
    if end > max {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {part}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {part}"
        ));
    }
    Ok(())
}

fn number_or_name(text: &str, names: &[&str]) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(at) = names.iter().position(|n| *n == lower) {
        // Months count from 1, days of the week from 0 (Sunday).
        let offset = u32::from(names.len() == MONTHS.len());
        return Ok(u32::try_from(at).unwrap_or(u32::MAX) + offset);
    }
    number(text)
}

fn number(text: &str) -> Result<u32, String> {
    match text.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("negative number ({n}) not allowed: {text}")),
        Ok(n) => u32::try_from(n).map_err(|_| atoi_error(text, "value out of range")),
        Err(_) => Err(format!(
            "failed to parse int from {text}: {}",
            atoi_error(text, "invalid syntax")
        )),
    }
}

fn atoi_error(text: &str, why: &str) -> String {
    format!("strconv.Atoi: parsing {text:?}: {why}")
}

/// Go's `time.LoadLocation` as the provider uses it: the zone must exist in the system's
/// time zone database.
pub(crate) fn timezone_problem(zone: &str) -> Option<String> {
    let fail = |why: &str| Some(format!("failed to load timezone {zone:?}: {why}"));
    if zone.is_empty() || zone == "UTC" || zone == "Local" {
        return None;
    }
    if zone.contains("..") || zone.starts_with('/') || zone.starts_with('\\') {
        return fail("time: invalid location name");
    }
    let roots = [
        "/usr/share/zoneinfo",
        "/usr/share/lib/zoneinfo",
        "/usr/lib/locale/TZ",
        "/etc/zoneinfo",
    ];
    let found = roots
        .iter()
        .any(|root| is_tzif(&Path::new(root).join(zone)));
    if found {
        None
    } else {
        fail(&format!("unknown time zone {zone}"))
    }
}

fn is_tzif(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"TZif")
}

/// Whether any two schedules overlap; the error the Go provider reports for the first pair
/// that does (or for the first schedule its overlap check cannot read).
pub(crate) fn overlap_problem(schedules: &[String]) -> Option<String> {
    for (i, first) in schedules.iter().enumerate() {
        for second in &schedules[i + 1..] {
            match overlaps(first, second) {
                Err(why) => return Some(format!("invalid schedule: {why}")),
                Ok(true) => return Some(format!("schedules overlap: {first} and {second}")),
                Ok(false) => {}
            }
        }
    }
    None
}

fn overlaps(a: &str, b: &str) -> Result<bool, String> {
    let (fa, fb): (Vec<&str>, Vec<&str>) = (
        a.split_whitespace().collect(),
        b.split_whitespace().collect(),
    );
    for (spec, fields) in [(a, &fa), (b, &fb)] {
        if fields.len() != 5 {
            return Err(format!(
                "schedule {spec:?} has {} fields, expected 5 fields (minute hour day-of-month month day-of-week)",
                fields.len()
            ));
        }
    }
    let months = intersect(fa[3], fb[3], 12).map_err(|e| format!("invalid month range: {e}"))?;
    if !months {
        return Ok(false);
    }
    let days =
        days_overlap(fa[2], fa[4], fb[2], fb[4]).map_err(|e| format!("invalid day range: {e}"))?;
    if !days {
        return Ok(false);
    }
    intersect(fa[1], fb[1], 23).map_err(|e| format!("invalid hour range: {e}"))
}

/// A day matches when its day of month or its day of week does, so a `*` on one side makes
/// only the other field matter.
fn days_overlap(dom1: &str, dow1: &str, dom2: &str, dow2: &str) -> Result<bool, String> {
    if dom1 == "*" || dom2 == "*" {
        return intersect(dow1, dow2, 6);
    }
    if dow1 == "*" || dow2 == "*" {
        return intersect(dom1, dom2, 31);
    }
    Ok(intersect(dom1, dom2, 31)? || intersect(dow1, dow2, 6)?)
}

fn intersect(a: &str, b: &str, max: u32) -> Result<bool, String> {
    let (a, b) = (values(a, max)?, values(b, max)?);
    Ok(!a.is_disjoint(&b))
}

/// The overlap check's own reading of a field: `*`, numbers and ranges, from 0 to `max`.
fn values(field: &str, max: u32) -> Result<BTreeSet<u32>, String> {
    if field == "*" {
        return Ok((0..=max).collect());
    }
    let mut out = BTreeSet::new();
    for part in field.split(',') {
        if let Some((start, end)) = part.split_once('-') {
            let start: i64 = start.parse().map_err(|_| {
                format!(
                    "invalid start value in range: {}",
                    atoi_error(start, "invalid syntax")
                )
            })?;
            let end_text = end.split('-').next().unwrap_or(end);
            let end: i64 = end_text.parse().map_err(|_| {
                format!(
                    "invalid end value in range: {}",
                    atoi_error(end_text, "invalid syntax")
                )
            })?;
            if start < 0 || end > i64::from(max) || start > end {
                return Err(format!(
                    "invalid range {start}-{end}: values must be between 0 and {max}"
                ));
            }
            out.extend((start..=end).filter_map(|v| u32::try_from(v).ok()));
        } else {
            let value: i64 = part
                .parse()
                .map_err(|_| format!("invalid value: {}", atoi_error(part, "invalid syntax")))?;
            if value < 0 || value > i64::from(max) {
                return Err(format!(
                    "invalid value {value}: must be between 0 and {max}"
                ));
            }
            out.extend(u32::try_from(value).ok());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_must_cover_whole_hours_and_parse() {
        for ok in ["* 8-18 * * 1-5", "* 0,12 1 jan-mar *", "* */2 * * mon-fri"] {
            assert_eq!(cron_problem(ok), None, "{ok}");
        }
        for (bad, message) in [
            (
                "* * * *",
                "cron spec failed validation: cron specification should consist of 5 fields",
            ),
            (
                "0 8 * * *",
                "cron spec failed validation: minute field should be *",
            ),
            (
                "* 8-25 * * *",
                "failed to parse cron spec: end of range (25) above maximum (23): 8-25",
            ),
            (
                "* x * * *",
                "failed to parse cron spec: failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            (
                "* * 0 * *",
                "failed to parse cron spec: beginning of range (0) below minimum (1): 0",
            ),
        ] {
            assert_eq!(cron_problem(bad).as_deref(), Some(message), "{bad}");
        }
    }

    #[test]
    fn overlapping_schedules_are_reported() {
        let specs = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            overlap_problem(&specs(&["* 8-12 * * 1-5", "* 13-18 * * 1-5"])),
            None
        );
        assert_eq!(
            overlap_problem(&specs(&["* 8-18 * * 1-5", "* 8-18 * * 0,6"])),
            None
        );
        assert_eq!(
            overlap_problem(&specs(&["* 8-12 * * 1-5", "* 12-18 * * 5"])).as_deref(),
            Some("schedules overlap: * 8-12 * * 1-5 and * 12-18 * * 5")
        );
        assert_eq!(
            overlap_problem(&specs(&["* 8-12 * * 1-5", "* 30 * * 1"])).as_deref(),
            Some(
                "invalid schedule: invalid hour range: invalid value 30: must be between 0 and 23"
            )
        );
    }

    #[test]
    fn timezones_come_from_the_zone_database() {
        assert_eq!(timezone_problem("UTC"), None);
        assert_eq!(
            timezone_problem("Mars/Olympus").as_deref(),
            Some(r#"failed to load timezone "Mars/Olympus": unknown time zone Mars/Olympus"#)
        );
        assert_eq!(
            timezone_problem("../etc/passwd").as_deref(),
            Some(r#"failed to load timezone "../etc/passwd": time: invalid location name"#)
        );
    }
}
