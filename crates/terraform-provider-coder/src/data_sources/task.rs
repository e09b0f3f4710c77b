//! `coder_task`: whether this build runs a Coder Task, its id and its prompt, from the
//! `CODER_TASK_ID` and `CODER_TASK_PROMPT` variables Coder sets for task builds.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Schema};
use crate::value::Value;

pub(crate) struct Task;

/// Go's `uuid.Parse` message for a value that is no UUID.
fn uuid_error(raw: &str) -> String {
    if matches!(raw.len(), 32 | 36 | 38 | 45) {
        "invalid UUID format".to_owned()
    } else {
        format!("invalid UUID length: {}", raw.len())
    }
}

impl DataSource for Task {
    fn type_name(&self) -> &'static str {
        "coder_task"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("Information about the Coder Task this build runs, if any.")
            .attr(
                Attribute::string("id")
                    .computed()
                    .describe("The task's UUID in a task build."),
            )
            .attr(
                Attribute::string("prompt")
                    .computed()
                    .describe("The prompt Coder gave the task; empty outside tasks."),
            )
            .attr(
                Attribute::bool("enabled")
                    .computed()
                    .describe("True when this build runs a Coder Task."),
            );
        Schema { version: 0, block }
    }

    fn read(&self, ctx: &Ctx, _config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        let raw = ctx.env.or_empty("CODER_TASK_ID");
        if raw.is_empty() || raw == uuid::Uuid::nil().to_string() {
            state.set("id", Value::from(uuid::Uuid::new_v4().to_string()));
            state.set("enabled", Value::from(false));
        } else if uuid::Uuid::parse_str(raw).is_ok() {
            state.set("id", Value::from(raw));
            state.set("enabled", Value::from(true));
        } else {
            diags.error(uuid_error(raw), "");
        }
        state.set("prompt", Value::from(ctx.env.or_empty("CODER_TASK_PROMPT")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::value::object;

    fn read(env: Env) -> (Value, Diagnostics) {
        crate::data_sources::read_for_test(&Task, &object([]), env)
    }

    #[test]
    fn a_task_build_is_enabled() {
        let id = "0d2a4b8e-2f0e-4c1a-9b53-6d4a1c2e9f10";
        let (state, diags) = read(Env::from_pairs([
            ("CODER_TASK_ID", id),
            ("CODER_TASK_PROMPT", "write tests"),
        ]));
        assert!(!diags.has_errors());
        assert_eq!(state.get("id"), &Value::from(id));
        assert_eq!(state.get("enabled"), &Value::from(true));
        assert_eq!(state.get("prompt"), &Value::from("write tests"));
    }

    #[test]
    fn a_workspace_build_is_not() {
        for env in [
            Env::default(),
            Env::from_pairs([("CODER_TASK_ID", "00000000-0000-0000-0000-000000000000")]),
        ] {
            let (state, diags) = read(env);
            assert!(!diags.has_errors());
            assert_eq!(state.get("enabled"), &Value::from(false));
            assert_eq!(state.get("prompt"), &Value::from(""));
            assert!(state.is_wholly_known());
        }
    }

    #[test]
    fn a_malformed_task_id_is_an_error() {
        let (_, diags) = read(Env::from_pairs([("CODER_TASK_ID", "abc")]));
        assert_eq!(
            diags.0.first().map(|d| d.summary.as_str()),
            Some("invalid UUID length: 3")
        );
    }
}
