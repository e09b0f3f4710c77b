//! The limits of every value a caller may write: field rules (names, display names, text,
//! durations, enumerations), each returning the detail to show. `coderd_http::requests` applies
//! them to the API's request bodies, and the OpenAPI document publishes them (`openapi::limits`),
//! so what is documented is what is enforced.
//!
//! The numbers are Coder's (`codersdk/name.go` and the `validate:` tags of its request types)
//! where Coder has one; the few of our own say so.

/// Names of users, organizations, templates, workspaces (Coder's `NameValid`).
pub const NAME_MAX: usize = 32;
pub const NAME_PATTERN: &str = "^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$";
/// Words a name may not be: Coder's route words, and our `me` (a `{user}` path segment).
const RESERVED_NAMES: &[&str] = &["me", "new", "create"];
/// Template version names (Coder's `TemplateVersionNameValid`).
pub const VERSION_NAME_MAX: usize = 64;
pub const VERSION_NAME_PATTERN: &str = "^(?:[a-zA-Z0-9]+(?:[_.-][a-zA-Z0-9]+)*)?$";
/// Display names of templates and organizations (Coder's `DisplayNameValid`).
pub const DISPLAY_NAME_MAX: usize = 64;
/// A user's real name (Coder's `UserRealNameValid`).
pub const REAL_NAME_MAX: usize = 128;
/// A template's description: Coder's `validate:"lt=128"`, counted in characters.
pub const TEMPLATE_DESCRIPTION_MAX: usize = 127;
/// A template version's message: Coder's `validate:"lt=1048577"`.
pub const VERSION_MESSAGE_MAX: usize = 1 << 20;
/// Ours: Coder sets none, but icons are URLs shown in every list of templates and organizations.
pub const ICON_MAX: usize = 2048;
/// Ours: Coder sets none; long enough for any schedule (`CRON_TZ=<zone> m h dom mon dow`).
pub const SCHEDULE_MAX: usize = 256;
/// API token names (ours: Coder stores them in a 64-character column).
pub const TOKEN_NAME_MAX: usize = 64;
/// Emails (RFC 5321's limit on a forward path).
pub const EMAIL_MAX: usize = 320;
pub const PASSWORD_MIN: usize = 8;
pub const PASSWORD_MAX: usize = 128;

const MINUTE_MS: i64 = 60_000;
/// A workspace's time until shutdown: at least a minute, at most 30 days (Coder's `ttlMin`,
/// `ttlMax`); 0 or absent means none.
pub const WORKSPACE_TTL_MIN_MS: i64 = MINUTE_MS;
pub const TTL_MAX_MS: i64 = 30 * 24 * 60 * MINUTE_MS;

/// Text PostgreSQL can store: anything but NUL (`invalid byte sequence for encoding "UTF8":
/// 0x00`). The extractors apply it to every string of every request.
pub fn storable(s: &str) -> Result<(), String> {
    if s.contains('\0') {
        Err("must not contain NUL characters".into())
    } else {
        Ok(())
    }
}

fn at_most(s: &str, max: usize) -> Result<(), String> {
    if s.chars().count() > max {
        Err(format!("must be at most {max} characters"))
    } else {
        Ok(())
    }
}

/// One line of text: no control characters (newlines, escapes, DEL) at all.
fn single_line(s: &str) -> Result<(), String> {
    if s.chars().any(char::is_control) {
        Err("must not contain control characters".into())
    } else {
        Ok(())
    }
}

/// Refuses a value with leading or trailing whitespace.
pub fn trimmed(s: &str) -> Result<(), String> {
    if s.trim() != s {
        Err("must not start or end with whitespace".into())
    } else {
        Ok(())
    }
}

