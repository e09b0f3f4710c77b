//! `coder_agent`: declares a workspace agent. Mints its id and auth token and renders the
//! bootstrap script the provisioner hands over as `CODER_AGENT_SCRIPT_<os>_<arch>`.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use crate::config::Ctx;
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::{Resource, fill_new_id};
use crate::schema::{Attribute, Block, Check, NestedBlock, Schema, Type, id_attribute};
use crate::value::Value;

pub(crate) struct Agent;

/// Coder's built-in apps shown when a template doesn't say otherwise (`display_apps` block
/// attributes default to these too).
const DISPLAY_APP_DEFAULTS: [(&str, bool, &str); 5] = [
    ("vscode", true, "Show the VS Code Desktop app."),
    ("vscode_insiders", false, "Show the VS Code Insiders app."),
    ("web_terminal", true, "Show the web terminal."),
    ("ssh_helper", true, "Show the SSH helper button."),
    (
        "port_forwarding_helper",
        true,
        "Show the port-forwarding helper button.",
    ),
];

/// The warnings of provider 2.17 for a `dir` other than the home directory.
const DIR_WARNINGS: [&str; 2] = [
    r#""dir" is deprecated and will be removed in a future release."#,
    r#"Setting "dir" to a value other than $HOME will break Coder Desktop file sync."#,
];

fn display_apps_block() -> NestedBlock {
    let mut block = Block::new("Which built-in apps to show in the agent bar.");
    for (name, default, description) in DISPLAY_APP_DEFAULTS {
        block = block.attr(Attribute::bool(name).default(default).describe(description));
    }
    NestedBlock::set("display_apps", block).max_items(1)
}

fn metadata_block() -> NestedBlock {
    NestedBlock::list(
        "metadata",
        Block::new("A value the agent computes by running a script periodically.")
            .attr(
                Attribute::string("key")
                    .required()
                    .describe("Unique key of the item."),
            )
            .attr(
                Attribute::string("display_name")
                    .zero_default()
                    .describe("Name shown in the UI."),
            )
            .attr(
                Attribute::string("script")
                    .required()
                    .describe("Script whose output is the value."),
            )
            .attr(
                Attribute::int("interval")
                    .required()
                    .describe("Seconds between runs."),
            )
            .attr(
                Attribute::int("timeout")
                    .zero_default()
                    .describe("Seconds the script may run."),
            )
            .attr(
                Attribute::int("order")
                    .zero_default()
                    .describe("Position in the UI, lowest first."),
            ),
    )
}

fn threshold() -> Attribute {
    Attribute::int("threshold")
        .required()
        .check(Check::IntBetween(0, 100))
        .describe("Usage in percent above which Coder alerts.")
}

fn resources_monitoring_block() -> NestedBlock {
    let memory = NestedBlock::set(
        "memory",
        Block::new("Memory usage monitoring.")
            .attr(
                Attribute::bool("enabled")
                    .required()
                    .describe("Monitor memory usage."),
            )
            .attr(threshold()),
    )
    .max_items(1);
    let volume = NestedBlock::set(
        "volume",
        Block::new("Usage monitoring of one volume.")
            .attr(
                Attribute::string("path")
                    .required()
                    .describe("Absolute path of the volume."),
            )
            .attr(
                Attribute::bool("enabled")
                    .required()
                    .describe("Monitor this volume."),
            )
            .attr(threshold()),
    );
    NestedBlock::set(
        "resources_monitoring",
        Block::new("Resource usage alerts for this agent.")
            .block(memory)
            .block(volume),
    )
    .max_items(1)
}

