//! `coder_workspace_preset`: a named set of parameter values users may pick when creating a
//! workspace, optionally with a pool of prebuilt workspaces (`prebuilds`) Coder keeps ready,
//! scaled by schedules and replaced when they expire. Coder reads presets from the plan; the
//! data source validates them and names itself after the preset.

use super::preset_schedule::{cron_problem, overlap_problem, timezone_problem};
use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Check, NestedBlock, Schema, Type};
use crate::value::Value;

pub(crate) struct WorkspacePreset;

/// An expired prebuild is replaced; 0 never expires, otherwise between an hour and a year.
fn ttl_problem(name: &str, value: &Value) -> Option<String> {
    let ttl = value.as_i64()?;
    (ttl != 0 && !(3600..=31_536_000).contains(&ttl))
        .then(|| format!("{name:?} must be 0 or between 3600 and 31536000, got {ttl}"))
}

fn timezone_rule(_: &str, value: &Value) -> Option<String> {
    timezone_problem(value.as_str()?)
}

fn cron_rule(_: &str, value: &Value) -> Option<String> {
    cron_problem(value.as_str()?)
}

fn prebuilds_block() -> NestedBlock {
    let expiration = Block::new("When unclaimed prebuilds expire and get replaced.").attr(
        Attribute::int("ttl")
            .required()
            .check(Check::Func(ttl_problem))
            .describe("Seconds after which an unclaimed prebuild expires; 0 never."),
    );
    let schedule = Block::new("How many prebuilds to keep while the schedule is active.")
        .attr(
            Attribute::string("cron")
                .required()
                .check(Check::Func(cron_rule))
                .describe("`* HOUR DOM MONTH DOW`: the minute field must be `*`."),
        )
        .attr(
            Attribute::int("instances")
                .required()
                .describe("Prebuilds to keep during this schedule."),
        );
    let scheduling = Block::new("Scales the number of prebuilds by schedule.")
        .attr(
            Attribute::string("timezone")
                .required()
                .check(Check::Func(timezone_rule))
                .describe("IANA time zone of the schedules, e.g. `UTC`, `Europe/Berlin`."),
        )
        .block(NestedBlock::list("schedule", schedule).min_items(1));
    let prebuilds = Block::new("Prebuilt workspaces Coder keeps ready for this preset.")
        .attr(
            Attribute::int("instances")
                .required()
                .check(Check::IntAtLeast(0))
                .describe("Workspaces to keep in reserve."),
        )
        .block(NestedBlock::set("expiration_policy", expiration).max_items(1))
        .block(NestedBlock::list("scheduling", scheduling).max_items(1));
    NestedBlock::set("prebuilds", prebuilds).max_items(1)
}

/// The `cron` of every schedule of the preset's prebuilds, in order.
fn schedules(config: &Value) -> Vec<String> {
    let blocks = |value: &Value, name: &str| value.get(name).as_list().unwrap_or_default().to_vec();
    blocks(config, "prebuilds")
        .iter()
        .flat_map(|p| blocks(p, "scheduling"))
        .flat_map(|s| blocks(&s, "schedule"))
        .filter_map(|s| s.get("cron").as_str().map(str::to_owned))
        .collect()
}

