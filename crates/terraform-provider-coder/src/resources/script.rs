//! `coder_script`: a script an agent runs on start, on stop or on a cron schedule.

use super::{agent_id_attribute, cron};
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::Resource;
use crate::schema::{Attribute, Block, Check, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct Script;

impl Resource for Script {
    fn type_name(&self) -> &'static str {
        "coder_script"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("A script run by an agent.")
            .attr(id_attribute("Random id of the script."))
            .attr(agent_id_attribute())
            .attr(
                Attribute::string("display_name")
                    .required()
                    .describe("Name shown with the script's logs."),
            )
            .attr(
                Attribute::string("script")
                    .required()
                    .describe("The script itself."),
            )
            .attr(Attribute::icon("icon"))
            .attr(
                Attribute::string("log_path")
                    .describe("File the logs go to; relative to the temp dir."),
            )
            .attr(Attribute::string("cron").describe("6-field cron schedule (seconds first)."))
            .attr(
                Attribute::bool("run_on_start")
                    .default(false)
                    .describe("Run when the agent starts."),
            )
            .attr(
                Attribute::bool("run_on_stop")
                    .default(false)
                    .describe("Run when the agent stops."),
            )
            .attr(
                Attribute::bool("start_blocks_login")
                    .default(false)
                    .describe("Users wait for this start script before logging in."),
            )
            .attr(
                Attribute::int("timeout")
                    .default(0)
                    .check(Check::IntAtLeast(1))
                    .describe("Seconds the script may run; 0 (default) means no limit."),
            )
            .all_force_new();
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(expr) = config.get("cron").as_str() {
            if let Some(problem) = cron::problem(expr) {
                diags.error_at(AttrPath::attr("cron"), problem, "");
            } else if let Some(warning) = cron::five_field_warning(expr) {
                diags.warning_at(AttrPath::attr("cron"), warning, "");
            }
        }
        let flag = |name: &str| match config.get(name) {
            Value::Null => Some(false),
            value => value.as_bool(),
        };
        let (Some(on_start), Some(on_stop), Some(blocks_login)) = (
            flag("run_on_start"),
            flag("run_on_stop"),
            flag("start_blocks_login"),
        ) else {
            return;
        };
        let cron = config.get("cron");
        if cron.is_unknown() {
            return;
        }
        if !on_start && !on_stop && cron.as_str().is_none_or(str::is_empty) {
            diags.error(
                r#"at least one of "run_on_start", "run_on_stop", or "cron" must be set"#,
                "",
            );
        }
        if !on_start && blocks_login {
            diags.error_at(
                AttrPath::attr("start_blocks_login"),
                r#""start_blocks_login" can only be set if "run_on_start" is "true""#,
                "",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    fn diagnose(config: &Value) -> Vec<String> {
        let mut diags = Diagnostics::default();
        Script.validate(config, &mut diags);
        diags.0.into_iter().map(|d| d.summary).collect()
    }

    #[test]
    fn a_script_must_run_at_some_point() {
        assert_eq!(diagnose(&object([])).len(), 1);
        assert!(diagnose(&object([("run_on_stop", Value::from(true))])).is_empty());
        assert!(diagnose(&object([("cron", Value::from("0 0 * * * *"))])).is_empty());
        assert!(diagnose(&object([("run_on_start", Value::unknown())])).is_empty());
    }

    #[test]
    fn blocking_login_needs_run_on_start() {
        let config = object([
            ("run_on_stop", Value::from(true)),
            ("start_blocks_login", Value::from(true)),
        ]);
        assert_eq!(
            diagnose(&config),
            [r#""start_blocks_login" can only be set if "run_on_start" is "true""#]
        );
    }
}
