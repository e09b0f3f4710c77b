//! The providers as configured: Coder's `CODER_EXTERNAL_AUTH_<n>_<KEY>` variables, numbered
//! from 0 without gaps, with Coder's defaults for each known provider type. Every mistake
//! refuses startup naming the variable: a provider that half works is found by its users in
//! the middle of a `git push`.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use url::Url;

const PREFIX: &str = "CODER_EXTERNAL_AUTH_";

const KEYS: &[&str] = &[
    "ID",
    "TYPE",
    "CLIENT_ID",
    "CLIENT_SECRET",
    "AUTH_URL",
    "TOKEN_URL",
    "VALIDATE_URL",
    "REVOKE_URL",
    "REGEX",
    "SCOPES",
    "EXTRA_TOKEN_KEYS",
    "DEVICE_FLOW",
    "DEVICE_CODE_URL",
    "APP_INSTALL_URL",
    "APP_INSTALLATIONS_URL",
    "NO_REFRESH",
    "DISPLAY_NAME",
    "DISPLAY_ICON",
    "PKCE_METHODS",
    "MCP_URL",
    "MCP_TOOL_ALLOW_REGEX",
    "MCP_TOOL_DENY_REGEX",
    "API_BASE_URL",
];

/// One provider, defaults applied.
#[derive(Clone)]
pub struct ProviderSettings {
    pub id: String,
    /// Coder's provider type (`github`, `gitlab`, …) or the id of a custom one.
    pub r#type: String,
    pub client_id: String,
    pub client_secret: String,
    pub auth_url: Url,
    pub token_url: Url,
    pub validate_url: Option<Url>,
    pub revoke_url: Option<Url>,
    /// Which git remote URLs the provider's tokens are for.
    pub regex: Regex,
    pub scopes: Vec<String>,
    pub extra_token_keys: Vec<String>,
    pub device_flow: bool,
    pub device_code_url: Option<Url>,
    pub app_install_url: String,
    pub no_refresh: bool,
    pub display_name: String,
    pub display_icon: String,
    /// Send a PKCE challenge (S256) unless `PKCE_METHODS=none`.
    pub pkce: bool,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("id", &self.id)
            .field("type", &self.r#type)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("auth_url", &self.auth_url.as_str())
            .field("regex", &self.regex.as_str())
            .finish_non_exhaustive()
    }
}

/// A configuration mistake, naming the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct ConfigError {
    pub variable: String,
    pub problem: String,
}

fn error(variable: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        variable: variable.into(),
        problem: problem.into(),
    }
}

/// Coder's defaults for a known provider type.
struct Defaults {
    auth_url: &'static str,
    token_url: &'static str,
    validate_url: &'static str,
    revoke_url: &'static str,
    device_code_url: &'static str,
    regex: &'static str,
    scopes: &'static [&'static str],
    display_name: &'static str,
    display_icon: &'static str,
    /// Whether the provider takes a PKCE challenge (Coder's per-type default).
    pkce: bool,
}

