//! `coder_parameter`: a value the workspace owner chooses. Coder passes the chosen value as
//! `CODER_PARAMETER_<sha256 hex of the name>`; without one the default applies.

use sha2::{Digest, Sha256};

use super::parameter_rules::{Rule, Spec, resolve};
use crate::config::Ctx;
use crate::diag::{AttrPath, Diagnostics};
use crate::provider::{DataSource, fill_new_id};
use crate::schema::{Attribute, Block, NestedBlock, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct Parameter;

const FORM_TYPES: &[&str] = &[
    "radio",
    "slider",
    "input",
    "dropdown",
    "checkbox",
    "switch",
    "multi-select",
    "tag-select",
    "textarea",
    "error",
];

/// The variable Coder sets to a parameter's value; hashed because names may hold any character.
pub(crate) fn value_variable(name: &str) -> String {
    format!(
        "CODER_PARAMETER_{}",
        hex::encode(Sha256::digest(name.as_bytes()))
    )
}

fn previous_value_variable(name: &str) -> String {
    format!(
        "CODER_PARAMETER_PREVIOUS_{}",
        hex::encode(Sha256::digest(name.as_bytes()))
    )
}

fn option_block() -> NestedBlock {
    NestedBlock::list(
        "option",
        Block::new("A value the user may pick.")
            .attr(
                Attribute::string("name")
                    .required()
                    .describe("Name shown for this option."),
            )
            .attr(
                Attribute::string("description")
                    .zero_default()
                    .describe("What picking this option does."),
            )
            .attr(
                Attribute::string("value")
                    .required()
                    .describe("The parameter's value when picked."),
            )
            .attr(Attribute::icon("icon").zero_default()),
    )
}

fn validation_block() -> NestedBlock {
    NestedBlock::list(
        "validation",
        Block::new("Rules the value must follow.")
            .attr(
                Attribute::int("min")
                    .zero_default()
                    .describe("Smallest allowed number."),
            )
            .attr(
                Attribute::bool("min_disabled")
                    .computed()
                    .describe("Whether `min` was left unset."),
            )
            .attr(
                Attribute::int("max")
                    .zero_default()
                    .describe("Largest allowed number."),
            )
            .attr(
                Attribute::bool("max_disabled")
                    .computed()
                    .describe("Whether `max` was left unset."),
            )
            .attr(
                Attribute::string("monotonic").zero_default().describe(
                    "`increasing` or `decreasing`: how a number may change between builds.",
                ),
            )
            .attr(
                Attribute::string("regex")
                    .zero_default()
                    .describe("Pattern a string value must match."),
            )
            .attr(
                Attribute::string("error").zero_default().describe(
                    "Message when the value breaks a rule; may use {min}, {max}, {value}.",
                ),
            ),
    )
    .max_items(1)
}

/// The parameter as configured, for the rules in `parameter_rules`.
fn spec(config: &Value) -> Spec {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let options = config
        .get("option")
        .as_list()
        .unwrap_or_default()
        .iter()
        .map(|o| (text(o.get("name")), text(o.get("value"))))
        .collect();
    let validation = config
        .get("validation")
        .as_list()
        .and_then(<[Value]>::first)
        .map(|v| Rule {
            min: v.get("min").as_i64(),
            max: v.get("max").as_i64(),
            monotonic: text(v.get("monotonic")),
            regex: text(v.get("regex")),
            error: text(v.get("error")),
        });
    Spec {
        ty: config.get("type").as_str().unwrap_or("string").to_owned(),
        form_type: text(config.get("form_type")),
        default: config.get("default").as_str().map(str::to_owned),
        options,
        validation,
    }
}

impl DataSource for Parameter {
    fn type_name(&self) -> &'static str {
        "coder_parameter"
    }

    fn schema(&self) -> Schema {
        let block = Block::new(
            "A workspace parameter the user chooses when creating or updating a workspace.",
        )
        .attr(id_attribute("Random id."))
        .attr(
            Attribute::string("name")
                .required()
                .describe("Name of the parameter; renaming re-prompts users."),
        )
        .attr(Attribute::string("display_name").describe("Name shown in the UI."))
        .attr(Attribute::string("description").describe("What the parameter does."))
        .attr(
            Attribute::string("type")
                .default("string")
                .one_of(&["string", "number", "bool", "list(string)"])
                .describe("Type of the value."),
        )
        .attr(
            Attribute::string("form_type")
                .optional_computed()
                .one_of(FORM_TYPES)
                .describe("Input control in the UI; derived from the type and options when unset."),
        )
        .attr(
            Attribute::string("styling")
                .default("{}")
                .describe("JSON of cosmetic UI settings."),
        )
        .attr(
            Attribute::bool("mutable")
                .default(false)
                .describe("Whether the value may change after creation."),
        )
        .attr(Attribute::string("default").describe("Value used when the user gives none."))
        .attr(Attribute::icon("icon"))
        .attr(Attribute::int("order").describe("Position in the UI, lowest first."))
        .attr(
            Attribute::bool("ephemeral")
                .default(false)
                .describe("Whether the value applies to one build only."),
        )
        .attr(
            Attribute::bool("optional")
                .computed()
                .describe("Whether a default makes the parameter optional."),
        )
        .attr(
            Attribute::string("value")
                .computed()
                .describe("The parameter's value for this build."),
        )
        .block(option_block())
        .block(validation_block());
        Schema { version: 1, block }
    }

    fn read(&self, ctx: &Ctx, config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        fill_new_id(state);
        if let (Some(configured), Value::List(planned)) = (
            config.get("validation").as_list(),
            state.get("validation").clone(),
        ) {
            let rules = planned
                .into_iter()
                .zip(configured)
                .map(|(mut rule, configured)| {
                    rule.set("min_disabled", Value::from(configured.get("min").is_null()));
                    rule.set("max_disabled", Value::from(configured.get("max").is_null()));
                    rule
                })
                .collect();
            state.set("validation", Value::List(rules));
        }

        let optional = !config.get("default").is_null();
        state.set("optional", Value::from(optional));
        let mutable = config.get("mutable").as_bool().unwrap_or(false);
        let ephemeral = config.get("ephemeral").as_bool().unwrap_or(false);
        if !mutable && ephemeral {
            diags.error("parameter can't be immutable and ephemeral", "");
        }
        if !optional && ephemeral {
            diags.error("ephemeral parameter requires the default property", "");
        }

        let name = config.get("name").as_str().unwrap_or_default();
        let input = ctx.env.lookup(&value_variable(name));
        let previous = ctx.env.lookup(&previous_value_variable(name));
        match resolve(&spec(config), input, previous) {
            Ok((value, form_type)) => {
                state.set("value", Value::from(value));
                state.set("form_type", Value::from(form_type));
            }
            Err(refusal) => {
                let path = if refusal.about_default {
                    AttrPath::attr("default")
                } else {
                    AttrPath::root()
                };
                let summary = format!("{} (parameter {name:?})", refusal.summary);
                diags.error_at(path, summary, refusal.detail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::value::object;

    fn read(config: &Value, env: Env) -> (Value, Diagnostics) {
        crate::data_sources::read_for_test(&Parameter, config, env)
    }

    #[test]
    fn the_variable_name_hashes_the_parameter_name() {
        assert_eq!(
            value_variable("region"),
            "CODER_PARAMETER_c697d2981bf416569a16cfbcdec1542b5398f3cc77d2b905819aa99c46ecf6f6"
        );
    }

    #[test]
    fn reads_value_from_env_and_fills_validation_flags() {
        let config = object([
            ("name", Value::from("cpu")),
            ("type", Value::from("number")),
            ("default", Value::from("2")),
            (
                "validation",
                Value::List(vec![object([
                    ("min", Value::from(1)),
                    ("max", Value::Null),
                ])]),
            ),
        ]);
        let (state, diags) = read(
            &config,
            Env::from_pairs([(value_variable("cpu").as_str(), "4")]),
        );
        assert!(!diags.has_errors(), "{diags:?}");
        assert!(state.is_wholly_known());
        assert_eq!(state.get("value"), &Value::from("4"));
        assert_eq!(state.get("optional"), &Value::from(true));
        assert_eq!(state.get("form_type"), &Value::from("input"));
        let rule = &state.get("validation").as_list().unwrap_or_default()[0];
        assert_eq!(rule.get("min_disabled"), &Value::from(false));
        assert_eq!(rule.get("max_disabled"), &Value::from(true));
        assert_eq!(rule.get("max"), &Value::from(0));
        assert_eq!(rule.get("monotonic"), &Value::from(""));
    }

    #[test]
    fn validation_failures_name_the_parameter() {
        let config = object([
            ("name", Value::from("cpu")),
            ("type", Value::from("number")),
            ("default", Value::from("9")),
            (
                "validation",
                Value::List(vec![object([("max", Value::from(4))])]),
            ),
        ]);
        let (_, diags) = read(&config, Env::default());
        let first = diags
            .0
            .first()
            .map(|d| (d.summary.clone(), d.detail.clone()));
        assert_eq!(
            first,
            Some((
                "Invalid parameter default value according to 'validation' block (parameter \"cpu\")".into(),
                "value 9 is more than the maximum 4".into()
            ))
        );
    }

    #[test]
    fn ephemeral_needs_mutable_and_default() {
        let config = object([("name", Value::from("x")), ("ephemeral", Value::from(true))]);
        let (_, diags) = read(&config, Env::default());
        assert_eq!(diags.0.len(), 2);
    }
}
