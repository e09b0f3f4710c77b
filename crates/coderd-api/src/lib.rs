//! The JSON API (`/api/v2`), a front door over the domain layer: the router, the middleware
//! stack and thin handlers that parse, call the domain layer (`coderd_core::domain`) and
//! render. The capabilities' routes (the relay and the app proxy, sign-in and groups, tasks)
//! are mounted here beside the API's own; the extractors and the error body they all use are
//! `coderd_http`'s. [`openapi`] describes every operation, generated from the handlers.

mod agents;
mod apikeys;
mod appearance;
mod archive;
mod audit;
mod convert;
mod deployment;
mod devcontainers;
mod external_agents;
mod external_auth;
mod files;
mod health;
mod insights;
mod jobs;
mod limit;
mod meta;
pub mod openapi;
mod organizations;
mod provisioners;
mod replicas;
mod same_origin;
mod secrets;
mod template_versions;
mod templates;
mod user_settings;
mod users;
mod workspace_edits;
mod workspace_usage;
mod workspace_watch;
mod workspaces;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Request, header};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

// Handlers reach the core state as `super::AppState`.
use coderd_core::state::AppState;

/// Limits of the JSON API itself; the deployment's settings are [`coderd_core::state::Options`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest JSON request body.
    pub max_body_bytes: usize,
    /// Workspace lists longer than this are rendered and sent in chunks of this size, so memory
    /// stays bounded however many match (10,000 rendered at once made a 40 MiB response and
    /// several copies of it in memory).
    pub workspace_list_chunk: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            workspace_list_chunk: 500,
        }
    }
}

/// Another front door served beside the API (the dashboard): given the started core, its
/// routes. The API knows other front doors only through this, so it depends on none of them.
pub type FrontDoor = Arc<dyn Fn(AppState) -> Router + Send + Sync>;

/// The whole HTTP surface: the API, plus the routes of other front doors (the dashboard), which
/// are merged before the common layers so they are traced, limited and panic-safe alike.
pub fn router(state: AppState, options: Options, front_doors: &[FrontDoor]) -> Router {
    let max_body = options.max_body_bytes;
    let api = Router::new()
        .merge(meta::routes())
        .merge(users::routes())
        .merge(user_settings::routes())
        .merge(deployment::routes())
        .merge(insights::routes())
        .merge(health::routes())
        .merge(apikeys::routes())
        .merge(organizations::routes())
        .merge(files::routes(state.options.max_file_bytes))
        .merge(templates::routes())
        .merge(template_versions::routes())
        .merge(workspaces::routes())
        .merge(workspace_watch::routes())
        .merge(workspace_usage::routes())
        .merge(workspace_edits::routes())
        .merge(appearance::routes())
        .merge(provisioners::routes())
        .merge(agents::routes())
        .merge(coderd_relay::routes())
        .merge(coderd_relay::apps::port_share::routes())
        .merge(coderd_sso::routes())
        .merge(coderd_sso::groups::routes())
        .merge(crate::audit::routes())
        .merge(crate::secrets::routes())
        .merge(coderd_tasks::routes::routes())
        .merge(crate::devcontainers::routes())
        .merge(crate::external_agents::routes())
        .merge(crate::external_auth::routes())
        .merge(crate::replicas::routes())
        .method_not_allowed_fallback(meta::method_not_allowed)
        .route_layer(axum::middleware::from_fn(meta::record_http_metrics))
        .fallback(meta::api_not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            same_origin::refuse_cross_origin,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limit::api_rate_limit,
        ));

    let app = Router::new()
        .nest("/api/v2", api)
        .merge(meta::root_routes())
        .merge(agents::binary_routes())
        .merge(external_auth::browser_routes())
        .with_state(state.clone());
    let app = front_doors
        .iter()
        .fold(app, |app, door| app.merge(door(state.clone())))
        .layer(axum::middleware::from_fn(meta::deny_framing));
    // App paths and app hosts belong to neither the API nor another front door: the app proxy
    // answers them first (the dashboard's `/@{user}/{workspace}` would take app paths).
    app.layer(axum::middleware::from_fn_with_state(
        coderd_relay::apps::AppProxy::new(state),
        coderd_relay::apps::front_door,
    ))
    .layer(axum::Extension(options))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                tracing::info_span!("http", method = %req.method(), path = %req.uri().path())
            }),
        )
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
            header::HeaderName::from_static("coder-session-token"),
        ]))
        .layer(axum::middleware::from_fn(coderd_http::audit_context::request_context))
        .layer(CatchPanicLayer::custom(meta::panic_response))
}
