//! The URL check Coder's provider applies to icons and preset icons: a value is accepted
//! exactly when Go's `net/url.Parse` accepts it, and refused with that function's message.
//!
//! `url.Parse` is lenient (a bare path or word is a relative URL); it refuses control
//! characters, a scheme-less value whose first path segment holds a colon (`:x`, `a b:c`),
//! malformed percent escapes, bad ports and characters that cannot appear in a host name.

/// Go's error for `raw`, formatted as `parse "<raw>": <reason>`, or `None` when it parses.
pub(crate) fn problem(raw: &str) -> Option<String> {
    let (before_fragment, fragment) = match raw.split_once('#') {
        Some((url, fragment)) => (url, Some(fragment)),
        None => (raw, None),
    };
    if let Err(reason) = parse(before_fragment) {
        return Some(format!("parse {before_fragment:?}: {reason}"));
    }
    if let Some(fragment) = fragment
        && let Err(reason) = unescape(fragment, Mode::Other)
    {
        return Some(format!("parse {raw:?}: {reason}"));
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Host,
    Other,
}

fn parse(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_owned());
    }
    if raw == "*" {
        return Ok(());
    }
    let (scheme, rest) = split_scheme(raw)?;
    let rest = match rest.split_once('?') {
        Some((before, _query)) => before,
        None => rest,
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // An opaque URL such as `mailto:x`: nothing more is checked.
            return Ok(());
        }
        let first_segment = rest.split('/').next().unwrap_or_default();
        if first_segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".to_owned());
        }
    }
    let path = if rest.starts_with("//") && (!scheme.is_empty() || !rest.starts_with("///")) {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(at) => (&after[..at], &after[at..]),
            None => (after, ""),
        };
        check_authority(authority)?;
        path
    } else {
        rest
    };
    unescape(path, Mode::Other)
}

/// Splits off a scheme the way Go's `getScheme` does; a leading colon is an error.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".to_owned()),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn check_authority(authority: &str) -> Result<(), String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    check_host(host)?;
    if let Some(userinfo) = userinfo {
        let valid = userinfo.chars().all(|c| {
            c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii()
        });
        if !valid {
            return Err("net/url: invalid userinfo".to_owned());
        }
        unescape(userinfo, Mode::Other)?;
    }
    Ok(())
}

fn check_host(host: &str) -> Result<(), String> {
    let port = if host.starts_with('[') {
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".to_owned());
        };
        &host[close + 1..]
    } else {
        match host.rfind(':') {
            Some(at) => &host[at..],
            None => "",
        }
    };
    let valid_port =
        port.is_empty() || (port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit()));
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    unescape(host, Mode::Host)
}

/// Checks percent escapes (and, in a host, the characters allowed there).
fn unescape(text: &str, mode: Mode) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let valid = bytes.len() > i + 2
                    && bytes[i + 1].is_ascii_hexdigit()
                    && bytes[i + 2].is_ascii_hexdigit();
                let escape = &text[i..text.len().min(i + 3)];
                if !valid {
                    return Err(format!("invalid URL escape {escape:?}"));
                }
                // In a host, only escapes of bytes from 0x80 up (and %25) are meaningful.
                if mode == Mode::Host && bytes[i + 1] < b'8' && escape != "%25" {
                    return Err(format!("invalid URL escape {escape:?}"));
                }
                i += 3;
            }
            b if mode == Mode::Host && b < 0x80 && !host_byte_allowed(b) => {
                let bad = char::from(b);
                return Err(format!(
                    "invalid character {:?} in host name",
                    bad.to_string()
                ));
            }
            _ => i += 1,
        }
    }
    Ok(())
}

fn host_byte_allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_go_accepts() {
        for ok in [
            "",
            "/icon/code.svg",
            "code.svg",
            "https://example.com/icon.png",
            "https://example.com:8443/a%20b.png?x=1#top",
            "data:image/png;base64,AAAA",
            "/emojis/1f4bb.png",
            "file:///usr/share/icon.svg",
            "https://user:pa%20ss@example.com/",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn refuses_with_go_messages() {
        for (bad, message) in [
            (":nope", r#"parse ":nope": missing protocol scheme"#),
            (
                "a b:c/d",
                r#"parse "a b:c/d": first path segment in URL cannot contain colon"#,
            ),
            (
                "/icon/%zz.svg",
                r#"parse "/icon/%zz.svg": invalid URL escape "%zz""#,
            ),
            (
                "https://example.com:port/x",
                r#"parse "https://example.com:port/x": invalid port ":port" after host"#,
            ),
            (
                "https://exa mple.com/",
                r#"parse "https://exa mple.com/": invalid character " " in host name"#,
            ),
            (
                "/icon\n.svg",
                "parse \"/icon\\n.svg\": net/url: invalid control character in URL",
            ),
            ("/x#%g", r#"parse "/x#%g": invalid URL escape "%g""#),
        ] {
            assert_eq!(problem(bad).as_deref(), Some(message), "{bad}");
        }
    }
}