impl DataSource for WorkspacePreset {
    fn type_name(&self) -> &'static str {
        "coder_workspace_preset"
    }

    fn schema(&self) -> Schema {
        let block = Block::new(
            "A predefined configuration users may pick when creating a workspace, optionally \
             with prebuilt workspaces.",
        )
        .attr(
            Attribute::string("id")
                .computed()
                .describe("The preset's id (its name); refer to presets by `name`."),
        )
        .attr(
            Attribute::string("name")
                .required()
                .check(Check::NotEmpty)
                .describe("The name of the preset."),
        )
        .attr(
            Attribute::string("description")
                .check(Check::LenBetween(0, 128))
                .describe("What the preset does."),
        )
        .attr(Attribute::icon("icon").check(Check::LenBetween(0, 256)))
        .attr(
            Attribute::bool("default")
                .default(false)
                .describe("Selected by default; at most one preset per template."),
        )
        .attr(
            Attribute::typed("parameters", Type::Map(Box::new(Type::String)))
                .elem_check(Check::NotEmpty)
                .describe(
                    "Parameter values the preset sets; names the template does not declare \
                     are allowed.",
                ),
        )
        .block(prebuilds_block());
        Schema { version: 1, block }
    }

    fn read(&self, _ctx: &Ctx, config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        if let Some(problem) = overlap_problem(&schedules(config)) {
            diags.error(format!("schedules overlap with each other: {problem}"), "");
            return;
        }
        state.set("id", config.get("name").clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::AttrPath;
    use crate::env::Env;
    use crate::value::object;

    fn schedule(cron: &str, instances: i64) -> Value {
        object([
            ("cron", Value::from(cron)),
            ("instances", Value::from(instances)),
        ])
    }

    fn preset(schedules: Vec<Value>) -> Value {
        object([
            ("name", Value::from("fast")),
            (
                "parameters",
                object([("region", Value::from("eu")), ("cpu", Value::from("4"))]),
            ),
            (
                "prebuilds",
                Value::List(vec![object([
                    ("instances", Value::from(2)),
                    (
                        "expiration_policy",
                        Value::List(vec![object([("ttl", Value::from(86_400))])]),
                    ),
                    (
                        "scheduling",
                        Value::List(vec![object([
                            ("timezone", Value::from("UTC")),
                            ("schedule", Value::List(schedules)),
                        ])]),
                    ),
                ])]),
            ),
        ])
    }

    fn problems(config: &Value) -> Vec<String> {
        let mut diags = Diagnostics::default();
        WorkspacePreset
            .schema()
            .block
            .validate(config, &AttrPath::root(), &mut diags);
        diags.0.into_iter().map(|d| d.summary).collect()
    }

    #[test]
    fn a_preset_is_named_after_itself_with_defaults_filled() {
        let config = preset(vec![schedule("* 8-18 * * 1-5", 5)]);
        assert!(problems(&config).is_empty());
        let (state, diags) =
            crate::data_sources::read_for_test(&WorkspacePreset, &config, Env::default());
        assert!(!diags.has_errors(), "{diags:?}");
        assert_eq!(state.get("id"), &Value::from("fast"));
        assert_eq!(state.get("default"), &Value::from(false));
        assert!(state.get("description").is_null());
        assert!(state.is_wholly_known());
    }

    #[test]
    fn overlapping_schedules_fail_the_read() {
        let config = preset(vec![
            schedule("* 8-12 * * 1-5", 5),
            schedule("* 12-18 * * 1", 2),
        ]);
        let (_, diags) =
            crate::data_sources::read_for_test(&WorkspacePreset, &config, Env::default());
        assert_eq!(
            diags.0.first().map(|d| d.summary.as_str()),
            Some(
                "schedules overlap with each other: schedules overlap: * 8-12 * * 1-5 and * 12-18 * * 1"
            )
        );
    }

    #[test]
    fn attributes_follow_the_go_rules() {
        let mut config = preset(vec![schedule("0 8 * * *", 1)]);
        config.set("name", Value::from(""));
        config.set("description", Value::from("x".repeat(129)));
        config.set("icon", Value::from(":bad"));
        config.set("parameters", object([("region", Value::from(""))]));
        let mut prebuilds = config.get("prebuilds").as_list().unwrap_or_default()[0].clone();
        prebuilds.set("instances", Value::from(-1));
        prebuilds.set(
            "expiration_policy",
            Value::List(vec![object([("ttl", Value::from(60))])]),
        );
        config.set("prebuilds", Value::List(vec![prebuilds]));
        assert_eq!(
            problems(&config),
            [
                r#"expected "name" to not be an empty string, got "#.to_owned(),
                format!(
                    "expected length of description to be in the range (0 - 128), got {}",
                    "x".repeat(129)
                ),
                r#"parse ":bad": missing protocol scheme"#.to_owned(),
                r#"expected "parameters.region" to not be an empty string, got "#.to_owned(),
                "expected instances to be at least (0), got -1".to_owned(),
                r#""ttl" must be 0 or between 3600 and 31536000, got 60"#.to_owned(),
                "cron spec failed validation: minute field should be *".to_owned(),
            ]
        );
    }
}