impl Resource for Agent {
    fn type_name(&self) -> &'static str {
        "coder_agent"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("A Coder agent running inside a workspace resource.")
            .attr(id_attribute("The agent's id."))
            .attr(
                Attribute::string("os")
                    .required()
                    .one_of(&["linux", "darwin", "windows"])
                    .describe("Operating system the agent runs on."),
            )
            .attr(
                Attribute::string("arch")
                    .required()
                    .one_of(&["amd64", "armv7", "arm64"])
                    .describe("CPU architecture the agent runs on."),
            )
            .attr(
                Attribute::string("auth")
                    .default("token")
                    .one_of(&[
                        "token",
                        "google-instance-identity",
                        "aws-instance-identity",
                        "azure-instance-identity",
                    ])
                    .describe("How the agent authenticates to Coder."),
            )
            .attr(
                Attribute::string("api_key_scope")
                    .default("all")
                    .one_of(&["all", "no_user_data"])
                    .describe("Which API routes the agent token may use."),
            )
            .attr(Attribute::string("dir").describe("Starting directory of shell sessions."))
            .attr(
                Attribute::typed("env", Type::Map(Box::new(Type::String)))
                    .describe("Environment variables set in the workspace."),
            )
            .attr(Attribute::string("startup_script").describe("Script run when the agent starts."))
            .attr(
                Attribute::string("shutdown_script").describe("Script run before the agent stops."),
            )
            .attr(
                Attribute::string("startup_script_behavior")
                    .default("non-blocking")
                    .one_of(&["blocking", "non-blocking"])
                    .describe(
                        "Whether the startup script must finish before the workspace is ready.",
                    ),
            )
            .attr(
                Attribute::int("connection_timeout")
                    .default(120)
                    .check(Check::IntAtLeast(0))
                    .describe(
                        "Seconds until an agent that never connects is marked timed out; 0 never.",
                    ),
            )
            .attr(
                Attribute::string("troubleshooting_url")
                    .describe("Troubleshooting documentation URL."),
            )
            .attr(
                Attribute::string("motd_file")
                    .describe("File shown as message of the day over SSH."),
            )
            .attr(
                Attribute::int("order").describe("Position of the agent in the UI, lowest first."),
            )
            .attr(
                Attribute::string("token")
                    .computed()
                    .sensitive()
                    .describe("Authenticates the agent: set it as `CODER_AGENT_TOKEN`."),
            )
            .attr(
                Attribute::string("init_script")
                    .computed()
                    .describe("Script that downloads and starts the agent on the instance."),
            )
            .block(metadata_block())
            .block(display_apps_block())
            .block(resources_monitoring_block())
            .all_force_new();
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(dir) = config.get("dir").as_str()
            && !matches!(dir, "" | "~" | "$HOME")
        {
            // Provider 2.17 warns: a starting directory other than home breaks Coder
            // Desktop's file sync, and the attribute is on its way out.
            for warning in DIR_WARNINGS {
                diags.warning_at(AttrPath::attr("dir"), warning, "");
            }
        }
        if let Some(items) = config.get("metadata").as_list() {
            let mut keys = HashSet::new();
            for item in items {
                if let Some(key) = item.get("key").as_str()
                    && !keys.insert(key)
                {
                    diags.error_at(
                        AttrPath::attr("metadata"),
                        format!("duplicate agent metadata key {key:?}"),
                        "",
                    );
                }
            }
        }
        let monitors = config
            .get("resources_monitoring")
            .as_list()
            .unwrap_or_default();
        for monitor in monitors {
            let volumes = monitor.get("volume").as_list().unwrap_or_default();
            let mut paths = HashSet::new();
            for volume in volumes {
                let Some(path) = volume.get("path").as_str() else {
                    continue;
                };
                let at = AttrPath::attr("resources_monitoring");
                if path.is_empty() {
                    diags.error_at(at, "volume path must not be empty", "");
                } else if !path.starts_with('/') {
                    diags.error_at(at, "volume path must be an absolute path", "");
                } else if !paths.insert(path) {
                    diags.error_at(at, format!("duplicate volume path {path:?}"), "");
                }
            }
        }
    }

    fn create(&self, ctx: &Ctx, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
        if state.get("token").is_unknown() {
            state.set("token", Value::from(agent_token(ctx)));
        }
        if state.get("init_script").is_unknown() {
            state.set("init_script", Value::from(init_script(ctx, state)));
        }
    }

    fn refresh(&self, ctx: &Ctx, state: &mut Value, _diags: &mut Diagnostics) {
        // Like Coder's provider: every refresh hands out a new token (or the prebuild's)
        // and re-renders the script from this build's environment.
        state.set("token", Value::from(agent_token(ctx)));
        let script = init_script(ctx, state);
        state.set("init_script", Value::from(script));
    }
}