fn defaults(kind: &str) -> Option<Defaults> {
    Some(match kind {
        "github" => Defaults {
            auth_url: "https://github.com/login/oauth/authorize",
            token_url: "https://github.com/login/oauth/access_token",
            validate_url: "https://api.github.com/user",
            revoke_url: "",
            device_code_url: "https://github.com/login/device/code",
            regex: r"^(https?://)?github\.com(/.*)?$",
            scopes: &["repo", "workflow"],
            display_name: "GitHub",
            display_icon: "/icon/github.svg",
            pkce: true,
        },
        "gitlab" => Defaults {
            auth_url: "https://gitlab.com/oauth/authorize",
            token_url: "https://gitlab.com/oauth/token",
            validate_url: "https://gitlab.com/oauth/token/info",
            revoke_url: "https://gitlab.com/oauth/revoke",
            device_code_url: "",
            regex: r"^(https?://)?gitlab\.com(/.*)?$",
            scopes: &["write_repository"],
            display_name: "GitLab",
            display_icon: "/icon/gitlab.svg",
            pkce: true,
        },
        "bitbucket-cloud" => Defaults {
            auth_url: "https://bitbucket.org/site/oauth2/authorize",
            token_url: "https://bitbucket.org/site/oauth2/access_token",
            validate_url: "https://api.bitbucket.org/2.0/user",
            revoke_url: "",
            device_code_url: "",
            regex: r"^(https?://)?bitbucket\.org(/.*)?$",
            scopes: &["account", "repository:write"],
            display_name: "BitBucket",
            display_icon: "/icon/bitbucket.svg",
            pkce: false,
        },
        "bitbucket-server" => Defaults {
            auth_url: "",
            token_url: "",
            validate_url: "",
            revoke_url: "",
            device_code_url: "",
            regex: "",
            scopes: &["PUBLIC_REPOS", "REPO_READ", "REPO_WRITE"],
            display_name: "Bitbucket Server",
            display_icon: "/icon/bitbucket.svg",
            pkce: false,
        },
        "azure-devops" => Defaults {
            auth_url: "https://app.vssps.visualstudio.com/oauth2/authorize",
            token_url: "https://app.vssps.visualstudio.com/oauth2/token",
            validate_url: "",
            revoke_url: "",
            device_code_url: "",
            regex: r"^(https?://)?dev\.azure\.com(/.*)?$",
            scopes: &["vso.code_write"],
            display_name: "Azure DevOps",
            display_icon: "/icon/azure-devops.svg",
            pkce: false,
        },
        "gitea" => Defaults {
            auth_url: "https://gitea.com/login/oauth/authorize",
            token_url: "https://gitea.com/login/oauth/access_token",
            validate_url: "https://gitea.com/login/oauth/userinfo",
            revoke_url: "",
            device_code_url: "",
            regex: r"^(https?://)?gitea\.com(/.*)?$",
            scopes: &["read:repository", "write:repository", "read:user"],
            display_name: "Gitea",
            display_icon: "/icon/gitea.svg",
            pkce: true,
        },
        _ => return None,
    })
}

/// The providers configured in `vars` (the process environment, in production).
pub fn from_env(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<ProviderSettings>, ConfigError> {
    let mut numbered: BTreeMap<usize, BTreeMap<String, String>> = BTreeMap::new();
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        // CODER_EXTERNAL_AUTH_CONFIG and the like are not provider variables.
        let Some((index, key)) = rest.split_once('_') else {
            continue;
        };
        let Ok(index) = index.parse::<usize>() else {
            continue;
        };
        if !KEYS.contains(&key) {
            return Err(error(
                name.clone(),
                format!("unknown setting {key:?} (known: {})", KEYS.join(", ")),
            ));
        }
        numbered
            .entry(index)
            .or_default()
            .insert(key.to_string(), value);
    }
    for (expected, index) in numbered.keys().enumerate() {
        if *index != expected {
            return Err(error(
                format!("{PREFIX}{index}_*"),
                format!(
                    "providers are numbered from 0 without gaps, and {PREFIX}{expected}_* is missing"
                ),
            ));
        }
    }
    let mut ids = BTreeSet::new();
    let mut providers = Vec::new();
    for (index, values) in numbered {
        let provider = one(index, &values)?;
        if !ids.insert(provider.id.clone()) {
            return Err(error(
                format!("{PREFIX}{index}_ID"),
                format!("the id {:?} is used by another provider", provider.id),
            ));
        }
        providers.push(provider);
    }
    Ok(providers)
}

