#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod assets;
mod error;
mod live;
mod pages;
mod security;
mod session;
mod view;

use axum::Router;
use axum::routing::{get, post};
use coderd_core::state::AppState;

pub use error::PageError;

/// The dashboard's routes, to be merged with coderd's (see `coderd_api::FrontDoor`).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(pages::root))
        .route(
            "/login",
            get(pages::auth::login_page).post(pages::auth::login),
        )
        .route("/logout", post(pages::auth::logout))
        .route(
            "/cli-auth",
            get(pages::cli_auth::page).post(pages::cli_auth::create),
        )
        .route(
            "/setup",
            get(pages::auth::setup_page).post(pages::auth::setup),
        )
        .route("/workspaces", get(pages::workspaces::list))
        .route("/templates", get(pages::templates::list))
        .route("/templates/{template}", get(pages::template::show))
        .route(
            "/templates/{template}/versions/{version}",
            get(pages::template::version),
        )
        .route(
            "/templates/{template}/versions/{version}/import",
            get(pages::template::import_fragment),
        )
        .route(
            "/templates/{template}/versions",
            get(pages::admin::versions),
        )
        .route(
            "/deployment/users",
            get(pages::users::list).post(pages::users::create),
        )
        .route(
            "/deployment/users/{user}/status",
            post(pages::users::status),
        )
        .route("/deployment/users/{user}/roles", post(pages::users::roles))
        .route(
            "/deployment/users/{user}/delete",
            post(pages::users::delete),
        )
        .route("/users", get(pages::users::redirect))
        .route(
            "/settings/tokens",
            get(pages::tokens::list).post(pages::tokens::create),
        )
        .route("/settings/tokens/{id}/delete", post(pages::tokens::delete))
        .route("/settings/external-auth", get(pages::git::external_auth))
        .route(
            "/settings/external-auth/{id}/unlink",
            post(pages::git::unlink),
        )
        .route(
            "/settings/ssh-keys",
            get(pages::git::ssh_keys).post(pages::git::regenerate_ssh_key),
        )
        .route("/health", get(pages::health::show))
        .route("/deployment/overview", get(pages::overview::show))
        .route(
            "/organizations/{org}/provisioners",
            get(pages::admin::provisioners),
        )
        .route(
            "/organizations/{org}/provisioner-jobs",
            get(pages::provisioning::jobs),
        )
        .route(
            "/organizations/{org}/provisioner-jobs/{job}/cancel",
            post(pages::provisioning::cancel_job),
        )
        .route(
            "/organizations/{org}/provisioner-keys",
            get(pages::provisioning::keys).post(pages::provisioning::create_key),
        )
        .route(
            "/organizations/{org}/provisioner-keys/{name}/delete",
            post(pages::provisioning::delete_key),
        )
        .route(
            "/templates/{template}/workspace",
            get(pages::create::form).post(pages::create::submit),
        )
        // Coder's workspace URL: `/@{owner}/{workspace}`; axum cannot capture a segment's
        // suffix, so the owner segment is read whole and its `@` checked by the handler.
        .route("/{owner}/{workspace}", get(pages::workspace::show))
        .route(
            "/{owner}/{workspace}/builds",
            get(pages::builds::history).post(pages::workspace::build),
        )
        .route(
            "/{owner}/{workspace}/builds/{number}",
            get(pages::builds::show),
        )
        .route(
            "/{owner}/{workspace}/cancel",
            post(pages::workspace::cancel),
        )
        .route(
            "/{owner}/{workspace}/fragment",
            get(pages::workspace::fragment),
        )
        // `{workspace}` may name the agent too: `/@alice/dev.main/terminal`.
        .route("/{owner}/{workspace}/terminal", get(pages::terminal::page))
        .route("/-/terminal/{agent}", get(pages::terminal::socket))
        .route("/-/live", get(live::socket))
        .route("/-/assets/{hash}/{file}", get(assets::serve))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn(security::headers))
        .with_state(state)
}
