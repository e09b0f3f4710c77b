//! Managed resources: one module per `coder_*` resource type.

mod agent;
mod agent_instance;
mod app;
mod cron;
mod env;
mod metadata;
mod script;

use crate::provider::Resource;

pub(crate) fn all() -> Vec<Box<dyn Resource>> {
    vec![
        Box::new(agent::Agent),
        Box::new(agent_instance::AgentInstance),
        Box::new(app::App),
        Box::new(env::Env),
        Box::new(metadata::Metadata),
        Box::new(script::Script),
    ]
}

/// The `agent_id` attribute of resources that attach to a `coder_agent`.
pub(crate) fn agent_id_attribute() -> crate::schema::Attribute {
    crate::schema::Attribute::string("agent_id")
        .required()
        .describe("The `id` of the `coder_agent` this belongs to.")
}
