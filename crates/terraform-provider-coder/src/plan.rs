//! Schema-driven value transformations shared by every resource and data source: planning a
//! config into a new state, merging apply-time values into a plan, spotting changes that
//! force replacement, and normalising stored states to the current schema.
//!
//! Protocol 6 rules this module encodes: values set in config are planned as they are;
//! unset attributes with a default get the default at plan time; computed attributes keep
//! their prior value or are unknown; absent nested blocks are empty lists, never null.

use std::collections::BTreeMap;

use crate::diag::AttrPath;
use crate::schema::{Block, Mode, Nesting};
use crate::value::Value;

/// Plans `config` against `block`. `prior` is the previous state when updating; computed
/// attributes keep its values (the caller resets them when the resource gets replaced).
pub(crate) fn plan_block(block: &Block, config: &Value, prior: Option<&Value>) -> Value {
    if config.is_unknown() {
        return config.clone();
    }
    let mut out = BTreeMap::new();
    for attr in &block.attributes {
        let configured = config.get(attr.name);
        let carried = || prior.map_or(Value::unknown(), |p| p.get(attr.name).clone());
        let planned = match attr.mode {
            Mode::Required | Mode::Optional => configured.clone(),
            Mode::Computed => carried(),
            Mode::OptionalComputed if !configured.is_null() => configured.clone(),
            Mode::OptionalComputed => attr.default.clone().unwrap_or_else(carried),
        };
        out.insert(attr.name.to_owned(), planned);
    }
    for nested in &block.blocks {
        let planned = match config.get(nested.name) {
            Value::List(items) => {
                let prior_items = prior.and_then(|p| p.get(nested.name).as_list());
                Value::List(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            // Set elements have no stable position to correlate with.
                            let prior_item = match nested.nesting {
                                Nesting::List => prior_items.and_then(|p| p.get(i)),
                                Nesting::Set => None,
                            };
                            plan_block(&nested.block, item, prior_item)
                        })
                        .collect(),
                )
            }
            unknown @ Value::Unknown(_) => unknown.clone(),
            _ => Value::List(Vec::new()),
        };
        out.insert(nested.name.to_owned(), planned);
    }
    Value::Object(out)
}

/// Top-level attributes and blocks whose planned value differs from the prior state and that
/// force a replacement. Computed-only attributes are the provider's business and ignored.
pub(crate) fn replacing_paths(block: &Block, prior: &Value, planned: &Value) -> Vec<AttrPath> {
    let mut paths = Vec::new();
    for attr in block.attributes.iter().filter(|a| a.force_new) {
        if prior.get(attr.name) != planned.get(attr.name) {
            paths.push(AttrPath::attr(attr.name));
        }
    }
    for nested in block.blocks.iter().filter(|b| b.force_new) {
        let (before, after) = (prior.get(nested.name), planned.get(nested.name));
        let same = match nested.nesting {
            Nesting::List => before == after,
            Nesting::Set => same_elements(before, after),
        };
        if !same {
            paths.push(AttrPath::attr(nested.name));
        }
    }
    paths
}

fn same_elements(a: &Value, b: &Value) -> bool {
    match (a.as_list(), b.as_list()) {
        (Some(a), Some(b)) => {
            let mut unmatched: Vec<&Value> = b.iter().collect();
            a.len() == b.len()
                && a.iter().all(
                    |item| match unmatched.iter().position(|other| *other == item) {
                        Some(pos) => {
                            unmatched.swap_remove(pos);
                            true
                        }
                        None => false,
                    },
                )
        }
        _ => a == b,
    }
}