/// Names: letters, digits and single inner hyphens, 1–32 characters (they appear in URLs and
/// hostnames).
pub fn name(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > NAME_MAX {
        return Err(format!("must be 1 to {NAME_MAX} characters"));
    }
    if RESERVED_NAMES.contains(&s) {
        return Err(format!("{s:?} is reserved"));
    }
    if alphanumeric_parts(s, &['-']) {
        Ok(())
    } else {
        Err("may contain only letters, digits and single hyphens between them".into())
    }
}

/// Letters and digits, in parts separated by single `separators`.
fn alphanumeric_parts(s: &str, separators: &[char]) -> bool {
    s.split(separators)
        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Template version names: letters and digits separated by single `_`, `.` or `-`; empty
/// means "pick one".
pub fn version_name(s: &str) -> Result<(), String> {
    if s.len() > VERSION_NAME_MAX {
        return Err(format!("must be at most {VERSION_NAME_MAX} characters"));
    }
    if s.is_empty() || alphanumeric_parts(s, &['_', '.', '-']) {
        Ok(())
    } else {
        Err("may contain only letters, digits and single _ . - between them".into())
    }
}

/// Display names of templates and organizations: one line without surrounding whitespace;
/// empty means "use the name".
pub fn display_name(s: &str) -> Result<(), String> {
    at_most(s, DISPLAY_NAME_MAX)?;
    single_line(s)?;
    trimmed(s)
}

/// A user's real name: one line without surrounding whitespace.
pub fn real_name(s: &str) -> Result<(), String> {
    at_most(s, REAL_NAME_MAX)?;
    single_line(s)?;
    trimmed(s)
}

/// Free text (descriptions, messages): line breaks and tabs allowed, other control characters
/// not.
pub fn text(s: &str, max: usize) -> Result<(), String> {
    at_most(s, max)?;
    if s.chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err("must not contain control characters other than line breaks and tabs".into());
    }
    Ok(())
}

/// A provisioner daemon's or provisioner key's name.
pub fn daemon_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain spaces or control characters".into());
    }
    Ok(())
}

/// A single-line value of bounded length (icons, schedules, token names).
pub fn line(s: &str, max: usize) -> Result<(), String> {
    at_most(s, max)?;
    single_line(s)
}

pub fn email(s: &str) -> Result<(), String> {
    let valid = s.len() <= EMAIL_MAX
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        && s.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        });
    if valid {
        Ok(())
    } else {
        Err("must be a valid email address".into())
    }
}

/// The password policy: [`password`]'s length rules, and not the account's own username or
/// email (or its local part) — the first guesses of anyone attacking that account. Compared
/// case-insensitively; identifiers shorter than four characters are not checked, or a
/// username like "al" would forbid every password containing those letters.
pub fn password_for(s: &str, username: &str, email: &str) -> Result<(), String> {
    password(s)?;
    let lowered = s.to_lowercase();
    let local = email.split('@').next().unwrap_or_default();
    for (what, ident) in [("username", username), ("email", email), ("email", local)] {
        let ident = ident.trim().to_lowercase();
        if ident.chars().count() >= 4 && lowered.contains(&ident) {
            return Err(format!("must not contain your {what}"));
        }
    }
    Ok(())
}

pub fn password(s: &str) -> Result<(), String> {
    let len = s.chars().count();
    if len < PASSWORD_MIN {
        return Err(format!("must be at least {PASSWORD_MIN} characters"));
    }
    if len > PASSWORD_MAX {
        return Err(format!("must be at most {PASSWORD_MAX} characters"));
    }
    if s.trim().is_empty() {
        return Err("must not be only whitespace".into());
    }
    Ok(())
}

/// A workspace's TTL in milliseconds: none (0), or a minute to 30 days.
pub fn workspace_ttl_ms(ms: i64) -> Result<(), String> {
    match ms {
        0 => Ok(()),
        ..0 => Err("must not be negative".into()),
        1..WORKSPACE_TTL_MIN_MS => Err("time until shutdown must be at least one minute".into()),
        ms if ms > TTL_MAX_MS => Err("time until shutdown must be at most 30 days".into()),
        _ => Ok(()),
    }
}

