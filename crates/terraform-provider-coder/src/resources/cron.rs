//! Validation of `coder_script.cron`: the 6-field format Coder's agent schedules with
//! (seconds first, day of week optional) plus `@hourly`-style descriptors.

const FIELDS: [(&str, u32, u32); 6] = [
    ("seconds", 0, 59),
    ("minutes", 0, 59),
    ("hours", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 6),
];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// What is wrong with `expr`, if anything.
pub(crate) fn problem(expr: &str) -> Option<String> {
    let invalid = |why: String| Some(format!("{expr} is not a valid cron expression: {why}"));
    if let Some(descriptor) = expr.strip_prefix('@') {
        return match descriptor {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => None,
            d if d.starts_with("every ")
                && valid_duration(d.trim_start_matches("every ").trim()) =>
            {
                None
            }
            _ => invalid(format!("unrecognized descriptor: {expr}")),
        };
    }
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if !(5..=6).contains(&fields.len()) {
        return invalid(format!(
            "expected 5 to 6 fields, found {}: {expr}",
            fields.len()
        ));
    }
    for (field, (name, min, max)) in fields.iter().zip(FIELDS) {
        let names: &[&str] = match name {
            "month" => &MONTHS,
            "day of week" => &DAYS,
            _ => &[],
        };
        if let Err(why) = check_field(field, min, max, names) {
            return invalid(format!("{name}: {why}"));
        }
    }
    None
}

/// A warning for the common mistake of writing a Unix 5-field expression (minutes first).
pub(crate) fn five_field_warning(expr: &str) -> Option<String> {
    (expr.split_whitespace().count() == 5 && problem(expr).is_none()).then(|| {
        format!(
            "The cron expression '{expr}' appears to be in Unix 5-field format. Coder uses \
             6-field format (seconds minutes hours day month day-of-week). Consider prefixing \
             with '0 ' to run at the start of each minute: '0 {expr}'"
        )
    })
}

fn check_field(field: &str, min: u32, max: u32, names: &[&str]) -> Result<(), String> {
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        if let Some(step) = step
            && step.parse::<u32>().map_or(true, |s| s == 0)
        {
            return Err(format!("invalid step {step:?}"));
        }
        if range == "*" || range == "?" {
            continue;
        }
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (value(lo, names)?, value(hi, names)?),
            None => {
                let v = value(range, names)?;
                (v, v)
            }
        };
        if lo < min || hi > max || lo > hi {
            return Err(format!("{range:?} is outside {min}-{max}"));
        }
    }
    Ok(())
}

fn value(text: &str, names: &[&str]) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(pos) = names.iter().position(|n| *n == lower) {
        // Months are named from 1, days of the week from 0 (Sunday).
        let offset = u32::from(names.len() == MONTHS.len());
        return Ok(u32::try_from(pos).unwrap_or(u32::MAX) + offset);
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not a number"))
}

fn valid_duration(text: &str) -> bool {
    let mut rest = text;
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .find(|u| rest.starts_with(**u))
        else {
            return false;
        };
        rest = &rest[unit.len()..];
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_six_and_five_field_expressions_and_descriptors() {
        for ok in [
            "0 0 22 * * *",
            "0 */5 * * * *",
            "30 0 9 * * 1-5",
            "*/5 * * * *",
            "0 0 1 1 jan-mar ?",
            "0 0 9 * * mon-fri",
            "@daily",
            "@every 1h30m",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn rejects_malformed_expressions() {
        for bad in [
            "",
            "* * *",
            "61 * * * * *",
            "* * * * * * *",
            "0 0 0 0 * *",
            "@sometimes",
            "@every soon",
            "*/0 * * * *",
        ] {
            assert!(problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn warns_about_unix_format() {
        assert!(five_field_warning("*/5 * * * *").is_some());
        assert!(five_field_warning("0 */5 * * * *").is_none());
    }
}
