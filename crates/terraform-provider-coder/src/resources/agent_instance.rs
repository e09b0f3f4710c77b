//! `coder_agent_instance`: ties a cloud instance id to an agent that authenticates with its
//! instance identity instead of a token.

use super::agent_id_attribute;
use crate::provider::Resource;
use crate::schema::{Attribute, Block, Schema, id_attribute};

pub(crate) struct AgentInstance;

impl Resource for AgentInstance {
    fn type_name(&self) -> &'static str {
        "coder_agent_instance"
    }

    fn schema(&self) -> Schema {
        let block =
            Block::new("Associates an instance id with an agent for instance identity auth.")
                .attr(id_attribute("Random id of this association."))
                .attr(agent_id_attribute())
                .attr(
                    Attribute::string("instance_id")
                        .required()
                        .describe("The provisioned instance's identifier."),
                )
                .all_force_new();
        Schema { version: 0, block }
    }
}