/// A template's default TTL: 0 (none) up to the longest TTL a workspace may have, since new
/// workspaces take it as theirs.
pub fn default_ttl_ms(ms: i64) -> Result<(), String> {
    if ms < 0 {
        Err("must not be negative".into())
    } else if ms > TTL_MAX_MS {
        Err("must be at most 30 days (2592000000 ms)".into())
    } else {
        Ok(())
    }
}

/// Ours, where Coder sets none: failure, dormancy and deletion thresholds up to ten years keep
/// every deadline computable.
pub const THRESHOLD_MAX_MS: i64 = 3650 * 24 * 60 * MINUTE_MS;
/// Coder's limit on the weeks between required restarts.
pub const AUTOSTOP_WEEKS_MAX: i64 = coderd_schedule::autostop::MAX_REQUIREMENT_WEEKS;
/// The sharing levels of workspace ports and apps, narrowest first.
pub const CORS_BEHAVIORS: &[&str] = &["simple", "passthru"];
pub const PORT_SHARE_LEVELS: &[&str] = &["owner", "authenticated", "organization", "public"];

/// A template's activity bump: 0 (activity does not bump) up to the longest TTL.
pub fn activity_bump_ms(ms: i64) -> Result<(), String> {
    default_ttl_ms(ms)
}

/// A failure, dormancy or deletion threshold: 0 (off), or at least a minute — Coder refuses
/// less, so that a tiny number sent by mistake cannot stop, make dormant or delete workspaces
/// almost at once.
pub fn threshold_ms(ms: i64) -> Result<(), String> {
    match ms {
        0 => Ok(()),
        ..0 => Err("must not be negative".into()),
        1..MINUTE_MS => Err("Value must be at least one minute.".into()),
        ms if ms > THRESHOLD_MAX_MS => {
            Err(format!("must be at most 3650 days ({THRESHOLD_MAX_MS} ms)"))
        }
        _ => Ok(()),
    }
}

/// Day names (Coder's: `monday` … `sunday`, any case).
pub fn weekdays(days: &[String]) -> Result<(), String> {
    coderd_schedule::days_to_bitmap(days).map(drop)
}

/// Weeks between required restarts: 0 and 1 mean every week.
pub fn autostop_weeks(weeks: i64) -> Result<(), String> {
    if weeks < 0 {
        Err("must not be negative".into())
    } else if weeks > AUTOSTOP_WEEKS_MAX {
        Err(format!("must be at most {AUTOSTOP_WEEKS_MAX}"))
    } else {
        Ok(())
    }
}

/// An autostart schedule: `CRON_TZ=<zone> <minute> <hour> * * <days of week>`.
pub fn schedule(s: &str) -> Result<(), String> {
    line(s, SCHEDULE_MAX)?;
    coderd_schedule::Schedule::weekly(s)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// One of `allowed`.
pub fn one_of(s: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&s) {
        Ok(())
    } else {
        let quoted: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        Err(format!("must be one of {}", quoted.join(", ")))
    }
}

