//! Data sources: one module per `coder_*` data source, reading what Coder's provisioner
//! passes in the environment.

mod external_auth;
mod parameter;
mod parameter_rules;
mod preset_schedule;
mod provisioner;
mod script_order;
mod secret;
mod task;
mod workspace;
mod workspace_owner;
mod workspace_preset;
mod workspace_tags;

use crate::provider::DataSource;

pub(crate) fn all() -> Vec<Box<dyn DataSource>> {
    vec![
        Box::new(external_auth::ExternalAuth),
        Box::new(parameter::Parameter),
        Box::new(provisioner::Provisioner),
        Box::new(script_order::ScriptOrder),
        Box::new(secret::Secret),
        Box::new(task::Task),
        Box::new(workspace::Workspace),
        Box::new(workspace_owner::WorkspaceOwner),
        Box::new(workspace_preset::WorkspacePreset),
        Box::new(workspace_tags::WorkspaceTags),
    ]
}

/// Reads `data_source` the way the provider does, with a fixed access URL and `env`.
#[cfg(test)]
pub(crate) fn read_for_test(
    data_source: &dyn DataSource,
    config: &crate::value::Value,
    env: crate::env::Env,
) -> (crate::value::Value, crate::diag::Diagnostics) {
    let mut diags = crate::diag::Diagnostics::default();
    let mut state = crate::plan::plan_block(&data_source.schema().block, config, None);
    match crate::config::AccessUrl::parse("https://coder.example") {
        Ok(access_url) => {
            let ctx = crate::config::Ctx { env, access_url };
            data_source.read(&ctx, config, &mut state, &mut diags);
        }
        Err(err) => diags.error(err.to_string(), ""),
    }
    (state, diags)
}
