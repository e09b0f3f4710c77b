//! `coder_devcontainer`: a dev container the agent should know of and start, and the id of
//! the sub-agent that will run inside it (apps, scripts and envs may attach to that id).

use super::agent_id_attribute;
use crate::config::Ctx;
use crate::diag::Diagnostics;
use crate::provider::{Resource, fill_new_id};
use crate::schema::{Attribute, Block, Check, Schema, id_attribute};
use crate::value::Value;

pub(crate) struct Devcontainer;

impl Resource for Devcontainer {
    fn type_name(&self) -> &'static str {
        "coder_devcontainer"
    }

    fn schema(&self) -> Schema {
        let block = Block::new(
            "A Dev Container the agent should know of and attempt to autostart \
             (needs a container engine in the workspace).",
        )
        .attr(id_attribute("Random id of the dev container."))
        .attr(agent_id_attribute())
        .attr(
            Attribute::string("workspace_folder")
                .required()
                .check(Check::NotEmpty)
                .describe("The workspace folder of the Dev Container."),
        )
        .attr(
            Attribute::string("config_path")
                .describe("Path of the Dev Container configuration file (`devcontainer.json`)."),
        )
        .attr(
            Attribute::string("subagent_id").computed().describe(
                "Id of the sub-agent running inside the container; use it as `agent_id`.",
            ),
        )
        .all_force_new();
        Schema { version: 1, block }
    }

    fn create(&self, _ctx: &Ctx, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
        if state.get("subagent_id").is_unknown() || state.get("subagent_id").is_null() {
            state.set("subagent_id", Value::from(uuid::Uuid::new_v4().to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::object;

    #[test]
    fn the_workspace_folder_must_not_be_empty() {
        let schema = Devcontainer.schema();
        let mut diags = Diagnostics::default();
        let config = object([("workspace_folder", Value::from(""))]);
        schema
            .block
            .validate(&config, &crate::diag::AttrPath::root(), &mut diags);
        assert_eq!(
            diags.0.first().map(|d| d.summary.as_str()),
            Some(r#"expected "workspace_folder" to not be an empty string, got "#)
        );
    }
}
