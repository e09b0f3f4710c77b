//! The deployment's configuration (Coder's `/api/v2/deployment/config` and the dashboard's
//! deployment overview): the server's options with their sources, secrets blanked. Only those
//! who may read the deployment's configuration may see it.

use codersdk::deployment::{DeploymentConfig, Region, SSHConfigResponse, SerpentOption};

use super::Result;
use crate::deployment_options::DeploymentOption;
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Object, Resource, Subject};

/// Every option of the server, in `--help`'s order.
pub fn options(state: &AppState, subject: &Subject) -> Result<Vec<DeploymentOption>> {
    authz::authorize(
        subject,
        Action::Read,
        &Object::site(Resource::DeploymentConfig),
    )?;
    // Blanked when built already; again here, as this is where they leave the server.
    Ok(state
        .options
        .config_options
        .0
        .iter()
        .cloned()
        .map(DeploymentOption::redacted)
        .collect())
}

/// The configuration as Coder's API shapes it: each option described, and every value by the
/// name Coder's configuration gives it (the flag's, with underscores).
pub fn config(state: &AppState, subject: &Subject) -> Result<DeploymentConfig> {
    let options = options(state, subject)?;
    let config = options
        .iter()
        .filter(|o| !o.secret())
        .map(|o| (o.flag.replace('-', "_"), json_value(o.value())))
        .collect();
    let options = options
        .into_iter()
        .map(|o| SerpentOption {
            name: o.flag.clone(),
            description: o.description.clone(),
            env: o.env.clone().unwrap_or_default(),
            default: o.default.clone(),
            value: (!o.secret()).then(|| json_value(o.value())),
            hidden: o.hidden,
            value_source: o.source.as_str().to_owned(),
            annotations: if o.secret() {
                [("secret".to_owned(), "true".to_owned())].into()
            } else {
                Default::default()
            },
            flag: o.flag,
        })
        .collect();
    Ok(DeploymentConfig { config, options })
}

/// Switches stay JSON booleans, as Coder's clients test them; everything else is its text.
fn json_value(value: &str) -> serde_json::Value {
    match value {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        other => serde_json::Value::String(other.to_owned()),
    }
}

/// How clients name workspaces in SSH; every signed-in user may read it, as `coder
/// config-ssh` and the IDE extensions do.
pub fn ssh(state: &AppState) -> SSHConfigResponse {
    let ssh = &state.options.ssh;
    SSHConfigResponse {
        hostname_prefix: ssh.hostname_prefix.clone(),
        hostname_suffix: ssh.hostname_suffix.clone(),
        ssh_config_options: ssh.config_options.clone(),
    }
}

/// Coder's icon for the deployment's own region.
const PRIMARY_REGION_ICON: &str = "/emojis/1f3e1.png";

/// The one region until workspace proxies exist: this deployment, with its access URL and
/// app host.
pub fn primary_region(state: &AppState) -> Region {
    let options = &state.options;
    Region {
        id: options.deployment_id.parse().unwrap_or_default(),
        name: "primary".into(),
        display_name: "Default".into(),
        icon_url: PRIMARY_REGION_ICON.into(),
        healthy: true,
        path_app_url: options.access_url.as_str().trim_end_matches('/').to_owned(),
        wildcard_hostname: options
            .apps
            .wildcard
            .as_ref()
            .map(|w| w.host("*"))
            .unwrap_or_default(),
    }
}
