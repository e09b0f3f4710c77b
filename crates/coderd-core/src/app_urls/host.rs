//! App hosts: the deployment's wildcard (`*.apps.example.com`, or `*--apps.example.com` when
//! only one level of wildcard DNS is available) and the names under it,
//! `<slug|port[s]>--<agent>--<workspace>--<user>`. Pure string work, so it is tested
//! exhaustively here (including a property test) and the proxy trusts what it returns.

use std::fmt;

/// The separator between the parts of an app's label. Coder's names never contain it (a name
/// is alphanumerics with single hyphens), so splitting on it is unambiguous.
const SEP: &str = "--";

/// The deployment's wildcard access URL's host: everything after the `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wildcard {
    /// Lowercase, e.g. `.apps.example.com` or `--apps.example.com`.
    suffix: String,
    /// The port app URLs are built with (matching ignores it: a proxy in front may map ports).
    port: Option<u16>,
    scheme: String,
}

/// Why a wildcard access URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid wildcard access URL {value:?}: {reason}")]
pub struct WildcardError {
    value: String,
    reason: &'static str,
}

impl Wildcard {
    /// Parses `*.apps.example.com`, `*--apps.example.com:8080`, optionally with a scheme
    /// (`https://*.apps.example.com`; the access URL's scheme otherwise).
    pub fn parse(value: &str, default_scheme: &str) -> Result<Self, WildcardError> {
        let err = |reason| WildcardError {
            value: value.to_string(),
            reason,
        };
        let (scheme, rest) = match value.split_once("://") {
            Some((s, rest)) if s == "http" || s == "https" => (s, rest),
            Some(_) => return Err(err("the scheme must be http or https")),
            None => (default_scheme, value),
        };
        let rest = rest.trim_end_matches('/');
        let host = rest
            .strip_prefix('*')
            .ok_or_else(|| err("it must start with '*'"))?;
        let (suffix, port) = match host.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse().map_err(|_| err("the port is invalid"))?)),
            None => (host, None),
        };
        let domain = suffix
            .strip_prefix('.')
            .or_else(|| suffix.strip_prefix('-'))
            .ok_or_else(|| err("'*' must be followed by '.' or '-'"))?;
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        if domain.is_empty() || !suffix.chars().all(valid) || suffix.contains('*') {
            return Err(err("the host after '*' is not a valid domain"));
        }
        if !domain.contains('.') && !suffix.starts_with('-') && domain != "localhost" {
            return Err(err(
                "'*' must stand for a label under a domain, not a top-level one",
            ));
        }
        Ok(Self {
            suffix: suffix.to_ascii_lowercase(),
            port,
            scheme: scheme.to_string(),
        })
    }

    /// The label `*` stands for in `host` (a `Host` header, port ignored), if `host` is under
    /// this wildcard.
    pub fn label<'a>(&self, host: &'a str) -> Option<&'a str> {
        let name = strip_port(host);
        let cut = name.len().checked_sub(self.suffix.len())?;
        if !name.is_char_boundary(cut) || !name[cut..].eq_ignore_ascii_case(&self.suffix) {
            return None;
        }
        let label = &name[..cut];
        (!label.is_empty() && !label.contains('.')).then_some(label)
    }

    /// The host (with port, if the wildcard has one) of the label `label`.
    pub fn host(&self, label: &str) -> String {
        match self.port {
            Some(p) => format!("{label}{}:{p}", self.suffix),
            None => format!("{label}{}", self.suffix),
        }
    }

    /// The origin of an app host, e.g. `https://code--main--dev--alice.apps.example.com`.
    pub fn origin(&self, label: &str) -> String {
        format!("{}://{}", self.scheme, self.host(label))
    }

    pub fn scheme(&self) -> &str {
        &self.scheme
    }
}

impl fmt::Display for Wildcard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host("*"))
    }
}

/// A host without its `:port` (IPv6 literals are never app hosts, so brackets need no care).
fn strip_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// What an app label names first: an app by slug, or a port (`8080`, or `8443s` when the
/// workspace side speaks https).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppName {
    Slug(String),
    Port { port: u16, https: bool },
}

impl fmt::Display for AppName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Slug(s) => f.write_str(s),
            Self::Port { port, https } => write!(f, "{port}{}", if *https { "s" } else { "" }),
        }
    }
}

/// A parsed app label: `<app>--<agent>--<workspace>--<user>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppHost {
    pub app: AppName,
    pub agent: String,
    pub workspace: String,
    pub user: String,
}

impl AppHost {
    /// Parses a label (lowercased: hosts are case-insensitive). `None` when it is not four
    /// valid names joined by `--`.
    pub fn parse(label: &str) -> Option<Self> {
        let label = label.to_ascii_lowercase();
        let parts: Vec<&str> = label.split(SEP).collect();
        let [app, agent, workspace, user] = parts.as_slice() else {
            return None;
        };
        if ![app, agent, workspace, user].iter().all(|p| valid_name(p)) {
            return None;
        }
        Some(Self {
            app: parse_app(app),
            agent: agent.to_string(),
            workspace: workspace.to_string(),
            user: user.to_string(),
        })
    }

