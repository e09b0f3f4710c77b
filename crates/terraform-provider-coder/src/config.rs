//! The provider block (`provider "coder" { url = ... }`) and the context every resource and
//! data source gets once Terraform has configured the provider.

use url::Url;

use crate::diag::{AttrPath, Diagnostics};
use crate::env::Env;
use crate::schema::{Attribute, Block, Schema};
use crate::value::Value;

/// Coder's provider falls back to this when neither `url` nor `CODER_AGENT_URL` is set.
const FALLBACK_URL: &str = "https://mydeployment.coder.com";

pub(crate) fn provider_schema() -> Schema {
    Schema {
        version: 0,
        block: Block::new("The Coder provider: describes workspaces to a Coder deployment.").attr(
            Attribute::string("url")
                .describe("The URL of the Coder deployment. Defaults to `CODER_AGENT_URL`."),
        ),
    }
}

/// The Coder deployment's URL as the workspace's agents should reach it.
#[derive(Clone, Debug)]
pub(crate) struct AccessUrl {
    raw: String,
    parsed: Url,
}

impl AccessUrl {
    pub(crate) fn parse(raw: &str) -> Result<Self, url::ParseError> {
        Ok(Self {
            raw: raw.to_owned(),
            parsed: Url::parse(raw)?,
        })
    }

    /// The URL as configured (Coder shows it verbatim as `coder_workspace.access_url`).
    pub(crate) fn as_str(&self) -> &str {
        &self.raw
    }

    /// Scheme and authority only, with a trailing slash: what agent scripts download from.
    pub(crate) fn root(&self) -> String {
        self.parsed
            .join("/")
            .map_or_else(|_| self.raw.clone(), String::from)
    }

    /// The explicit port, else the scheme's default (80, or 443 for https).
    pub(crate) fn port(&self) -> i64 {
        match self.parsed.port() {
            Some(port) => i64::from(port),
            None if self.parsed.scheme() == "https" => 443,
            None => 80,
        }
    }
}

/// Everything a resource or data source may read besides its own configuration.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    pub(crate) env: Env,
    pub(crate) access_url: AccessUrl,
}

impl Ctx {
    /// Builds the context from the provider block, as `ConfigureProvider` does.
    pub(crate) fn configure(config: &Value, env: Env, diags: &mut Diagnostics) -> Option<Self> {
        let raw = match config.get("url") {
            Value::String(url) => url.clone(),
            Value::Unknown(_) => {
                diags.error_at(
                    AttrPath::attr("url"),
                    "The provider's url must be known when planning",
                    "Coder reads the access URL while planning; set it from a known value.",
                );
                return None;
            }
            _ => env
                .non_empty("CODER_AGENT_URL")
                .unwrap_or(FALLBACK_URL)
                .to_owned(),
        };
        if raw.is_empty() {
            diags.error(
                format!("CODER_AGENT_URL must not be empty; got {raw:?}"),
                "",
            );
            return None;
        }
        match AccessUrl::parse(&raw) {
            Ok(access_url) => Some(Self { env, access_url }),
            Err(err) => {
                diags.error_at(
                    AttrPath::attr("url"),
                    format!("invalid url {raw:?}: {err}"),
                    "",
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    fn configure(url: Value, env: Env) -> (Option<Ctx>, Diagnostics) {
        let mut diags = Diagnostics::default();
        let ctx = Ctx::configure(&object([("url", url)]), env, &mut diags);
        (ctx, diags)
    }

    #[test]
    fn url_comes_from_config_then_env_then_fallback() {
        let env = Env::from_pairs([("CODER_AGENT_URL", "http://env.example:3000")]);
        let (ctx, _) = configure(Value::from("https://cfg.example"), env.clone());
        assert_eq!(
            ctx.map(|c| c.access_url.as_str().to_owned()),
            Some("https://cfg.example".into())
        );
        let (ctx, _) = configure(Value::Null, env);
        assert_eq!(
            ctx.map(|c| c.access_url.as_str().to_owned()),
            Some("http://env.example:3000".into())
        );
        let (ctx, _) = configure(Value::Null, Env::default());
        assert_eq!(
            ctx.map(|c| c.access_url.as_str().to_owned()),
            Some(FALLBACK_URL.into())
        );
    }

    #[test]
    fn invalid_or_unknown_urls_are_errors() {
        let (ctx, diags) = configure(Value::from("not a url"), Env::default());
        assert!(ctx.is_none() && diags.has_errors());
        let (ctx, diags) = configure(Value::unknown(), Env::default());
        assert!(ctx.is_none() && diags.has_errors());
    }

    #[test]
    fn root_and_port_follow_the_scheme() {
        let url = AccessUrl::parse("https://coder.example/some/path").ok();
        assert_eq!(
            url.as_ref().map(AccessUrl::root),
            Some("https://coder.example/".into())
        );
        assert_eq!(url.map(|u| u.port()), Some(443));
        let url = AccessUrl::parse("http://127.0.0.1:3000").ok();
        assert_eq!(url.map(|u| u.port()), Some(3000));
        assert_eq!(
            AccessUrl::parse("http://x").ok().map(|u| u.port()),
            Some(80)
        );
    }
}
