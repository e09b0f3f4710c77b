//! The resources that hang off an agent: `coder_app`, `coder_env` and `coder_script`.
//!
//! Each names its agent by `agent_id`. After apply the ids are known and must be equal. At plan
//! time a new agent's id is unknown and so is every `agent_id` pointing at it; then the resource
//! belongs to the agent its graph node has an edge to.

use std::collections::HashSet;

use codersdk::proto::{
    Agent, App, AppOpenIn, AppSharingLevel, Env, EnvMergeStrategy, Healthcheck, Script,
};

use super::ConvertError;
use super::agents::{PlacedAgent, is_dns_label};
use super::attrs::Attrs;
use super::graph::Graph;
use super::show::TfResource;

pub(crate) const APP_SLUG_PATTERN: &str = "^[a-z0-9](-?[a-z0-9])*$";

/// Attaches every `coder_app`, `coder_env` and `coder_script` to its agents. App slugs are
/// checked (valid, and unique in the template) even for apps whose agent was dropped.
pub(crate) fn attach_children(
    resources: &[TfResource],
    graph: &Graph,
    agents: &mut [PlacedAgent],
) -> Result<(), ConvertError> {
    let mut slugs = HashSet::new();
    let checked_app = |resource: &TfResource, attrs: &Attrs<'_>| {
        let app = decode_app(resource, attrs)?;
        if !is_dns_label(&app.slug) {
            return Err(ConvertError::InvalidAppSlug { slug: app.slug });
        }
        if !slugs.insert(app.slug.clone()) {
            return Err(ConvertError::DuplicateAppSlug { slug: app.slug });
        }
        Ok(app)
    };
    attach_each(
        resources,
        graph,
        agents,
        "coder_app",
        checked_app,
        |agent, app| {
            agent.apps.push(app);
        },
    )?;
    attach_each(
        resources,
        graph,
        agents,
        "coder_env",
        decode_env,
        |agent, env| {
            agent.extra_envs.push(env);
        },
    )?;
    attach_each(
        resources,
        graph,
        agents,
        "coder_script",
        decode_script,
        |agent, script| {
            agent.scripts.push(script);
        },
    )
}

pub(crate) fn decode_env(_: &TfResource, attrs: &Attrs<'_>) -> Result<Env, ConvertError> {
    Ok(Env {
        name: attrs.string("name")?,
        value: attrs.string("value")?,
        // "replace" is the provider's default, and what providers before the attribute did.
        merge_strategy: attrs.choice(
            "merge_strategy",
            &[
                ("", EnvMergeStrategy::Replace),
                ("replace", EnvMergeStrategy::Replace),
                ("append", EnvMergeStrategy::Append),
                ("prepend", EnvMergeStrategy::Prepend),
                ("error", EnvMergeStrategy::Error),
            ],
        )?,
    })
}

pub(crate) fn decode_script(
    resource: &TfResource,
    attrs: &Attrs<'_>,
) -> Result<Script, ConvertError> {
    Ok(Script {
        display_name: attrs.string("display_name")?,
        icon: attrs.string("icon")?,
        script: attrs.string("script")?,
        cron: attrs.string("cron")?,
        start_blocks_login: attrs.bool("start_blocks_login")?,
        run_on_start: attrs.bool("run_on_start")?,
        run_on_stop: attrs.bool("run_on_stop")?,
        timeout_seconds: attrs.int("timeout")?,
        log_path: attrs.string("log_path")?,
        resource_address: resource.address.clone(),
        dependencies: Vec::new(),
    })
}

/// Decodes each resource of `kind` and gives it to every agent it belongs to.
fn attach_each<T: Clone>(
    resources: &[TfResource],
    graph: &Graph,
    agents: &mut [PlacedAgent],
    kind: &str,
    mut decode: impl FnMut(&TfResource, &Attrs<'_>) -> Result<T, ConvertError>,
    add: impl Fn(&mut Agent, T),
) -> Result<(), ConvertError> {
    for resource in resources.iter().filter(|r| r.kind == kind) {
        let attrs = Attrs::new(&resource.address, &resource.values);
        let item = decode(resource, &attrs)?;
        let agent_id = attrs.string("agent_id")?;
        for placed in agents.iter_mut() {
            if belongs_to(graph, placed, resource, &agent_id) {
                add(&mut placed.agent, item.clone());
            }
        }
    }
    Ok(())
}

fn belongs_to(graph: &Graph, placed: &PlacedAgent, resource: &TfResource, agent_id: &str) -> bool {
    if placed.agent.id.is_empty() && agent_id.is_empty() {
        return graph.depends_on(&resource.label, &placed.label);
    }
    placed.agent.id == agent_id
}

pub(crate) fn decode_app(resource: &TfResource, attrs: &Attrs<'_>) -> Result<App, ConvertError> {
    // Old templates may lack a slug; the resource name stands in.
    let mut slug = attrs.string("slug")?;
    if slug.is_empty() {
        slug.clone_from(&resource.name);
    }
    let mut display_name = attrs.string("display_name")?;
    if display_name.is_empty() {
        // `name` is the deprecated spelling of display_name.
        display_name = attrs.string("name")?;
    }
    if display_name.is_empty() {
        display_name.clone_from(&slug);
    }
    let healthcheck = match attrs.blocks("healthcheck")?.first() {
        None => None,
        Some(block) => Some(Healthcheck {
            url: block.string("url")?,
            interval: block.int("interval")?,
            threshold: block.int("threshold")?,
        }),
    };
    // Unknown spellings fall back to the most private level and the default window rather than
    // failing the build: newer providers may add values this converter predates.
    let sharing_level = match attrs.string("share")?.to_lowercase().as_str() {
        "authenticated" => AppSharingLevel::Authenticated,
        "public" => AppSharingLevel::Public,
        _ => AppSharingLevel::Owner,
    };
    let open_in = match attrs.string("open_in")?.to_lowercase().as_str() {
        "tab" => AppOpenIn::Tab,
        _ => AppOpenIn::SlimWindow,
    };
    Ok(App {
        id: attrs.string("id")?,
        slug,
        display_name,
        command: attrs.string("command")?,
        url: attrs.string("url")?,
        icon: attrs.string("icon")?,
        subdomain: attrs.bool("subdomain")?,
        healthcheck,
        sharing_level,
        external: attrs.bool("external")?,
        order: attrs.int("order")?,
        hidden: attrs.bool("hidden")?,
        open_in,
        group: attrs.string("group")?,
    })
}
