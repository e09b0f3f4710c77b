//! The tfplugin6 `Provider` service: decodes requests, runs the lifecycle in
//! [`crate::provider`] and encodes the answers. Problems are answered as diagnostics, so
//! Terraform shows them next to the configuration; gRPC errors are reserved for transport.

use std::sync::{Arc, RwLock};

use tonic::{Request, Response, Status};
use tracing::instrument;

use super::convert::{attribute_path, decode_or_report, diagnostics, encode, schema};
use crate::config::{Ctx, provider_schema};
use crate::diag::Diagnostics;
use crate::env::Env;
use crate::proto::tfplugin6 as pb;
use crate::proto::tfplugin6::provider_server::Provider as ProviderRpc;
use crate::provider::Provider;
use crate::value::Value;

type Reply<T> = Result<Response<T>, Status>;

pub(crate) struct ProviderService {
    provider: Provider,
    env: Env,
    /// Set by `ConfigureProvider`, which Terraform calls before any read, plan or apply.
    ctx: RwLock<Option<Arc<Ctx>>>,
}

impl ProviderService {
    pub(crate) fn new(env: Env) -> Self {
        Self {
            provider: Provider::new(),
            env,
            ctx: RwLock::new(None),
        }
    }

    fn ctx(&self, diags: &mut Diagnostics) -> Option<Arc<Ctx>> {
        let ctx = self.ctx.read().ok().and_then(|guard| guard.clone());
        if ctx.is_none() {
            diags.error(
                "The Coder provider was used before it was configured",
                "This is a bug in Terraform or the provider.",
            );
        }
        ctx
    }
}

fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: false,
        get_provider_schema_optional: false,
        move_resource_state: false,
    }
}

#[tonic::async_trait]
impl ProviderRpc for ProviderService {
    #[instrument(skip_all)]
    async fn get_metadata(
        &self,
        _: Request<pb::get_metadata::Request>,
    ) -> Reply<pb::get_metadata::Response> {
        Ok(Response::new(pb::get_metadata::Response {
            server_capabilities: Some(capabilities()),
            diagnostics: Vec::new(),
            data_sources: self
                .provider
                .data_source_schemas()
                .map(|(name, _)| pb::get_metadata::DataSourceMetadata {
                    type_name: name.to_owned(),
                })
                .collect(),
            resources: self
                .provider
                .resource_schemas()
                .map(|(name, _)| pb::get_metadata::ResourceMetadata {
                    type_name: name.to_owned(),
                })
                .collect(),
        }))
    }

    #[instrument(skip_all)]
    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Reply<pb::get_provider_schema::Response> {
        Ok(Response::new(pb::get_provider_schema::Response {
            provider: Some(schema(&provider_schema())),
            resource_schemas: self
                .provider
                .resource_schemas()
                .map(|(n, s)| (n.to_owned(), schema(s)))
                .collect(),
            data_source_schemas: self
                .provider
                .data_source_schemas()
                .map(|(n, s)| (n.to_owned(), schema(s)))
                .collect(),
            diagnostics: Vec::new(),
            provider_meta: None,
            server_capabilities: Some(capabilities()),
        }))
    }