    /// The label this host is built from (the inverse of [`AppHost::parse`]).
    pub fn label(&self) -> String {
        format!(
            "{}{SEP}{}{SEP}{}{SEP}{}",
            self.app, self.agent, self.workspace, self.user
        )
    }
}

/// A port when the app part is one (digits, optionally `s`), a slug otherwise. Port 0 is not a
/// port anyone can listen on, so `0` stays a slug.
fn parse_app(app: &str) -> AppName {
    let (digits, https) = match app.strip_suffix('s') {
        Some(d) => (d, true),
        None => (app, false),
    };
    // A leading zero would make two labels for one port.
    if !digits.is_empty()
        && !digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Ok(port) = digits.parse::<u16>()
    {
        return AppName::Port { port, https };
    }
    AppName::Slug(app.to_string())
}

/// A name as Coder allows in hosts: lowercase alphanumerics and single inner hyphens (usernames
/// may also hold `_`, which no host may, so those users' apps need path URLs).
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains(SEP)
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wildcards_parse_as_coder_accepts_them() {
        let w = Wildcard::parse("*.apps.example.com", "https").expect("test input is valid");
        assert_eq!(
            w.label("code--main--dev--alice.apps.example.com"),
            Some("code--main--dev--alice")
        );
        assert_eq!(
            w.label("CODE--main--dev--alice.Apps.Example.com:443"),
            Some("CODE--main--dev--alice")
        );
        assert_eq!(w.label("a.b.apps.example.com"), None);
        assert_eq!(w.label("apps.example.com"), None);
        assert_eq!(w.label(".apps.example.com"), None);
        assert_eq!(w.label("evilapps.example.com"), None);
        assert_eq!(w.origin("x"), "https://x.apps.example.com");

        let w = Wildcard::parse("http://*--apps.example.com:8080", "https")
            .expect("test input is valid");
        assert_eq!(w.label("x--a--w--u--apps.example.com"), Some("x--a--w--u"));
        assert_eq!(w.host("x"), "x--apps.example.com:8080");
        assert_eq!(w.to_string(), "*--apps.example.com:8080");

        for bad in [
            "apps.example.com",
            "*",
            "*.com",
            "ftp://*.a.b",
            "*x.example.com",
            "*.a.*.b",
        ] {
            assert!(Wildcard::parse(bad, "http").is_err(), "{bad}");
        }
        assert!(Wildcard::parse("*.localhost", "http").is_ok());
    }

    #[test]
    fn labels_name_an_app_or_a_port() {
        let h = AppHost::parse("code-server--main--dev--alice").expect("test input is valid");
        assert_eq!(h.app, AppName::Slug("code-server".into()));
        assert_eq!(
            (h.agent.as_str(), h.workspace.as_str(), h.user.as_str()),
            ("main", "dev", "alice")
        );
        assert_eq!(
            AppHost::parse("8080--main--dev--alice")
                .expect("test input is valid")
                .app,
            AppName::Port {
                port: 8080,
                https: false
            }
        );
        assert_eq!(
            AppHost::parse("8443s--main--dev--alice")
                .expect("test input is valid")
                .app,
            AppName::Port {
                port: 8443,
                https: true
            }
        );
        assert_eq!(
            AppHost::parse("99999--main--dev--alice")
                .expect("test input is valid")
                .app,
            AppName::Slug("99999".into())
        );
        for bad in [
            "a--b--c",
            "a--b--c--d--e",
            "a---b--c--d",
            "-a--b--c--d",
            "a--b--c--d_e",
            "a--b----d",
            "",
        ] {
            assert_eq!(AppHost::parse(bad), None, "{bad}");
        }
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9]|-[a-z0-9]){0,20}"
    }

    proptest! {
        #[test]
        fn a_label_parses_back_to_what_built_it(
            app in name(), agent in name(), ws in name(), user in name(), port in 1u16.., https: bool, by_port: bool,
        ) {
            let app = if by_port { AppName::Port { port, https } } else { parse_app(&app) };
            let host = AppHost { app, agent, workspace: ws, user };
            let w = Wildcard::parse("*.apps.example.com", "http").expect("test input is valid");
            let full = w.host(&host.label());
            prop_assert_eq!(w.label(&full).and_then(AppHost::parse), Some(host));
        }

        #[test]
        fn any_host_is_parsed_without_panicking(host in "\\PC{0,80}") {
            let w = Wildcard::parse("*--apps.example.com", "http").expect("test input is valid");
            if let Some(label) = w.label(&host) {
                prop_assert!(!label.contains('.'));
                if let Some(parsed) = AppHost::parse(label) {
                    prop_assert_eq!(parsed.label(), label.to_ascii_lowercase());
                }
            }
        }
    }
}
