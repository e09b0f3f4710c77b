//! `coder_external_agent`: marks an agent as running outside Terraform's resources (the user
//! starts it on a machine of their own), so the agent's workspace has something to host it.

use super::agent_id_attribute;
use crate::provider::Resource;
use crate::schema::{Block, Schema, id_attribute};

pub(crate) struct ExternalAgent;

impl Resource for ExternalAgent {
    fn type_name(&self) -> &'static str {
        "coder_external_agent"
    }

    fn schema(&self) -> Schema {
        let block = Block::new("An external agent to be used in a workspace.")
            .attr(id_attribute("Random id of the external agent."))
            .attr(agent_id_attribute())
            .all_force_new();
        Schema { version: 1, block }
    }
}
