//! `coder_script_order`: ordering rules between `coder_script` resources of one agent.
//!
//! This follows Coder's design that no provider release has shipped yet (Coder's repository
//! and its provider's main branch): a data source whose `rule` blocks say that every script
//! selected by `run` waits for every script selected by `after`, with `requires` (`success`,
//! the default, or `completion`) and an optional `phase` (`start` or `stop`). Selectors are
//! Terraform address strings (`coder_script.x`, `coder_script.x[0]`, `module.m`) that the
//! provisioner resolves after planning; the provider only checks their form is non-empty.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::{DataSource, fill_new_id};
use crate::schema::{Attribute, Block, Check, NestedBlock, Schema, Type, id_attribute};
use crate::value::Value;

pub(crate) struct ScriptOrder;

fn selectors(name: &'static str, description: &'static str) -> Attribute {
    Attribute::typed(name, Type::List(Box::new(Type::String)))
        .required()
        .check(Check::MinItems(1))
        .elem_check(Check::NotEmpty)
        .describe(description)
}

impl DataSource for ScriptOrder {
    fn type_name(&self) -> &'static str {
        "coder_script_order"
    }

    fn schema(&self) -> Schema {
        let rule = Block::new("Every script selected by `run` waits for every script selected by `after`.")
            .attr(selectors(
                "run",
                "Selectors of the scripts that wait (`coder_script.name`, `coder_script.name[0]`, `module.name`).",
            ))
            .attr(selectors(
                "after",
                "Selectors of the scripts that must finish first.",
            ))
            .attr(
                Attribute::string("requires")
                    .default("success")
                    .one_of(&["success", "completion"])
                    .describe(
                        "`success`: skip the `run` scripts when an `after` script fails, times out \
                         or is skipped. `completion`: run them once every `after` script ended.",
                    ),
            )
            .attr(
                Attribute::string("phase")
                    .one_of(&["start", "stop"])
                    .describe("`start` or `stop`; inferred from the selected scripts when unset."),
            );
        let block = Block::new(
            "Ordering constraints between `coder_script` resources of one agent (follows \
             Coder's unreleased design).",
        )
        .attr(id_attribute("Random id."))
        .block(NestedBlock::list("rule", rule).min_items(1));
        Schema { version: 0, block }
    }

    fn read(&self, _ctx: &Ctx, _config: &Value, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::AttrPath;
    use crate::env::Env;
    use crate::value::object;

    fn rule(run: &[&str], after: &[&str]) -> Value {
        let list = |items: &[&str]| Value::List(items.iter().map(|s| Value::from(*s)).collect());
        object([("run", list(run)), ("after", list(after))])
    }

    #[test]
    fn requires_defaults_to_success_and_phase_stays_unset() {
        let config = object([(
            "rule",
            Value::List(vec![rule(&["coder_script.b"], &["coder_script.a"])]),
        )]);
        let (state, diags) =
            crate::data_sources::read_for_test(&ScriptOrder, &config, Env::default());
        assert!(!diags.has_errors());
        let first = &state.get("rule").as_list().unwrap_or_default()[0];
        assert_eq!(first.get("requires"), &Value::from("success"));
        assert!(first.get("phase").is_null());
        assert!(state.is_wholly_known());
    }

    #[test]
    fn selectors_must_not_be_empty() {
        let config = object([("rule", Value::List(vec![rule(&[], &[""])]))]);
        let mut diags = Diagnostics::default();
        ScriptOrder
            .schema()
            .block
            .validate(&config, &AttrPath::root(), &mut diags);
        let summaries: Vec<_> = diags.0.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "Not enough list items",
                r#"expected "after.0" to not be an empty string, got "#
            ]
        );
    }
}
