//! `coder_env`: one environment variable set by an agent in the workspace.

use regex::Regex;

use super::agent_id_attribute;
use crate::provider::Resource;
use crate::schema::{Attribute, Block, Check, Schema, id_attribute};

pub(crate) struct Env;

impl Resource for Env {
    fn type_name(&self) -> &'static str {
        "coder_env"
    }

    fn schema(&self) -> Schema {
        let mut name = Attribute::string("name")
            .required()
            .describe("Name of the variable.");
        if let Ok(pattern) = Regex::new("^[a-zA-Z_][a-zA-Z0-9_]*$") {
            name = name.check(Check::Pattern(
                pattern,
                "must be a valid environment variable name",
            ));
        }
        let block = Block::new("Sets an environment variable in the workspace.")
            .attr(id_attribute("Random id of this variable."))
            .attr(agent_id_attribute())
            .attr(name)
            .attr(Attribute::string("value").describe("Value of the variable."))
            .attr(
                Attribute::string("merge_strategy")
                    .default("replace")
                    .one_of(&["replace", "append", "prepend", "error"])
                    .describe("How to combine several `coder_env` of the same name."),
            )
            .all_force_new();
        Schema { version: 1, block }
    }
}