/// Combines a plan with values computed at apply time: every known planned value wins (the
/// protocol requires apply to return them unchanged), unknowns take the fresh value.
pub(crate) fn merge_block(block: &Block, planned: &Value, fresh: &Value) -> Value {
    let (Value::Object(planned_attrs), Value::Object(_)) = (planned, fresh) else {
        return merge_value(planned, fresh);
    };
    let mut out = BTreeMap::new();
    for (name, planned_value) in planned_attrs {
        let fresh_value = fresh.get(name);
        let merged = match block.blocks.iter().find(|b| b.name == name) {
            // Set elements have no position to correlate; with unknowns inside, the freshly
            // planned set (from the now-known config) is the answer.
            Some(nested) if nested.nesting == Nesting::Set && !planned_value.is_wholly_known() => {
                fresh_value.clone()
            }
            Some(nested) => match (planned_value, fresh_value) {
                (Value::List(p), Value::List(f)) if p.len() == f.len() => Value::List(
                    p.iter()
                        .zip(f)
                        .map(|(p, f)| merge_block(&nested.block, p, f))
                        .collect(),
                ),
                _ => merge_value(planned_value, fresh_value),
            },
            None => merge_value(planned_value, fresh_value),
        };
        out.insert(name.clone(), merged);
    }
    Value::Object(out)
}

fn merge_value(planned: &Value, fresh: &Value) -> Value {
    match (planned, fresh) {
        (Value::Unknown(_), fresh) => fresh.clone(),
        (Value::Object(p), Value::Object(f)) => Value::Object(
            p.iter()
                .map(|(k, pv)| (k.clone(), merge_value(pv, f.get(k).unwrap_or(&Value::Null))))
                .collect(),
        ),
        (Value::List(p), Value::List(f)) if p.len() == f.len() => {
            Value::List(p.iter().zip(f).map(|(p, f)| merge_value(p, f)).collect())
        }
        (planned, _) => planned.clone(),
    }
}

/// Reshapes a stored state (possibly written by another version of the provider, e.g. Coder's
/// Go provider) to exactly the current schema: unknown attributes are dropped, missing ones
/// become their default or null, missing blocks become empty.
pub(crate) fn normalize_state(block: &Block, stored: &Value) -> Value {
    let mut out = BTreeMap::new();
    for attr in &block.attributes {
        let value = match stored.get(attr.name) {
            Value::Null
                if attr.default.is_some()
                    && stored
                        .as_object()
                        .is_some_and(|o| !o.contains_key(attr.name)) =>
            {
                attr.default.clone().unwrap_or(Value::Null)
            }
            value => value.clone(),
        };
        out.insert(attr.name.to_owned(), value);
    }
    for nested in &block.blocks {
        let items = stored.get(nested.name).as_list().unwrap_or_default();
        let items = items
            .iter()
            .map(|item| normalize_state(&nested.block, item))
            .collect();
        out.insert(nested.name.to_owned(), Value::List(items));
    }
    Value::Object(out)
}

