//! The OpenAPI document coderd serves at `/api/v2/openapi.json`, generated from the handlers'
//! annotations so it cannot drift from the code; [`modify`] adds what applies to many
//! operations at once (error responses, authentication, the request bodies' limits).

mod modify;

use modify::{Errors, Limits, Security};

use std::sync::OnceLock;

use utoipa::OpenApi;

use crate::{
    agents, apikeys, appearance, files, meta, organizations, provisioners, templates, users,
    workspace_usage, workspaces,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Coder API (coder-rs)",
        description = "Coder's /api/v2, as implemented by coder-rs."
    ),
    paths(
        meta::build_info,
        appearance::get_appearance,
        appearance::update_appearance,
        workspace_usage::report_usage,
        users::first_user_exists,
        users::create_first_user,
        users::login,
        users::logout,
        users::assignable_roles,
        users::list_users,
        users::create_user,
        users::get_user,
        users::delete_user,
        users::suspend_user,
        users::activate_user,
        users::user_roles,
        users::update_user_roles,
        users::update_password,
        apikeys::create_token,
        apikeys::create_session_key,
        apikeys::list_tokens,
        apikeys::token_by_name,
        apikeys::key_by_id,
        apikeys::delete_key,
        organizations::list_organizations,
        organizations::create_organization,
        organizations::get_organization,
        organizations::user_organizations,
        organizations::list_members,
        organizations::add_member,
        organizations::remove_member,
        organizations::update_member_roles,
        files::upload,
        files::download,
        templates::create_version,
        templates::get_version,
        templates::cancel_version,
        templates::version_logs,
        templates::version_resources,
        templates::version_parameters,
        templates::version_variables,
        templates::version_presets,
        templates::create_template,
        templates::list_org_templates,
        templates::list_all_templates,
        templates::template_by_name,
        templates::get_template,
        templates::update_template,
        templates::delete_template,
        templates::list_versions,
        templates::version_by_name,
        templates::promote_version,
        workspaces::create_workspace,
        workspaces::create_workspace_in_org,
        workspaces::list_workspaces,
        workspaces::get_workspace,
        workspaces::update_autostart,
        workspaces::update_ttl,
        workspaces::extend_deadline,
        workspaces::update_dormancy,
        workspaces::update_automatic_updates,
        workspaces::resolve_autostart,
        workspaces::workspace_by_name,
        workspaces::build_by_number,
        workspaces::create_build,
        workspaces::list_builds,
        workspaces::get_build,
        workspaces::cancel_build,
        workspaces::build_logs,
        workspaces::build_resources,
        workspaces::build_state,
        workspaces::build_parameters,
        workspaces::build_timings,
        provisioners::list_daemons,
        provisioners::list_jobs,
        provisioners::get_job,
        provisioners::create_key,
        provisioners::list_keys,
        provisioners::delete_key,
        agents::get_agent,
        agents::agent_logs,
        agents::watch_metadata,
        coderd_relay::routes::connect,
        coderd_relay::routes::pty,
        coderd_relay::routes::listening_ports,
        coderd_relay::apps::handoff::auth_redirect,
        coderd_relay::apps::port_share::list,
        coderd_relay::apps::port_share::upsert,
        coderd_relay::apps::port_share::remove,
        coderd_sso::routes::auth_methods,
        coderd_sso::routes::oidc_callback,
        coderd_sso::groups::routes::list_groups,
        coderd_sso::groups::routes::create_group,
        coderd_sso::groups::routes::group_by_name,
        coderd_sso::groups::routes::get_group,
        coderd_sso::groups::routes::patch_group,
        coderd_sso::groups::routes::delete_group,
        coderd_sso::groups::routes::template_acl,
        coderd_sso::groups::routes::update_template_acl,
        coderd_sso::groups::routes::acl_available,
        crate::audit::routes::audit_logs,
        coderd_sso::routes::github_start,
        coderd_sso::routes::github_callback,
        crate::secrets::create,
        crate::secrets::list,
        crate::secrets::read,
        crate::secrets::update,
        crate::secrets::remove,
        coderd_tasks::routes::create,
        coderd_tasks::routes::list,
        coderd_tasks::routes::read,
        coderd_tasks::routes::remove,
        coderd_tasks::routes::send,
        coderd_tasks::routes::logs,
        crate::devcontainers::containers,
        crate::devcontainers::recreate_devcontainer,
        crate::external_agents::credentials,
        crate::external_agents::init_script,
    ),
    components(schemas(codersdk::Response, codersdk::ValidationError)),
    modifiers(&Limits, &Errors, &Security)
)]
pub struct ApiDoc;

/// The document as JSON, built once.
pub fn document_json() -> String {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| ApiDoc::openapi().to_pretty_json().unwrap_or_default())
        .clone()
}
