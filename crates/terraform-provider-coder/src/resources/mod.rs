//! Managed resources: one module per `coder_*` resource type.

mod agent;
mod agent_instance;
mod ai_task;
mod app;
mod cron;
mod devcontainer;
mod env;
mod external_agent;
mod metadata;
mod script;

use crate::provider::Resource;

pub(crate) fn all() -> Vec<Box<dyn Resource>> {
    vec![
        Box::new(agent::Agent),
        Box::new(agent_instance::AgentInstance),
        Box::new(ai_task::AiTask),
        Box::new(app::App),
        Box::new(devcontainer::Devcontainer),
        Box::new(env::Env),
        Box::new(external_agent::ExternalAgent),
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
