//! `coder_ai_task`: declares that the template runs Coder Tasks, naming the `coder_app` that
//! is the task's interface. Whether this build is a task, and its prompt, come from the
//! `CODER_TASK_ID` and `CODER_TASK_PROMPT` variables Coder sets for task builds.

use crate::config::Ctx;
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::Resource;
use crate::schema::{Attribute, Block, Check, NestedBlock, Schema};
use crate::value::Value;

pub(crate) struct AiTask;

/// The task this build runs for, if any: `CODER_TASK_ID` when it is a UUID other than nil.
fn task_id(ctx: &Ctx) -> Option<uuid::Uuid> {
    ctx.env
        .lookup("CODER_TASK_ID")
        .and_then(|raw| uuid::Uuid::parse_str(raw).ok())
        .filter(|id| !id.is_nil())
}

fn sidebar_app_id(value: &Value) -> Option<&str> {
    value
        .get("sidebar_app")
        .as_list()
        .and_then(<[Value]>::first)
        .and_then(|app| app.get("id").as_str())
        .filter(|id| !id.is_empty())
}

fn is_set(config: &Value, name: &str) -> bool {
    match config.get(name) {
        Value::Null => false,
        Value::List(items) => !items.is_empty(),
        _ => true,
    }
}

impl Resource for AiTask {
    fn type_name(&self) -> &'static str {
        "coder_ai_task"
    }

    fn schema(&self) -> Schema {
        let sidebar_app = Block::new("The `coder_app` shown in the task's sidebar.").attr(
            Attribute::string("id")
                .required()
                .check(Check::Uuid)
                .describe("The id of an existing `coder_app` resource."),
        );
        let block = Block::new("Defines Coder Tasks for this template.")
            .attr(
                Attribute::string("id")
                    .computed()
                    .describe("The task's id in a task build, else a random id."),
            )
            .attr(
                Attribute::string("app_id")
                    .optional_computed()
                    .check(Check::Uuid)
                    .describe("The id of the `coder_app` that is the task's interface."),
            )
            .attr(
                Attribute::string("prompt")
                    .computed()
                    .describe("The prompt Coder gave the task (`CODER_TASK_PROMPT`)."),
            )
            .attr(
                Attribute::bool("enabled")
                    .computed()
                    .describe("Whether this build runs a Coder Task."),
            )
            .block(NestedBlock::set("sidebar_app", sidebar_app).max_items(1))
            .all_force_new();
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if is_set(config, "sidebar_app") {
            diags.warning_at(
                AttrPath::attr("sidebar_app"),
                "Argument is deprecated",
                "This field has been deprecated in favor of the `app_id` field.",
            );
        }
        if is_set(config, "app_id") && is_set(config, "sidebar_app") {
            diags.error_at(
                AttrPath::attr("app_id"),
                r#""app_id": conflicts with sidebar_app"#,
                "",
            );
            diags.error_at(
                AttrPath::attr("sidebar_app"),
                r#""sidebar_app": conflicts with app_id"#,
                "",
            );
        }
    }

    fn plan_derived(&self, config: &Value, planned: &mut Value) {
        // The deprecated block names the app too; known now, so plan it.
        if planned.get("app_id").is_unknown()
            && let Some(id) = sidebar_app_id(config)
        {
            planned.set("app_id", Value::from(id));
        }
    }

    fn create(&self, ctx: &Ctx, state: &mut Value, diags: &mut Diagnostics) {
        if !state.get("id").is_unknown() {
            // Not a new task resource: what it was created with stays.
            return;
        }
        let (id, enabled) = match task_id(ctx) {
            Some(id) => (id, true),
            None => (uuid::Uuid::new_v4(), false),
        };
        state.set("id", Value::from(id.to_string()));
        state.set("enabled", Value::from(enabled));
        let prompt = ctx.env.non_empty("CODER_TASK_PROMPT").unwrap_or_default();
        state.set("prompt", Value::from(prompt));
        let app_id = match state.get("app_id").as_str() {
            Some(id) if !id.is_empty() => Some(id.to_owned()),
            _ => sidebar_app_id(state).map(str::to_owned),
        };
        match app_id {
            Some(app_id) => state.set("app_id", Value::from(app_id)),
            None => {
                state.set("app_id", Value::from(""));
                diags.error("'app_id' must be set", "");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AccessUrl;
    use crate::env::Env;
    use crate::value::object;

    const APP: &str = "7128be08-8722-44cb-bbe1-b5a391c4d94b";

    fn created(config: &Value, env: Env) -> (Value, Diagnostics) {
        let mut diags = Diagnostics::default();
        let mut state = crate::plan::plan_block(&AiTask.schema().block, config, None);
        AiTask.plan_derived(config, &mut state);
        match AccessUrl::parse("https://coder.example") {
            Ok(access_url) => AiTask.create(&Ctx { env, access_url }, &mut state, &mut diags),
            Err(err) => diags.error(err.to_string(), ""),
        }
        (state, diags)
    }

    #[test]
    fn a_task_build_takes_its_id_and_prompt_from_the_environment() {
        let task = "0d2a4b8e-2f0e-4c1a-9b53-6d4a1c2e9f10";
        let (state, diags) = created(
            &object([("app_id", Value::from(APP))]),
            Env::from_pairs([
                ("CODER_TASK_ID", task),
                ("CODER_TASK_PROMPT", "fix the bug"),
            ]),
        );
        assert!(!diags.has_errors(), "{diags:?}");
        assert_eq!(state.get("id"), &Value::from(task));
        assert_eq!(state.get("enabled"), &Value::from(true));
        assert_eq!(state.get("prompt"), &Value::from("fix the bug"));
        assert_eq!(state.get("app_id"), &Value::from(APP));
    }

    #[test]
    fn a_workspace_build_is_not_a_task() {
        for env in [
            Env::default(),
            Env::from_pairs([("CODER_TASK_ID", "00000000-0000-0000-0000-000000000000")]),
            Env::from_pairs([("CODER_TASK_ID", "not-a-uuid")]),
        ] {
            let (state, diags) = created(&object([("app_id", Value::from(APP))]), env);
            assert!(!diags.has_errors());
            assert_eq!(state.get("enabled"), &Value::from(false));
            assert_eq!(state.get("prompt"), &Value::from(""));
            assert!(
                state
                    .get("id")
                    .as_str()
                    .is_some_and(|id| uuid::Uuid::parse_str(id).is_ok())
            );
        }
    }

    #[test]
    fn the_deprecated_sidebar_app_names_the_app() {
        let config = object([(
            "sidebar_app",
            Value::List(vec![object([("id", Value::from(APP))])]),
        )]);
        let mut diags = Diagnostics::default();
        AiTask.validate(&config, &mut diags);
        assert_eq!(diags.0.len(), 1);
        assert_eq!(diags.0[0].summary, "Argument is deprecated");
        let (state, diags) = created(&config, Env::default());
        assert!(!diags.has_errors());
        assert_eq!(state.get("app_id"), &Value::from(APP));
    }

    #[test]
    fn an_app_is_required_and_only_one_way() {
        let (_, diags) = created(&object([]), Env::default());
        assert_eq!(
            diags.0.first().map(|d| d.summary.as_str()),
            Some("'app_id' must be set")
        );
        let both = object([
            ("app_id", Value::from(APP)),
            (
                "sidebar_app",
                Value::List(vec![object([("id", Value::from(APP))])]),
            ),
        ]);
        let mut diags = Diagnostics::default();
        AiTask.validate(&both, &mut diags);
        assert!(diags.has_errors());
        let mut diags = Diagnostics::default();
        AiTask.schema().block.validate(
            &object([("app_id", Value::from("x"))]),
            &AttrPath::root(),
            &mut diags,
        );
        assert_eq!(
            diags.0.first().map(|d| d.summary.as_str()),
            Some(r#"expected "app_id" to be a valid UUID, got x"#)
        );
    }
}
