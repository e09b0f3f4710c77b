//! `coder_metadata`: key/value items, an icon, a cost and visibility shown for another
//! resource of the workspace.

use std::collections::HashSet;

use crate::diag::{AttrPath, Diagnostics};
use crate::provider::Resource;
use crate::schema::{Attribute, Block, NestedBlock, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct Metadata;

impl Resource for Metadata {
    fn type_name(&self) -> &'static str {
        "coder_metadata"
    }

    fn schema(&self) -> Schema {
        let item = Block::new("One key/value item.")
            .attr(
                Attribute::string("key")
                    .required()
                    .describe("Key of the item."),
            )
            .attr(
                Attribute::string("value")
                    .zero_default()
                    .describe("Value of the item (Markdown)."),
            )
            .attr(
                Attribute::bool("sensitive")
                    .default(false)
                    .describe("Hide the value by default."),
            )
            .attr(
                Attribute::bool("is_null")
                    .computed()
                    .describe("Whether `value` was left unset (null)."),
            );
        let block = Block::new("Metadata shown with a resource of the workspace.")
            .attr(id_attribute("Random id of this metadata."))
            .attr(
                Attribute::string("resource_id")
                    .required()
                    .describe("The `id` of the resource this metadata describes."),
            )
            .attr(Attribute::bool("hide").describe("Hide the resource in the UI."))
            .attr(Attribute::icon("icon"))
            .attr(Attribute::int("daily_cost").describe("Cost of the resource per day."))
            .block(NestedBlock::list("item", item))
            .all_force_new();
        Schema { version: 1, block }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        let mut keys = HashSet::new();
        for item in config.get("item").as_list().unwrap_or_default() {
            if let Some(key) = item.get("key").as_str()
                && !keys.insert(key)
            {
                diags.error_at(
                    AttrPath::attr("item"),
                    format!("duplicate resource metadata key {key:?}"),
                    "",
                );
            }
        }
    }

    /// `value` is stored as "" when unset, so `is_null` keeps what the config really said.
    fn plan_derived(&self, config: &Value, planned: &mut Value) {
        let (Some(configured), Value::List(items)) =
            (config.get("item").as_list(), planned.get("item").clone())
        else {
            return;
        };
        let items = items
            .into_iter()
            .zip(configured)
            .map(|(mut item, configured)| {
                let is_null = match configured.get("value") {
                    Value::Unknown(_) => Value::unknown(),
                    value => Value::from(value.is_null()),
                };
                item.set("is_null", is_null);
                item
            })
            .collect();
        planned.set("item", Value::List(items));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan_block;
    use crate::value::object;

    #[test]
    fn null_values_are_stored_empty_and_flagged() {
        let config = object([
            ("resource_id", Value::from("r")),
            (
                "item",
                Value::List(vec![
                    object([("key", Value::from("a")), ("value", Value::Null)]),
                    object([("key", Value::from("b")), ("value", Value::from(""))]),
                    object([("key", Value::from("c")), ("value", Value::unknown())]),
                ]),
            ),
        ]);
        let mut planned = plan_block(&Metadata.schema().block, &config, None);
        Metadata.plan_derived(&config, &mut planned);
        let items = planned.get("item").as_list().unwrap_or_default();
        let flags: Vec<_> = items.iter().map(|i| i.get("is_null").clone()).collect();
        assert_eq!(
            flags,
            [Value::from(true), Value::from(false), Value::unknown()]
        );
        assert_eq!(items[0].get("value"), &Value::from(""));
        assert_eq!(items[0].get("sensitive"), &Value::from(false));
    }
}
