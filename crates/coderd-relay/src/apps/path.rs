//! Path-based app URLs: `/@<user>/<workspace>[.<agent>]/apps/<app>/<rest>`. They live on the
//! dashboard's origin, which is why they are owner-only unless the operator opts in (an app
//! there could read anything the dashboard's origin can).

use super::host::AppName;

/// A path that names an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathApp<'a> {
    pub user: &'a str,
    pub workspace: &'a str,
    pub agent: Option<&'a str>,
    pub app: &'a str,
    /// What follows the app's name, from its `/`; `None` when the path stops at the name (the
    /// browser must be redirected to the trailing slash, or relative links would break).
    pub rest: Option<&'a str>,
}

impl PathApp<'_> {
    /// The app part: path apps name apps by slug only (Coder serves ports on subdomains).
    pub fn app_name(&self) -> AppName {
        AppName::Slug(self.app.to_ascii_lowercase())
    }
}

/// Parses an app path; `None` for every other path (the dashboard's and the API's).
pub fn parse(path: &str) -> Option<PathApp<'_>> {
    let rest = path.strip_prefix("/@")?;
    let mut parts = rest.splitn(4, '/');
    let (user, ws, apps, tail) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if apps != "apps" || user.is_empty() || ws.is_empty() {
        return None;
    }
    let (workspace, agent) = match ws.split_once('.') {
        Some((w, a)) => (w, Some(a)),
        None => (ws, None),
    };
    let (app, rest) = match tail.find('/') {
        Some(i) => (&tail[..i], Some(&tail[i..])),
        None => (tail, None),
    };
    if app.is_empty() || workspace.is_empty() || agent == Some("") {
        return None;
    }
    Some(PathApp {
        user,
        workspace,
        agent,
        app,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_paths_parse_and_others_do_not() {
        let p = parse("/@alice/dev.main/apps/code/a/b").expect("test input is valid");
        assert_eq!(
            (p.user, p.workspace, p.agent, p.app, p.rest),
            ("alice", "dev", Some("main"), "code", Some("/a/b"))
        );
        let p = parse("/@alice/dev/apps/code").expect("test input is valid");
        assert_eq!((p.agent, p.rest), (None, None));
        assert_eq!(
            parse("/@alice/dev/apps/code/")
                .expect("test input is valid")
                .rest,
            Some("/")
        );
        for other in [
            "/api/v2/users",
            "/@alice/dev",
            "/@alice/dev/terminal",
            "/@/dev/apps/x/",
            "/@a/dev./apps/x/",
            "/@a/dev/apps//",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }
}
