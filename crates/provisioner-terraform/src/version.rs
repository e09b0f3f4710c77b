//! Which terraform a daemon runs: finding the binary and reading its version, so a missing or
//! too old terraform fails a job with a message that names the binary, instead of with whatever
//! an old terraform says about flags it does not know.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The oldest terraform the executor runs: `-json` plan/apply output, `terraform_data` and the
/// plugin protocol 6 features our provider uses are all older than this.
pub const MINIMUM_VERSION: Version = Version {
    major: 1,
    minor: 5,
    patch: 0,
};

/// A terraform release number; pre-release suffixes (`1.6.0-beta1`) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl std::str::FromStr for Version {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let core = raw.trim().trim_start_matches('v');
        let core = core.split(['-', '+']).next().unwrap_or(core);
        let mut parts = core.split('.').map(|p| p.parse::<u64>());
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Ok(major)), Some(Ok(minor)), patch, None) => Ok(Self {
                major,
                minor,
                patch: match patch {
                    Some(Ok(patch)) => patch,
                    None => 0,
                    Some(Err(_)) => return Err(format!("not a version: {raw:?}")),
                },
            }),
            _ => Err(format!("not a version: {raw:?}")),
        }
    }
}

/// The version `terraform version -json` reports. Terraform before 0.13 has no `-json` and
/// prints `Terraform v0.12.31`; that is read too, so it can be refused by number.
pub(crate) fn parse_version_output(stdout: &str) -> Result<Version, String> {
    #[derive(serde::Deserialize)]
    struct VersionJson {
        terraform_version: String,
    }
    if let Ok(parsed) = serde_json::from_str::<VersionJson>(stdout) {
        return parsed.terraform_version.parse();
    }
    let first = stdout.lines().next().unwrap_or_default().trim();
    match first.strip_prefix("Terraform ") {
        Some(version) => version.parse(),
        None => Err(format!(
            "unexpected output of `terraform version -json`: {:?}",
            truncate(stdout, 200)
        )),
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// Where `program` runs from: itself when it names a path, else the first executable file of
/// that name in `path_var` (the `PATH` terraform gets). `None` when there is no such file.
pub(crate) fn resolve(program: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return is_executable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        let v = |s: &str| s.parse::<Version>();
        assert_eq!(
            v("1.11.4"),
            Ok(Version {
                major: 1,
                minor: 11,
                patch: 4
            })
        );
        assert_eq!(v("v1.6.0-beta1").map(|v| v.to_string()), Ok("1.6.0".into()));
        assert_eq!(v("1.5").map(|v| v.to_string()), Ok("1.5.0".into()));
        assert!(v("1").is_err());
        assert!(v("1.x.0").is_err());
        assert!(v("1.2.3.4").is_err());
        assert!(v("1.4.7").is_ok_and(|v| v < MINIMUM_VERSION));
        assert!(v("1.10.0").is_ok_and(|v| v > MINIMUM_VERSION));
    }

    #[test]
    fn version_output_is_json_or_the_old_banner() {
        let json = r#"{"terraform_version":"1.11.4","platform":"linux_amd64","provider_selections":{},"terraform_outdated":false}"#;
        assert_eq!(
            parse_version_output(json).map(|v| v.to_string()),
            Ok("1.11.4".into())
        );
        assert_eq!(
            parse_version_output("Terraform v0.12.31\n\nYour version is out of date")
                .map(|v| v.to_string()),
            Ok("0.12.31".into())
        );
        let err = parse_version_output("something else").expect_err("not terraform");
        assert!(err.contains("something else"), "{err}");
    }

    #[test]
    fn programs_resolve_through_path() -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let exe = dir.path().join("tf");
        std::fs::write(&exe, "#!/bin/sh\n")?;
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "")?;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))?;
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()])
            .map_err(std::io::Error::other)?;
        assert_eq!(resolve(Path::new("tf"), Some(&path)), Some(exe.clone()));
        assert_eq!(resolve(Path::new("plain"), Some(&path)), None);
        assert_eq!(resolve(Path::new("tf"), None), None);
        assert_eq!(resolve(&exe, None), Some(exe));
        assert_eq!(resolve(&dir.path().join("missing"), Some(&path)), None);
        Ok(())
    }
}