/// The path of the first unknown inside `value`, for reporting a provider bug clearly.
pub(crate) fn first_unknown(value: &Value, path: &AttrPath) -> Option<AttrPath> {
    match value {
        Value::Unknown(_) => Some(path.clone()),
        Value::List(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| first_unknown(item, &path.index(i))),
        Value::Object(attrs) => attrs
            .iter()
            .find_map(|(k, v)| first_unknown(v, &path.child(k))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Attribute, NestedBlock};
    use crate::value::object;

    fn block() -> Block {
        Block::new("")
            .attr(Attribute::string("id").computed())
            .attr(Attribute::string("os").required())
            .attr(Attribute::string("dir"))
            .attr(Attribute::string("auth").default("token"))
            .block(NestedBlock::list(
                "metadata",
                Block::new("")
                    .attr(Attribute::string("key").required())
                    .attr(Attribute::int("timeout").zero_default()),
            ))
            .block(NestedBlock::set(
                "display_apps",
                Block::new("").attr(Attribute::bool("vscode").default(true)),
            ))
            .all_force_new()
    }

    fn config() -> Value {
        object([
            ("os", Value::from("linux")),
            ("dir", Value::Null),
            ("auth", Value::Null),
            (
                "metadata",
                Value::List(vec![object([
                    ("key", Value::from("k")),
                    ("timeout", Value::Null),
                ])]),
            ),
            ("display_apps", Value::List(Vec::new())),
        ])
    }

    #[test]
    fn create_plans_defaults_and_unknown_computed() {
        let planned = plan_block(&block(), &config(), None);
        assert_eq!(planned.get("id"), &Value::unknown());
        assert_eq!(planned.get("os"), &Value::from("linux"));
        assert!(planned.get("dir").is_null());
        assert_eq!(planned.get("auth"), &Value::from("token"));
        let item = &planned.get("metadata").as_list().unwrap_or_default()[0];
        assert_eq!(item.get("timeout"), &Value::from(0));
        assert_eq!(planned.get("display_apps"), &Value::List(Vec::new()));
    }

    #[test]
    fn absent_blocks_plan_as_empty_lists_and_unknown_blocks_stay_unknown() {
        let mut cfg = config();
        cfg.set("metadata", Value::Null);
        cfg.set("display_apps", Value::unknown());
        let planned = plan_block(&block(), &cfg, None);
        assert_eq!(planned.get("metadata"), &Value::List(Vec::new()));
        assert!(planned.get("display_apps").is_unknown());
    }

    #[test]
    fn unchanged_config_keeps_prior_state_exactly() {
        let mut prior = plan_block(&block(), &config(), None);
        prior.set("id", Value::from("abc"));
        let planned = plan_block(&block(), &config(), Some(&prior));
        assert_eq!(planned, prior);
        assert!(replacing_paths(&block(), &prior, &planned).is_empty());
    }

    #[test]
    fn changed_attributes_and_blocks_force_replacement() {
        let prior = plan_block(&block(), &config(), None);
        let mut cfg = config();
        cfg.set("os", Value::from("windows"));
        cfg.set(
            "display_apps",
            Value::List(vec![object([("vscode", Value::from(false))])]),
        );
        let planned = plan_block(&block(), &cfg, Some(&prior));
        let paths: Vec<String> = replacing_paths(&block(), &prior, &planned)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(paths, ["os", "display_apps"]);
    }

    #[test]
    fn sets_compare_without_order() {
        let a = Value::List(vec![Value::from("x"), Value::from("y")]);
        let b = Value::List(vec![Value::from("y"), Value::from("x")]);
        assert!(same_elements(&a, &b));
        assert!(!same_elements(
            &a,
            &Value::List(vec![Value::from("x"), Value::from("x")])
        ));
    }

    #[test]
    fn merge_keeps_known_plan_and_fills_unknowns() {
        let planned = plan_block(&block(), &config(), None);
        let mut fresh = planned.clone();
        fresh.set("id", Value::from("new-id"));
        fresh.set("os", Value::from("ignored"));
        let merged = merge_block(&block(), &planned, &fresh);
        assert_eq!(merged.get("id"), &Value::from("new-id"));
        assert_eq!(merged.get("os"), &Value::from("linux"));
        assert!(first_unknown(&merged, &AttrPath::root()).is_none());
        assert_eq!(
            first_unknown(&planned, &AttrPath::root()).map(|p| p.to_string()),
            Some("id".to_owned())
        );
    }

    #[test]
    fn sets_with_unknowns_take_the_fresh_value() {
        let planned = object([(
            "display_apps",
            Value::List(vec![object([("vscode", Value::unknown())])]),
        )]);
        let fresh = object([(
            "display_apps",
            Value::List(vec![object([("vscode", Value::from(false))])]),
        )]);
        assert_eq!(merge_block(&block(), &planned, &fresh), fresh);
    }

    #[test]
    fn normalizing_drops_foreign_attributes_and_fills_missing_ones() {
        let stored = object([
            ("id", Value::from("abc")),
            ("os", Value::from("linux")),
            ("tooltip", Value::from("from a newer provider")),
        ]);
        let state = normalize_state(&block(), &stored);
        assert!(
            state.get("tooltip").is_null()
                && state
                    .as_object()
                    .is_some_and(|o| !o.contains_key("tooltip"))
        );
        assert_eq!(state.get("auth"), &Value::from("token"));
        assert!(state.get("dir").is_null());
        assert_eq!(state.get("metadata"), &Value::List(Vec::new()));
    }
}
