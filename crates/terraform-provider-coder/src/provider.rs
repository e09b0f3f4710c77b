//! The provider's resource and data source types and the protocol-level lifecycle around
//! them (validate, plan, apply, refresh, upgrade, read), independent of gRPC.

use std::collections::BTreeMap;

use crate::config::Ctx;
use crate::diag::{AttrPath, Diagnostics};
use crate::plan::{first_unknown, merge_block, normalize_state, plan_block, replacing_paths};
use crate::schema::Schema;
use crate::value::Value;
use crate::{data_sources, resources};

/// A managed resource type. The defaults suit Coder's resources, which only mint an id.
pub(crate) trait Resource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    /// Checks beyond the schema's per-attribute rules; `config` may hold unknowns.
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Fills planned values derived from the config (e.g. nested flags), left unknown otherwise.
    fn plan_derived(&self, _config: &Value, _planned: &mut Value) {}
    /// Fills computed values that are still unknown when the resource gets created.
    fn create(&self, _ctx: &Ctx, state: &mut Value, _diags: &mut Diagnostics) {
        fill_new_id(state);
    }
    /// Refreshes a stored state (Coder's agent mints a fresh token on every refresh).
    fn refresh(&self, _ctx: &Ctx, _state: &mut Value, _diags: &mut Diagnostics) {}
}

/// A data source type: its state is its config with every computed attribute filled.
pub(crate) trait DataSource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    fn read(&self, ctx: &Ctx, config: &Value, state: &mut Value, diags: &mut Diagnostics);
}

/// Sets a random UUID `id` unless the state already has one.
pub(crate) fn fill_new_id(state: &mut Value) {
    if state.get("id").is_unknown() || state.get("id").is_null() {
        state.set("id", Value::from(uuid::Uuid::new_v4().to_string()));
    }
}

pub(crate) struct Planned {
    pub(crate) state: Value,
    pub(crate) requires_replace: Vec<AttrPath>,
}

/// All types this provider serves, with their schemas built once.
pub(crate) struct Provider {
    resources: BTreeMap<&'static str, (Box<dyn Resource>, Schema)>,
    data_sources: BTreeMap<&'static str, (Box<dyn DataSource>, Schema)>,
}

impl Provider {
    pub(crate) fn new() -> Self {
        let resources = resources::all()
            .into_iter()
            .map(|r| {
                let schema = r.schema();
                (r.type_name(), (r, schema))
            })
            .collect();
        let data_sources = data_sources::all()
            .into_iter()
            .map(|d| {
                let schema = d.schema();
                (d.type_name(), (d, schema))
            })
            .collect();
        Self {
            resources,
            data_sources,
        }
    }

    pub(crate) fn resource_schemas(&self) -> impl Iterator<Item = (&'static str, &Schema)> {
        self.resources
            .iter()
            .map(|(name, (_, schema))| (*name, schema))
    }

    pub(crate) fn data_source_schemas(&self) -> impl Iterator<Item = (&'static str, &Schema)> {
        self.data_sources
            .iter()
            .map(|(name, (_, schema))| (*name, schema))
    }

    fn resource(
        &self,
        type_name: &str,
        diags: &mut Diagnostics,
    ) -> Option<&(Box<dyn Resource>, Schema)> {
        let found = self.resources.get(type_name);
        if found.is_none() {
            diags.error(format!("unsupported resource type {type_name:?}"), "");
        }
        found
    }

    fn data_source(
        &self,
        type_name: &str,
        diags: &mut Diagnostics,
    ) -> Option<&(Box<dyn DataSource>, Schema)> {
        let found = self.data_sources.get(type_name);
        if found.is_none() {
            diags.error(format!("unsupported data source {type_name:?}"), "");
        }
        found
    }

    pub(crate) fn validate_resource(&self, type_name: &str, config: &Value) -> Diagnostics {
        let mut diags = Diagnostics::default();
        if let Some((resource, schema)) = self.resource(type_name, &mut diags) {
            schema.block.validate(config, &AttrPath::root(), &mut diags);
            resource.validate(config, &mut diags);
        }
        diags
    }

    pub(crate) fn validate_data_source(&self, type_name: &str, config: &Value) -> Diagnostics {
        let mut diags = Diagnostics::default();
        if let Some((data_source, schema)) = self.data_source(type_name, &mut diags) {
            schema.block.validate(config, &AttrPath::root(), &mut diags);
            data_source.validate(config, &mut diags);
        }
        diags
    }

    pub(crate) fn plan_resource(
        &self,
        type_name: &str,
        prior: &Value,
        proposed: &Value,
        config: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Planned> {
        let (resource, schema) = self.resource(type_name, diags)?;
        if proposed.is_null() {
            // Destroying: the planned state is null and nothing needs deciding.
            return Some(Planned {
                state: Value::Null,
                requires_replace: Vec::new(),
            });
        }
        let block = &schema.block;
        let prior = (!prior.is_null()).then_some(prior);
        let mut state = plan_block(block, config, prior);
        let mut requires_replace = Vec::new();
        if let Some(prior) = prior {
            requires_replace = replacing_paths(block, prior, &state);
            if !requires_replace.is_empty() {
                // A replacement is a new resource: its computed values get minted again.
                for attr in block.attributes.iter().filter(|a| a.is_computed_only()) {
                    state.set(attr.name, Value::unknown());
                }
            }
        }
        resource.plan_derived(config, &mut state);
        Some(Planned {
            state,
            requires_replace,
        })
    }

    pub(crate) fn apply_resource(
        &self,
        ctx: &Ctx,
        type_name: &str,
        prior: &Value,
        planned: &Value,
        config: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        let (resource, schema) = self.resource(type_name, diags)?;
        if planned.is_null() {
            return Some(Value::Null);
        }
        let block = &schema.block;
        // The config is wholly known now: plan it again to learn what was unknown at plan time.
        let mut fresh = plan_block(block, config, (!prior.is_null()).then_some(prior));
        resource.plan_derived(config, &mut fresh);
        let mut state = merge_block(block, planned, &fresh);
        resource.create(ctx, &mut state, diags);
        if diags.has_errors() {
            return None;
        }
        if let Some(path) = first_unknown(&state, &AttrPath::root()) {
            diags.error(
                format!("{type_name}: {path} is still unknown after apply"),
                "This is a bug in the Coder provider.",
            );
            return None;
        }
        Some(state)
    }

    pub(crate) fn read_resource(
        &self,
        ctx: &Ctx,
        type_name: &str,
        current: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        let (resource, _) = self.resource(type_name, diags)?;
        let mut state = current.clone();
        if !state.is_null() {
            resource.refresh(ctx, &mut state, diags);
        }
        Some(state)
    }

    /// Converts a stored state of any earlier schema version to the current schema.
    pub(crate) fn upgrade_resource(
        &self,
        type_name: &str,
        stored: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        let (_, schema) = self.resource(type_name, diags)?;
        Some(normalize_state(&schema.block, stored))
    }

    pub(crate) fn read_data_source(
        &self,
        ctx: &Ctx,
        type_name: &str,
        config: &Value,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        let (data_source, schema) = self.data_source(type_name, diags)?;
        let mut state = plan_block(&schema.block, config, None);
        data_source.read(ctx, config, &mut state, diags);
        if diags.has_errors() {
            return None;
        }
        if let Some(path) = first_unknown(&state, &AttrPath::root()) {
            diags.error(
                format!("{type_name}: {path} is unknown after read"),
                "This is a bug in the Coder provider.",
            );
            return None;
        }
        Some(state)
    }
}