fn one(index: usize, values: &BTreeMap<String, String>) -> Result<ProviderSettings, ConfigError> {
    let var = |key: &str| format!("{PREFIX}{index}_{key}");
    let get = |key: &str| {
        values
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let boolean = |key: &str| -> Result<bool, ConfigError> {
        match get(key).as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("false" | "0" | "f" | "no") => Ok(false),
            Some("true" | "1" | "t" | "yes") => Ok(true),
            Some(other) => Err(error(
                var(key),
                format!("{other:?} is not a boolean (true or false)"),
            )),
        }
    };
    let kind = get("TYPE").unwrap_or_default();
    let id = get("ID").unwrap_or_else(|| kind.clone());
    if id.is_empty() {
        return Err(error(var("ID"), "a provider needs an ID or a TYPE"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(error(
            var("ID"),
            format!(
                "{id:?} may hold only letters, digits, '-' and '_' (it names an environment variable in builds)"
            ),
        ));
    }
    let kind = if kind.is_empty() { id.clone() } else { kind };
    let client_id = get("CLIENT_ID").ok_or_else(|| error(var("CLIENT_ID"), "is required"))?;
    let known = defaults(&kind);
    let url = |key: &str, default: &str| -> Result<Option<Url>, ConfigError> {
        match get(key) {
            Some(value) => Url::parse(&value)
                .map(Some)
                .map_err(|e| error(var(key), format!("{value:?} is not a URL: {e}"))),
            None if default.is_empty() => Ok(None),
            None => Ok(Url::parse(default).ok()),
        }
    };
    let pick = |f: fn(&Defaults) -> &'static str| known.as_ref().map(f).unwrap_or_default();
    let auth_url = url("AUTH_URL", pick(|d| d.auth_url))?.ok_or_else(|| {
        error(
            var("AUTH_URL"),
            format!("is required for the type {kind:?}"),
        )
    })?;
    // A self-hosted instance of a known type (GitLab, Gitea, GitHub Enterprise): its other
    // endpoints and the remotes it serves are on the host of its authorization URL.
    let default_host = Url::parse(pick(|d| d.auth_url))
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned));
    let own_host = auth_url.host_str().unwrap_or_default().to_string();
    let rehost = |default: &str| -> String {
        match &default_host {
            Some(host) if !default.is_empty() && *host != own_host => {
                default.replace(host.as_str(), &own_host)
            }
            _ => default.to_string(),
        }
    };
    let token_url = url("TOKEN_URL", &rehost(pick(|d| d.token_url)))?.ok_or_else(|| {
        error(
            var("TOKEN_URL"),
            format!("is required for the type {kind:?}"),
        )
    })?;
    let validate_url = url("VALIDATE_URL", &rehost(pick(|d| d.validate_url)))?;
    let revoke_url = url("REVOKE_URL", &rehost(pick(|d| d.revoke_url)))?;
    let device_code_url = url("DEVICE_CODE_URL", &rehost(pick(|d| d.device_code_url)))?;
    let device_flow = boolean("DEVICE_FLOW")?;
    if device_flow && device_code_url.is_none() {
        return Err(error(
            var("DEVICE_CODE_URL"),
            "is required when DEVICE_FLOW is true",
        ));
    }
    let regex_source = match get("REGEX") {
        Some(regex) => regex,
        None if default_host.as_deref() == Some(own_host.as_str()) && known.is_some() => {
            pick(|d| d.regex).to_string()
        }
        None => format!(r"^(https?://)?{}(/.*)?$", regex::escape(&own_host)),
    };
    let regex = Regex::new(&regex_source).map_err(|e| {
        error(
            var("REGEX"),
            format!("{regex_source:?} is not a valid regex: {e}"),
        )
    })?;
    let list = |key: &str| -> Vec<String> {
        get(key)
            .map(|v| {
                v.split([' ', ','])
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut scopes = list("SCOPES");
    if scopes.is_empty() && !values.contains_key("SCOPES") {
        scopes = known
            .as_ref()
            .map(|d| d.scopes.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
    }
    let pkce = match get("PKCE_METHODS").as_deref() {
        None => known.as_ref().is_none_or(|d| d.pkce),
        Some("S256") => true,
        Some("none") => false,
        Some(other) => {
            return Err(error(
                var("PKCE_METHODS"),
                format!("{other:?} is not supported (S256 or none)"),
            ));
        }
    };
    Ok(ProviderSettings {
        display_name: get("DISPLAY_NAME")
            .or_else(|| known.as_ref().map(|d| d.display_name.to_string()))
            .unwrap_or_else(|| id.clone()),
        display_icon: get("DISPLAY_ICON")
            .or_else(|| known.as_ref().map(|d| d.display_icon.to_string()))
            .unwrap_or_else(|| "/emojis/1f511.png".into()),
        id,
        r#type: kind,
        client_id,
        client_secret: get("CLIENT_SECRET").unwrap_or_default(),
        auth_url,
        token_url,
        validate_url,
        revoke_url,
        regex,
        scopes,
        extra_token_keys: list("EXTRA_TOKEN_KEYS"),
        device_flow,
        device_code_url,
        app_install_url: get("APP_INSTALL_URL").unwrap_or_default(),
        no_refresh: boolean("NO_REFRESH")?,
        pkce,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<Vec<ProviderSettings>, ConfigError> {
        from_env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn a_known_type_takes_coders_defaults_and_its_type_as_id() {
        let p = parse(&[
            ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
            ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "abc"),
        ])
        .expect("valid");
        assert_eq!(p[0].id, "github");
        assert_eq!(p[0].display_name, "GitHub");
        assert!(p[0].regex.is_match("https://github.com/coder/coder.git"));
        assert!(!p[0].regex.is_match("https://gitlab.com/x/y.git"));
        assert_eq!(p[0].scopes, ["repo", "workflow"]);
        assert!(p[0].pkce);
    }

    #[test]
    fn a_self_hosted_instance_is_matched_on_its_own_host() {
        let p = parse(&[
            ("CODER_EXTERNAL_AUTH_0_TYPE", "gitlab"),
            ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "abc"),
            (
                "CODER_EXTERNAL_AUTH_0_AUTH_URL",
                "https://git.corp.example/oauth/authorize",
            ),
        ])
        .expect("valid");
        assert_eq!(
            p[0].token_url.as_str(),
            "https://git.corp.example/oauth/token"
        );
        assert!(
            p[0].regex
                .is_match("https://git.corp.example/team/repo.git")
        );
        assert!(!p[0].regex.is_match("https://gitlab.com/team/repo.git"));
    }

    #[test]
    fn mistakes_name_their_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("CODER_EXTERNAL_AUTH_0_TYPE", "github")],
                "CODER_EXTERNAL_AUTH_0_CLIENT_ID",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_2_TYPE", "gitlab"),
                    ("CODER_EXTERNAL_AUTH_2_CLIENT_ID", "b"),
                ],
                "CODER_EXTERNAL_AUTH_2_*",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_1_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_1_CLIENT_ID", "b"),
                ],
                "CODER_EXTERNAL_AUTH_1_ID",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_0_REGEX", "(unclosed"),
                ],
                "CODER_EXTERNAL_AUTH_0_REGEX",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "gitlab"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_0_DEVICE_FLOW", "true"),
                ],
                "CODER_EXTERNAL_AUTH_0_DEVICE_CODE_URL",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_0_NO_REFRESH", "sometimes"),
                ],
                "CODER_EXTERNAL_AUTH_0_NO_REFRESH",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_ID", "in-house"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                ],
                "CODER_EXTERNAL_AUTH_0_AUTH_URL",
            ),
            (
                &[
                    ("CODER_EXTERNAL_AUTH_0_TYPE", "github"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_ID", "a"),
                    ("CODER_EXTERNAL_AUTH_0_CLIENT_SECERT", "typo"),
                ],
                "CODER_EXTERNAL_AUTH_0_CLIENT_SECERT",
            ),
        ];
        for (vars, variable) in cases {
            let e = parse(vars).expect_err("refused");
            assert_eq!(e.variable, *variable, "{e}");
        }
    }
}
