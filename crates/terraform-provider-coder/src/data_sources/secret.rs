//! `coder_secret`: declares that workspaces of the template need one of the owner's secrets,
//! matched by environment variable name (`env`) or file path (`file`). Coder passes the
//! value as `CODER_SECRET_ENV_<name>` or `CODER_SECRET_FILE_<hex of the path>`.

use regex::Regex;

use crate::config::Ctx;
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Schema};
use crate::value::Value;

pub(crate) struct Secret;

/// What coderd accepts as a secret's environment variable name.
const ENV_NAME_PATTERN: &str = "^[a-zA-Z_][a-zA-Z0-9_]*$";

/// The variable Coder passes an `env` secret's value in.
pub(crate) fn env_variable(name: &str) -> String {
    format!("CODER_SECRET_ENV_{name}")
}

/// The variable Coder passes a `file` secret's value in; paths hold characters variable
/// names cannot, hence the hex.
pub(crate) fn file_variable(path: &str) -> String {
    format!("CODER_SECRET_FILE_{}", hex::encode(path.as_bytes()))
}

fn text(config: &Value, name: &str) -> String {
    config.get(name).as_str().unwrap_or_default().to_owned()
}

impl DataSource for Secret {
    fn type_name(&self) -> &'static str {
        "coder_secret"
    }

    fn schema(&self) -> Schema {
        let block = Block::new(
            "Declares that the workspace needs a secret of its owner, matched by `env` or \
             `file`; its value is `value` during builds.",
        )
        .attr(
            Attribute::string("id")
                .computed()
                .describe("`env:<name>` or `file:<path>`."),
        )
        .attr(Attribute::string("env").describe(
            "Environment variable name the secret must provide (POSIX: letters, digits and \
             `_`, not starting with a digit). Exactly one of `env` or `file`.",
        ))
        .attr(Attribute::string("file").describe(
            "File path the secret must provide; starts with `~/` or `/`. Exactly one of \
             `env` or `file`.",
        ))
        .attr(
            Attribute::string("help_message")
                .required()
                .describe("Shown to users when the secret is missing."),
        )
        .attr(
            Attribute::string("value")
                .computed()
                .sensitive()
                .describe("The secret's value during workspace builds; empty counts as missing."),
        );
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(env) = config.get("env").as_str().filter(|e| !e.is_empty())
            && Regex::new(ENV_NAME_PATTERN).is_ok_and(|re| !re.is_match(env))
        {
            diags.error_at(
                AttrPath::attr("env"),
                format!(
                    "`env` must be a POSIX-compliant identifier matching {ENV_NAME_PATTERN:?}; got {env:?}"
                ),
                "",
            );
        }
        if let Some(file) = config.get("file").as_str().filter(|f| !f.is_empty())
            && !file.starts_with('/')
            && !file.starts_with("~/")
        {
            diags.error_at(
                AttrPath::attr("file"),
                format!("`file` must start with `/` or `~/`; got {file:?}"),
                "",
            );
        }
    }

    fn read(&self, ctx: &Ctx, config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        let (env, file) = (text(config, "env"), text(config, "file"));
        if env.is_empty() == file.is_empty() {
            diags.error("exactly one of `env` or `file` must be set", "");
            return;
        }
        let (id, variable, requirement) = if env.is_empty() {
            (
                format!("file:{file}"),
                file_variable(&file),
                format!("file {file:?}"),
            )
        } else {
            (
                format!("env:{env}"),
                env_variable(&env),
                format!("environment variable {env:?}"),
            )
        };
        state.set("id", Value::from(id));
        let value = ctx.env.or_empty(&variable);
        state.set("value", Value::from(value));
        // Only a real start build insists: a missing secret must never make a workspace
        // impossible to stop or delete, nor fail a local `terraform plan`.
        let start_build = ctx.env.non_empty("CODER_WORKSPACE_BUILD_ID").is_some()
            && ctx.env.lookup("CODER_WORKSPACE_TRANSITION") == Some("start");
        if !value.is_empty() || !start_build {
            return;
        }
        let mut detail = format!("Required: {requirement}\n\n");
        let help = text(config, "help_message");
        if !help.is_empty() {
            detail.push_str(&format!("Help message: {help}\n\n"));
        }
        detail.push_str(&format!(
            "To resolve: ensure a secret exposes the {requirement}.\n"
        ));
        diags.error(format!("Missing required secret: {requirement}"), detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::value::object;

    fn config(pairs: &[(&str, &str)]) -> Value {
        let mut config = object([("help_message", Value::from("Add it in your settings"))]);
        for (k, v) in pairs {
            config.set(k, Value::from(*v));
        }
        config
    }

    fn read(config: &Value, env: Env) -> (Value, Diagnostics) {
        crate::data_sources::read_for_test(&Secret, config, env)
    }

    fn starting() -> [(&'static str, &'static str); 2] {
        [
            ("CODER_WORKSPACE_TRANSITION", "start"),
            ("CODER_WORKSPACE_BUILD_ID", "b1"),
        ]
    }

    #[test]
    fn variables_are_named_like_coders() {
        assert_eq!(
            env_variable("GITHUB_TOKEN"),
            "CODER_SECRET_ENV_GITHUB_TOKEN"
        );
        assert_eq!(
            file_variable("~/.aws/credentials"),
            format!("CODER_SECRET_FILE_{}", hex::encode("~/.aws/credentials"))
        );
    }

    #[test]
    fn values_come_from_the_build_environment() {
        let var = env_variable("MY_TOKEN");
        let (state, diags) = read(
            &config(&[("env", "MY_TOKEN")]),
            Env::from_pairs([(var.as_str(), "s3cret")]),
        );
        assert!(!diags.has_errors());
        assert_eq!(state.get("id"), &Value::from("env:MY_TOKEN"));
        assert_eq!(state.get("value"), &Value::from("s3cret"));
        let var = file_variable("~/.ssh/id_rsa");
        let (state, _) = read(
            &config(&[("file", "~/.ssh/id_rsa")]),
            Env::from_pairs([(var.as_str(), "key")]),
        );
        assert_eq!(state.get("id"), &Value::from("file:~/.ssh/id_rsa"));
        assert_eq!(state.get("value"), &Value::from("key"));
    }

    #[test]
    fn a_missing_secret_fails_only_a_start_build() {
        let (_, diags) = read(
            &config(&[("env", "DOES_NOT_EXIST")]),
            Env::from_pairs(starting()),
        );
        let d = diags.0.first().cloned();
        assert_eq!(
            d.as_ref().map(|d| d.summary.as_str()),
            Some(r#"Missing required secret: environment variable "DOES_NOT_EXIST""#)
        );
        assert_eq!(
            d.map(|d| d.detail),
            Some(
                "Required: environment variable \"DOES_NOT_EXIST\"\n\nHelp message: Add it in \
                 your settings\n\nTo resolve: ensure a secret exposes the environment variable \
                 \"DOES_NOT_EXIST\".\n"
                    .to_owned()
            )
        );
        for env in [
            Env::from_pairs([
                ("CODER_WORKSPACE_TRANSITION", "stop"),
                ("CODER_WORKSPACE_BUILD_ID", "b"),
            ]),
            Env::from_pairs([("CODER_WORKSPACE_TRANSITION", "start")]),
        ] {
            let (state, diags) = read(&config(&[("env", "DOES_NOT_EXIST")]), env);
            assert!(!diags.has_errors());
            assert_eq!(state.get("value"), &Value::from(""));
        }
    }

    #[test]
    fn an_empty_help_message_leaves_its_paragraph_out() {
        let mut c = config(&[("file", "~/.missing")]);
        c.set("help_message", Value::from(""));
        let (_, diags) = read(&c, Env::from_pairs(starting()));
        assert_eq!(
            diags.0.first().map(|d| d.detail.as_str()),
            Some(
                "Required: file \"~/.missing\"\n\nTo resolve: ensure a secret exposes the file \"~/.missing\".\n"
            )
        );
    }

    #[test]
    fn exactly_one_of_env_and_file() {
        for c in [config(&[]), config(&[("env", "A"), ("file", "/a")])] {
            let (_, diags) = read(&c, Env::default());
            assert_eq!(
                diags.0.first().map(|d| d.summary.as_str()),
                Some("exactly one of `env` or `file` must be set")
            );
        }
    }

    #[test]
    fn names_and_paths_are_checked() {
        let problems = |c: Value| {
            let mut diags = Diagnostics::default();
            Secret.validate(&c, &mut diags);
            diags.0.len()
        };
        for bad in ["1TOKEN", "MY-TOKEN", "MY TOKEN", "MY.TOKEN", "-TOKEN"] {
            assert_eq!(problems(config(&[("env", bad)])), 1, "{bad}");
        }
        for good in ["_TOKEN", "TOKEN1", "my_token", "MyToken", "X"] {
            assert_eq!(problems(config(&[("env", good)])), 0, "{good}");
        }
        for bad in ["creds.txt", "config/creds", "./creds", "../creds", "~creds"] {
            assert_eq!(problems(config(&[("file", bad)])), 1, "{bad}");
        }
        for good in ["~/.netrc", "~/config/app/secret", "/etc/creds"] {
            assert_eq!(problems(config(&[("file", good)])), 0, "{good}");
        }
    }
}
