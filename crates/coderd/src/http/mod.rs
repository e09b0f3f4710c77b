//! The JSON API (`/api/v2`): the router, the middleware stack, extractors and thin handlers
//! that parse, call the domain layer (`crate::domain`) and render.

pub(crate) mod agents;
pub(crate) mod apikeys;
mod convert;
pub mod extract;
pub(crate) mod files;
mod input;
mod jobs;
mod limit;
pub(crate) mod meta;
pub(crate) mod organizations;
pub(crate) mod provisioners;
mod same_origin;
pub(crate) mod templates;
pub(crate) mod users;
pub(crate) mod websocket;
pub(crate) mod workspaces;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Request, header};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

// Handlers reach the core state as `super::AppState`.
use crate::state::AppState;

/// Limits of the JSON API itself; the deployment's settings are [`crate::state::Options`].
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

/// The whole HTTP surface: the API, plus the routes of other front doors (the dashboard), which
/// are merged before the common layers so they are traced, limited and panic-safe alike.
pub fn router(
    state: AppState,
    options: Options,
    front_doors: &[crate::server::FrontDoor],
) -> Router {
    let max_body = options.max_body_bytes;
    let api = Router::new()
        .merge(meta::routes())
        .merge(users::routes())
        .merge(apikeys::routes())
        .merge(organizations::routes())
        .merge(files::routes(state.options.max_file_bytes))
        .merge(templates::routes())
        .merge(workspaces::routes())
        .merge(provisioners::routes())
        .merge(agents::routes())
        .merge(crate::relay::routes())
        .merge(crate::apps::port_share::routes())
        .merge(crate::sso::routes())
        .merge(crate::groups::routes())
        .merge(crate::audit::routes())
        .merge(crate::secrets::routes::routes())
        .merge(crate::tasks::routes::routes())
        .merge(crate::devcontainers::routes())
        .merge(crate::external_agents::routes())
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
        .with_state(state.clone());
    let app = front_doors
        .iter()
        .fold(app, |app, door| app.merge(door(state.clone())))
        .layer(axum::middleware::from_fn(meta::deny_framing));
    // App paths and app hosts belong to neither the API nor another front door: the app proxy
    // answers them first (the dashboard's `/@{user}/{workspace}` would take app paths).
    app.layer(axum::middleware::from_fn_with_state(
        state,
        crate::apps::front_door,
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
        .layer(axum::middleware::from_fn(crate::audit::request_context))
        .layer(CatchPanicLayer::custom(meta::panic_response))
}
