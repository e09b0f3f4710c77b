//! `coder_workspace`: the workspace being built and the transition (start/stop) of the build.

use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::DataSource;
use crate::schema::{Attribute, Block, Schema};
use crate::value::Value;

pub(crate) struct Workspace;

/// Build attributes Coder requires during a real build and leaves empty in template imports.
const REQUIRED_DURING_BUILD: [(&str, &str, &str); 3] = [
    ("template_id", "CODER_WORKSPACE_TEMPLATE_ID", "template ID"),
    (
        "template_name",
        "CODER_WORKSPACE_TEMPLATE_NAME",
        "template name",
    ),
    (
        "template_version",
        "CODER_WORKSPACE_TEMPLATE_VERSION",
        "template version",
    ),
];

fn truthy(ctx: &Ctx, name: &str) -> bool {
    ctx.env
        .lookup(name)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl DataSource for Workspace {
    fn type_name(&self) -> &'static str {
        "coder_workspace"
    }

    fn schema(&self) -> Schema {
        let computed = |name, ty: fn(&'static str) -> Attribute, description| {
            ty(name).computed().describe(description)
        };
        let block = Block::new("The workspace of the current build.")
            .attr(computed("id", Attribute::string, "The workspace's id."))
            .attr(computed("name", Attribute::string, "The workspace's name."))
            .attr(computed(
                "transition",
                Attribute::string,
                "`start` or `stop`.",
            ))
            .attr(computed(
                "start_count",
                Attribute::int,
                "1 when starting, else 0: use as `count`.",
            ))
            .attr(computed(
                "access_url",
                Attribute::string,
                "The Coder deployment's access URL.",
            ))
            .attr(computed(
                "access_port",
                Attribute::int,
                "Port of the access URL.",
            ))
            .attr(computed(
                "template_id",
                Attribute::string,
                "Id of the workspace's template.",
            ))
            .attr(computed(
                "template_name",
                Attribute::string,
                "Name of the workspace's template.",
            ))
            .attr(computed(
                "template_version",
                Attribute::string,
                "Name of the template version.",
            ))
            .attr(computed(
                "is_prebuild",
                Attribute::bool,
                "Whether this is an unclaimed prebuilt workspace.",
            ))
            .attr(computed(
                "prebuild_count",
                Attribute::int,
                "1 for an unclaimed prebuild, else 0.",
            ))
            .attr(computed(
                "is_prebuild_claim",
                Attribute::bool,
                "Whether a prebuild was just claimed.",
            ));
        Schema { version: 1, block }
    }

    fn read(&self, ctx: &Ctx, _config: &Value, state: &mut Value, diags: &mut Diagnostics) {
        let env = &ctx.env;
        let transition = env
            .non_empty("CODER_WORKSPACE_TRANSITION")
            .unwrap_or("start");
        state.set("transition", Value::from(transition));
        state.set("start_count", Value::from(i64::from(transition == "start")));
        let claimed = truthy(ctx, "CODER_WORKSPACE_IS_PREBUILD_CLAIM");
        let prebuild = truthy(ctx, "CODER_WORKSPACE_IS_PREBUILD") && !claimed;
        state.set("is_prebuild", Value::from(prebuild));
        state.set("prebuild_count", Value::from(i64::from(prebuild)));
        state.set("is_prebuild_claim", Value::from(claimed));
        state.set(
            "name",
            Value::from(env.non_empty("CODER_WORKSPACE_NAME").unwrap_or("default")),
        );
        let id = env
            .non_empty("CODER_WORKSPACE_ID")
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        state.set("id", Value::from(id));
        let building = env.non_empty("CODER_WORKSPACE_BUILD_ID").is_some();
        for (attr, var, what) in REQUIRED_DURING_BUILD {
            let value = env.or_empty(var);
            if building && value.is_empty() {
                diags.error(format!("{what} is missing: {var} is required"), "");
            }
            state.set(attr, Value::from(value));
        }
        state.set("access_url", Value::from(ctx.access_url.as_str()));
        state.set("access_port", Value::from(ctx.access_url.port()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::value::object;

    fn read(env: Env) -> (Value, Diagnostics) {
        crate::data_sources::read_for_test(&Workspace, &object([]), env)
    }

    #[test]
    fn start_count_follows_the_transition() {
        let (state, _) = read(Env::from_pairs([("CODER_WORKSPACE_TRANSITION", "stop")]));
        assert_eq!(state.get("start_count"), &Value::from(0));
        let (state, _) = read(Env::default());
        assert_eq!(state.get("transition"), &Value::from("start"));
        assert_eq!(state.get("start_count"), &Value::from(1));
        assert_eq!(state.get("access_port"), &Value::from(443));
        assert!(state.is_wholly_known());
    }

    #[test]
    fn a_build_requires_template_facts() {
        let (_, diags) = read(Env::from_pairs([("CODER_WORKSPACE_BUILD_ID", "b")]));
        assert_eq!(diags.0.len(), 3);
        let (_, diags) = read(Env::default());
        assert!(!diags.has_errors());
    }

    #[test]
    fn prebuild_claims_win_over_prebuilds() {
        let (state, _) = read(Env::from_pairs([
            ("CODER_WORKSPACE_IS_PREBUILD", "true"),
            ("CODER_WORKSPACE_IS_PREBUILD_CLAIM", "TRUE"),
        ]));
        assert_eq!(state.get("is_prebuild"), &Value::from(false));
        assert_eq!(state.get("is_prebuild_claim"), &Value::from(true));
    }
}