/// A fresh random token, unless Coder passes the running agent's token on (claiming a
/// prebuilt workspace must not change it). Coder keys that variable by the SHA-256 of the
/// agent's id, which its provider always leaves empty for now.
fn agent_token(ctx: &Ctx) -> String {
    let var = format!(
        "CODER_RUNNING_WORKSPACE_AGENT_TOKEN_{}",
        hex::encode(Sha256::digest(b""))
    );
    match ctx.env.non_empty(&var) {
        Some(token) => token.to_owned(),
        None => uuid::Uuid::new_v4().to_string(),
    }
}

/// `CODER_AGENT_SCRIPT_<os>_<arch>` with `${ACCESS_URL}` and `${AUTH_TYPE}` filled in.
fn init_script(ctx: &Ctx, state: &Value) -> String {
    let os = state.get("os").as_str().unwrap_or_default();
    let arch = state.get("arch").as_str().unwrap_or_default();
    let auth = state.get("auth").as_str().unwrap_or_default();
    let template = ctx.env.or_empty(&format!("CODER_AGENT_SCRIPT_{os}_{arch}"));
    template
        .replace("${ACCESS_URL}", &ctx.access_url.root())
        .replace("${AUTH_TYPE}", auth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AccessUrl;
    use crate::env::Env;
    use crate::value::object;

    fn ctx(env: Env) -> Option<Ctx> {
        Some(Ctx {
            env,
            access_url: AccessUrl::parse("https://coder.example:8443/x").ok()?,
        })
    }

    #[test]
    fn init_script_substitutes_access_url_and_auth() {
        let env = Env::from_pairs([(
            "CODER_AGENT_SCRIPT_linux_amd64",
            "curl ${ACCESS_URL}bin --auth ${AUTH_TYPE}",
        )]);
        let state = object([
            ("os", Value::from("linux")),
            ("arch", Value::from("amd64")),
            ("auth", Value::from("token")),
        ]);
        let script = ctx(env).map(|c| init_script(&c, &state));
        assert_eq!(
            script.as_deref(),
            Some("curl https://coder.example:8443/bin --auth token")
        );
    }

    #[test]
    fn token_reuses_a_prebuilds_running_token() {
        let var = format!(
            "CODER_RUNNING_WORKSPACE_AGENT_TOKEN_{}",
            hex::encode(Sha256::digest(b""))
        );
        let claimed = ctx(Env::from_pairs([(var.as_str(), "kept")])).map(|c| agent_token(&c));
        assert_eq!(claimed.as_deref(), Some("kept"));
        let fresh = ctx(Env::default())
            .map(|c| agent_token(&c))
            .unwrap_or_default();
        assert!(uuid::Uuid::parse_str(&fresh).is_ok());
    }

    #[test]
    fn a_dir_other_than_home_is_deprecated() {
        let warnings = |dir: &str| {
            let mut diags = Diagnostics::default();
            Agent.validate(&object([("dir", Value::from(dir))]), &mut diags);
            assert!(!diags.has_errors());
            diags.0.len()
        };
        assert_eq!(warnings("/workspace"), 2);
        assert_eq!(warnings("~/src"), 2);
        for home in ["", "~", "$HOME"] {
            assert_eq!(warnings(home), 0, "{home}");
        }
    }

    #[test]
    fn duplicate_metadata_keys_and_relative_volumes_are_rejected() {
        let item = |key: &str| object([("key", Value::from(key))]);
        let volume = |path: &str| object([("path", Value::from(path))]);
        let config = object([
            ("metadata", Value::List(vec![item("a"), item("a")])),
            (
                "resources_monitoring",
                Value::List(vec![object([(
                    "volume",
                    Value::List(vec![volume("rel"), volume("/")]),
                )])]),
            ),
        ]);
        let mut diags = Diagnostics::default();
        Agent.validate(&config, &mut diags);
        let summaries: Vec<_> = diags.0.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                r#"duplicate agent metadata key "a""#,
                "volume path must be an absolute path"
            ]
        );
    }
}