    #[instrument(skip_all)]
    async fn validate_provider_config(
        &self,
        request: Request<pb::validate_provider_config::Request>,
    ) -> Reply<pb::validate_provider_config::Response> {
        let mut diags = Diagnostics::default();
        if let Some(config) = decode_or_report(
            request.get_ref().config.as_ref(),
            "provider config",
            &mut diags,
        ) && let Some(url) = config.get("url").as_str()
            && let Err(err) = url::Url::parse(url)
        {
            diags.error_at(
                crate::diag::AttrPath::attr("url"),
                format!("invalid url {url:?}: {err}"),
                "",
            );
        }
        Ok(Response::new(pb::validate_provider_config::Response {
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn validate_resource_config(
        &self,
        request: Request<pb::validate_resource_config::Request>,
    ) -> Reply<pb::validate_resource_config::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        if let Some(config) = decode_or_report(req.config.as_ref(), "config", &mut diags) {
            diags.extend(self.provider.validate_resource(&req.type_name, &config));
        }
        Ok(Response::new(pb::validate_resource_config::Response {
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn validate_data_resource_config(
        &self,
        request: Request<pb::validate_data_resource_config::Request>,
    ) -> Reply<pb::validate_data_resource_config::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        if let Some(config) = decode_or_report(req.config.as_ref(), "config", &mut diags) {
            diags.extend(self.provider.validate_data_source(&req.type_name, &config));
        }
        Ok(Response::new(pb::validate_data_resource_config::Response {
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name, version = request.get_ref().version))]
    async fn upgrade_resource_state(
        &self,
        request: Request<pb::upgrade_resource_state::Request>,
    ) -> Reply<pb::upgrade_resource_state::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        let raw = req.raw_state.as_ref();
        let upgraded = match raw.filter(|r| !r.json.is_empty()) {
            Some(raw) => match crate::value::from_json(&raw.json) {
                Ok(stored) => self
                    .provider
                    .upgrade_resource(&req.type_name, &stored, &mut diags),
                Err(err) => {
                    diags.error("The stored state is not valid JSON", err.to_string());
                    None
                }
            },
            None if raw.is_some_and(|r| !r.flatmap.is_empty()) => {
                diags.error(
                    "Stored states in the legacy flatmap format are not supported",
                    "",
                );
                None
            }
            None => Some(Value::Null),
        };
        Ok(Response::new(pb::upgrade_resource_state::Response {
            upgraded_state: upgraded.as_ref().map(encode),
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(terraform_version = %request.get_ref().terraform_version))]
    async fn configure_provider(
        &self,
        request: Request<pb::configure_provider::Request>,
    ) -> Reply<pb::configure_provider::Response> {
        let mut diags = Diagnostics::default();
        if let Some(config) = decode_or_report(
            request.get_ref().config.as_ref(),
            "provider config",
            &mut diags,
        ) && let Some(ctx) = Ctx::configure(&config, self.env.clone(), &mut diags)
            && let Ok(mut slot) = self.ctx.write()
        {
            *slot = Some(Arc::new(ctx));
        }
        Ok(Response::new(pb::configure_provider::Response {
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn read_resource(
        &self,
        request: Request<pb::read_resource::Request>,
    ) -> Reply<pb::read_resource::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        let new_state = match (
            self.ctx(&mut diags),
            decode_or_report(req.current_state.as_ref(), "state", &mut diags),
        ) {
            (Some(ctx), Some(current)) => {
                self.provider
                    .read_resource(&ctx, &req.type_name, &current, &mut diags)
            }
            _ => None,
        };
        Ok(Response::new(pb::read_resource::Response {
            new_state: new_state.as_ref().map(encode),
            diagnostics: diagnostics(&diags),
            private: req.private.clone(),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn plan_resource_change(
        &self,
        request: Request<pb::plan_resource_change::Request>,
    ) -> Reply<pb::plan_resource_change::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        let prior = decode_or_report(req.prior_state.as_ref(), "prior state", &mut diags);
        let proposed = decode_or_report(
            req.proposed_new_state.as_ref(),
            "proposed state",
            &mut diags,
        );
        let config = decode_or_report(req.config.as_ref(), "config", &mut diags);
        let planned = match (prior, proposed, config) {
            (Some(prior), Some(proposed), Some(config)) => {
                self.provider
                    .plan_resource(&req.type_name, &prior, &proposed, &config, &mut diags)
            }
            _ => None,
        };
        Ok(Response::new(pb::plan_resource_change::Response {
            planned_state: planned.as_ref().map(|p| encode(&p.state)),
            requires_replace: planned
                .iter()
                .flat_map(|p| p.requires_replace.iter().map(attribute_path))
                .collect(),
            planned_private: Vec::new(),
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn apply_resource_change(
        &self,
        request: Request<pb::apply_resource_change::Request>,
    ) -> Reply<pb::apply_resource_change::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        let prior = decode_or_report(req.prior_state.as_ref(), "prior state", &mut diags);
        let planned = decode_or_report(req.planned_state.as_ref(), "planned state", &mut diags);
        let config = decode_or_report(req.config.as_ref(), "config", &mut diags);
        let new_state =
            match (self.ctx(&mut diags), prior, planned, config) {
                (Some(ctx), Some(prior), Some(planned), Some(config)) => self
                    .provider
                    .apply_resource(&ctx, &req.type_name, &prior, &planned, &config, &mut diags),
                _ => None,
            };
        Ok(Response::new(pb::apply_resource_change::Response {
            new_state: new_state.as_ref().map(encode),
            private: Vec::new(),
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn import_resource_state(
        &self,
        request: Request<pb::import_resource_state::Request>,
    ) -> Reply<pb::import_resource_state::Response> {
        let mut diags = Diagnostics::default();
        diags.error(
            format!(
                "resource {} doesn't support import",
                request.get_ref().type_name
            ),
            "",
        );
        Ok(Response::new(pb::import_resource_state::Response {
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all)]
    async fn move_resource_state(
        &self,
        request: Request<pb::move_resource_state::Request>,
    ) -> Reply<pb::move_resource_state::Response> {
        let mut diags = Diagnostics::default();
        diags.error(
            format!(
                "resource {} doesn't support moving state from other resource types",
                request.get_ref().target_type_name
            ),
            "",
        );
        Ok(Response::new(pb::move_resource_state::Response {
            target_state: None,
            diagnostics: diagnostics(&diags),
        }))
    }

    #[instrument(skip_all, fields(type_name = %request.get_ref().type_name))]
    async fn read_data_source(
        &self,
        request: Request<pb::read_data_source::Request>,
    ) -> Reply<pb::read_data_source::Response> {
        let req = request.get_ref();
        let mut diags = Diagnostics::default();
        let state = match (
            self.ctx(&mut diags),
            decode_or_report(req.config.as_ref(), "config", &mut diags),
        ) {
            (Some(ctx), Some(config)) => {
                self.provider
                    .read_data_source(&ctx, &req.type_name, &config, &mut diags)
            }
            _ => None,
        };
        Ok(Response::new(pb::read_data_source::Response {
            state: state.as_ref().map(encode),
            diagnostics: diagnostics(&diags),
        }))
    }

    async fn get_functions(
        &self,
        _: Request<pb::get_functions::Request>,
    ) -> Reply<pb::get_functions::Response> {
        Ok(Response::new(pb::get_functions::Response {
            diagnostics: Vec::new(),
        }))
    }

    #[instrument(skip_all)]
    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Reply<pb::stop_provider::Response> {
        // Every operation finishes in microseconds; there is nothing to interrupt.
        Ok(Response::new(pb::stop_provider::Response {
            error: String::new(),
        }))
    }
}
