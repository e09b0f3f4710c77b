//! Coder's rules for user secrets: names usable as one path segment, environment variable
//! names that are POSIX identifiers outside the names the agent and the shell rely on, file
//! paths under `~/` or `/`, values of at most 24 KiB.

use codersdk::ValidationError;
use codersdk::usersecrets::{CreateUserSecretRequest, UpdateUserSecretRequest};

use crate::domain;

pub(super) const MAX_SECRETS_PER_USER: usize = 50;
const MAX_VALUE_BYTES: usize = 24 * 1024;
const MAX_ENV_NAME_BYTES: usize = 256;
const MAX_FILE_PATH_BYTES: usize = 4096;

/// Variables the workspace's shells, tools and agent depend on.
const RESERVED_ENV_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "USER",
    "LOGNAME",
    "PWD",
    "OLDPWD",
    "LANG",
    "TERM",
    "IFS",
    "CDPATH",
    "ENV",
    "BASH_ENV",
    "TMPDIR",
    "TMP",
    "TEMP",
    "HOSTNAME",
    "SSH_AUTH_SOCK",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "SSH_TTY",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "VSCODE_PROXY_URI",
    "CS_DISABLE_GETTING_STARTED_OVERRIDE",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
];
/// Whole families: git's (the agent sets several), locales, the dynamic linkers'.
const RESERVED_ENV_PREFIXES: &[&str] = &["GIT_", "LC_", "LD_", "DYLD_"];

fn name(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("Name is required.".into());
    }
    if s.trim() != s {
        return Err("Name must not have leading or trailing whitespace.".into());
    }
    if s.contains(['/', '?', '#']) {
        return Err("Name must not contain /, ?, or #.".into());
    }
    Ok(())
}

fn value(s: &str) -> Result<(), String> {
    if s.contains('\0') {
        return Err("secret value must not contain null bytes".into());
    }
    if s.len() > MAX_VALUE_BYTES {
        return Err(format!(
            "secret value must not exceed {MAX_VALUE_BYTES} bytes"
        ));
    }
    Ok(())
}

fn env_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    if s.len() > MAX_ENV_NAME_BYTES {
        return Err(format!(
            "environment variable name must not exceed {MAX_ENV_NAME_BYTES} bytes"
        ));
    }
    let mut chars = s.chars();
    let posix = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !posix {
        return Err(
            "must start with a letter or underscore, followed by letters, digits, or underscores"
                .into(),
        );
    }
    let upper = s.to_ascii_uppercase();
    if RESERVED_ENV_NAMES.contains(&upper.as_str()) {
        return Err(format!("{upper} is a reserved environment variable name"));
    }
    if upper == "CODER" || upper.starts_with("CODER_") {
        return Err(
            "environment variable names starting with CODER_ are reserved for internal use".into(),
        );
    }
    if let Some(prefix) = RESERVED_ENV_PREFIXES
        .iter()
        .find(|p| upper.starts_with(**p))
    {
        return Err(format!(
            "environment variables starting with {prefix} are reserved"
        ));
    }
    Ok(())
}

fn file_path(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    if !s.starts_with("~/") && !s.starts_with('/') {
        return Err("file path must start with ~/ or /".into());
    }
    if s.contains('\0') {
        return Err("file path must not contain null bytes".into());
    }
    if s.len() > MAX_FILE_PATH_BYTES {
        return Err(format!(
            "file path must not exceed {MAX_FILE_PATH_BYTES} bytes"
        ));
    }
    Ok(())
}

fn collect(checks: Vec<(&str, Result<(), String>)>) -> Result<(), domain::Error> {
    let validations: Vec<ValidationError> = checks
        .into_iter()
        .filter_map(|(field, result)| {
            result.err().map(|detail| ValidationError {
                field: field.into(),
                detail,
            })
        })
        .collect();
    if validations.is_empty() {
        Ok(())
    } else {
        Err(domain::Error::Validation(validations))
    }
}

pub(super) fn check_create(req: &CreateUserSecretRequest) -> Result<(), domain::Error> {
    let value = if req.value.is_empty() {
        Err("Value is required.".into())
    } else {
        value(&req.value)
    };
    collect(vec![
        ("name", name(&req.name)),
        ("value", value),
        ("env_name", env_name(&req.env_name)),
        ("file_path", file_path(&req.file_path)),
    ])
}

pub(super) fn check_update(req: &UpdateUserSecretRequest) -> Result<(), domain::Error> {
    if req.value.is_none()
        && req.description.is_none()
        && req.env_name.is_none()
        && req.file_path.is_none()
    {
        return Err(domain::Error::BadRequest {
            message: "At least one field must be provided.".into(),
            detail: String::new(),
        });
    }
    let skip = || Ok(());
    collect(vec![
        ("value", req.value.as_deref().map_or_else(skip, value)),
        (
            "env_name",
            req.env_name.as_deref().map_or_else(skip, env_name),
        ),
        (
            "file_path",
            req.file_path.as_deref().map_or_else(skip, file_path),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_follow_coders_rules() {
        for ok in ["", "GITHUB_TOKEN", "_x1", "my_token"] {
            assert_eq!(env_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "1ABC",
            "A-B",
            "PATH",
            "path",
            "CODER",
            "CODER_X",
            "coder_agent_token",
            "GIT_X",
            "LD_PRELOAD",
            "LC_ALL",
            "DYLD_X",
        ] {
            assert!(env_name(bad).is_err(), "{bad}");
        }
        assert!(env_name(&"A".repeat(257)).is_err());
    }

    #[test]
    fn names_paths_and_values() {
        assert!(name("").is_err() && name(" x").is_err() && name("a/b").is_err());
        assert_eq!(name("my token"), Ok(()));
        assert_eq!(file_path("~/.ssh/id_rsa"), Ok(()));
        assert_eq!(file_path("/etc/x"), Ok(()));
        assert!(file_path("relative").is_err());
        assert!(value(&"v".repeat(MAX_VALUE_BYTES + 1)).is_err());
        assert!(value("a\0b").is_err());
        let empty = CreateUserSecretRequest {
            name: "x".into(),
            ..CreateUserSecretRequest::default()
        };
        assert!(matches!(
            check_create(&empty),
            Err(domain::Error::Validation(v)) if v.len() == 1 && v[0].field == "value"
        ));
        assert!(matches!(
            check_update(&UpdateUserSecretRequest::default()),
            Err(domain::Error::BadRequest { .. })
        ));
    }
}