/// The automatic-update policies a workspace may have.
pub const AUTOMATIC_UPDATES: &[&str] = &["always", "never"];
/// The reasons a client may give for a build (`BuildReason::requestable`): the lifecycle
/// executor's own reasons never come from a request.
pub const BUILD_REASONS: &[&str] = &[
    "dashboard",
    "cli",
    "ssh_connection",
    "vscode_connection",
    "jetbrains_connection",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_fields() {
        for ok in [0, MINUTE_MS, THRESHOLD_MAX_MS] {
            assert!(threshold_ms(ok).is_ok(), "{ok}");
        }
        for bad in [-1, 1, 59_999, THRESHOLD_MAX_MS + 1, i64::MAX, i64::MIN] {
            assert!(threshold_ms(bad).is_err(), "{bad}");
        }
        assert!(weekdays(&["Monday".into(), "sunday".into()]).is_ok());
        assert!(weekdays(&["mon".into()]).is_err());
        assert!(autostop_weeks(16).is_ok() && autostop_weeks(17).is_err());
        assert!(schedule("CRON_TZ=Europe/Dublin 30 9 * * 1-5").is_ok());
        assert!(schedule("30 9 1 * *").is_err());
        assert!(schedule(&format!("CRON_TZ=UTC 0 9 * * *{}", " ".repeat(300))).is_err());
    }

    #[test]
    fn names() {
        for ok in ["a", "alice", "Alice-2", "a-b-c", &"x".repeat(32)] {
            assert!(name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "a_b",
            "a b",
            "me",
            "new",
            "create",
            "ünï",
            "a\0",
            &"x".repeat(33),
        ] {
            assert!(name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn name_pattern_matches_the_rule() {
        let pattern = regex::Regex::new(NAME_PATTERN).expect("pattern");
        for s in ["a", "a-b", "A1-b2-c3", "a--b", "-a", "a_b", "a b", ""] {
            assert_eq!(pattern.is_match(s), name(s).is_ok(), "{s:?}");
        }
        let pattern = regex::Regex::new(VERSION_NAME_PATTERN).expect("pattern");
        for s in ["", "v1", "v1.2_3-x", "v1..2", ".v", "v.", "v 1", "ü"] {
            assert_eq!(pattern.is_match(s), version_name(s).is_ok(), "{s:?}");
        }
    }

    #[test]
    fn display_names_and_text() {
        assert!(display_name("").is_ok());
        assert!(display_name("My Template").is_ok());
        assert!(display_name(" lead").is_err());
        assert!(display_name("a\u{1b}[31m").is_err());
        assert!(display_name(&"x".repeat(65)).is_err());
        assert!(real_name(&"x".repeat(128)).is_ok());
        assert!(real_name(&"x".repeat(129)).is_err());
        assert!(text("two\nlines\tand tab", 127).is_ok());
        assert!(text("bell\u{7}", 127).is_err());
        assert!(text(&"é".repeat(127), 127).is_ok());
        assert!(text(&"é".repeat(128), 127).is_err());
    }

    #[test]
    fn emails() {
        assert!(email("a@b.c").is_ok());
        for bad in [
            "",
            "a",
            "@b",
            "a@",
            "a b@c",
            "a@b@c",
            "a@.b",
            "a@b.",
            "a\u{0}b@c",
        ] {
            assert!(email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords() {
        assert!(password("long enough").is_ok());
        assert!(password("short").is_err());
        assert!(password("        ").is_err());
        assert!(password(&"p".repeat(129)).is_err());
        assert!(password_for("correct horse", "alice", "alice@corp.example").is_ok());
        for bad in [
            "xAlice2024!",
            "alice@corp.example",
            "ALICE@CORP.EXAMPLE1",
            "bob-the-builder",
        ] {
            let err = password_for(bad, "alice", "bob-the-builder@corp.example").expect_err(bad);
            assert!(err.contains("username") || err.contains("email"), "{err}");
        }
        // Short identifiers are not matched inside passwords.
        assert!(password_for("alpine meadow", "al", "al@x.io").is_ok());
        assert!(password_for("short", "alice", "a@x.io").is_err());
    }

    #[test]
    fn ttls() {
        for ok in [0, 60_000, TTL_MAX_MS] {
            assert!(workspace_ttl_ms(ok).is_ok(), "{ok}");
        }
        for bad in [-1, 1, 59_999, TTL_MAX_MS + 1, i64::MAX, i64::MIN] {
            assert!(workspace_ttl_ms(bad).is_err(), "{bad}");
        }
        assert!(default_ttl_ms(0).is_ok());
        assert!(default_ttl_ms(TTL_MAX_MS).is_ok());
        assert!(default_ttl_ms(i64::MAX).is_err());
        assert!(default_ttl_ms(-1).is_err());
    }
}
