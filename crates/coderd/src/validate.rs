//! Field rules shared by handlers: names, emails, passwords. Each returns the detail to show.

const MAX_NAME_LEN: usize = 32;

/// Usernames and organization names: letters, digits and single inner hyphens, 1–32
/// characters (they appear in URLs and hostnames).
pub fn name(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > MAX_NAME_LEN {
        return Err(format!("must be 1 to {MAX_NAME_LEN} characters"));
    }
    if s == "me" {
        return Err("\"me\" is reserved".into());
    }
    let ok = s
        .split('-')
        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err("may contain only letters, digits and single hyphens between them".into())
    }
}

/// A display name: free text without surrounding whitespace.
pub fn display_name(s: &str) -> Result<(), String> {
    if s.chars().count() > 128 {
        return Err("must be at most 128 characters".into());
    }
    if s.trim() != s {
        return Err("must not start or end with whitespace".into());
    }
    Ok(())
}

pub fn email(s: &str) -> Result<(), String> {
    let valid = s.len() <= 320
        && !s.chars().any(char::is_whitespace)
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

pub fn password(s: &str) -> Result<(), String> {
    let len = s.chars().count();
    if len < 8 {
        return Err("must be at least 8 characters".into());
    }
    if len > 128 {
        return Err("must be at most 128 characters".into());
    }
    if s.trim().is_empty() {
        return Err("must not be only whitespace".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "ünï",
            &"x".repeat(33),
        ] {
            assert!(name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn emails() {
        assert!(email("a@b.c").is_ok());
        for bad in ["", "a", "@b", "a@", "a b@c", "a@b@c", "a@.b", "a@b."] {
            assert!(email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords() {
        assert!(password("long enough").is_ok());
        assert!(password("short").is_err());
        assert!(password("        ").is_err());
        assert!(password(&"p".repeat(129)).is_err());
    }
}
