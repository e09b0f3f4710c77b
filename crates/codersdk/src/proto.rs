//! Results a provisioner engine returns to coderd: resources, agents, apps, parameters.
//!
//! These are the shapes of Coder's provisioner protocol (`provisionersdk/proto`), written as plain
//! serde structs. Field names are the protocol's snake_case names, so a JSON document written for
//! Coder's echo provisioner or read from its API reads the same here. Enums that are integers on
//! Coder's wire are Rust enums serialised as the strings Terraform templates use (`"slim-window"`,
//! `"authenticated"`, `"radio"`...), because those are what people write and read.
//!
//! Every struct is `#[serde(default)]`: a document may leave out any field, which then takes the
//! value of `Default`. That keeps hand-written fixtures (the echo engine) short and lets older
//! stored rows load after fields are added.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A piece of infrastructure a template created (a VM, a container, a volume...), with the agents
/// that run inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resource {
    /// Terraform resource name (`dev` in `docker_container.dev`).
    pub name: String,
    /// Terraform resource type (`docker_container`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Agents attached to this resource.
    pub agents: Vec<Agent>,
    /// Items from the `coder_metadata` resource that points at this resource.
    pub metadata: Vec<ResourceMetadata>,
    /// Hidden from the workspace page (`coder_metadata.hide`).
    pub hide: bool,
    /// Icon path or URL (`coder_metadata.icon`).
    pub icon: String,
    /// Machine size for the cloud VM types Coder knows (`aws_instance.instance_type`, ...).
    pub instance_type: String,
    /// Cost per day in quota credits (`coder_metadata.daily_cost`).
    pub daily_cost: i32,
    /// Module the resource lives in (`module.a.module.b`), empty for the root module.
    pub module_path: String,
}

/// One `item` of a `coder_metadata` resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceMetadata {
    pub key: String,
    pub value: String,
    /// The value is a secret and must only be shown on request.
    pub sensitive: bool,
    /// The template set no value (as opposed to an empty string).
    pub is_null: bool,
}

/// A `coder_agent`: the process that connects a workspace resource back to coderd.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Agent {
    /// Terraform's id of the `coder_agent`; empty at plan time, before it exists.
    pub id: String,
    pub name: String,
    /// Environment variables from the agent's `env` map.
    pub env: BTreeMap<String, String>,
    /// `linux`, `darwin` or `windows`.
    pub operating_system: String,
    /// `amd64`, `arm64` or `armv7`.
    pub architecture: String,
    /// Working directory (`dir`).
    pub directory: String,
    pub apps: Vec<App>,
    /// How the agent proves its identity to coderd.
    pub auth: AgentAuth,
    /// Seconds after which a never-connected agent is reported as timed out.
    pub connection_timeout_seconds: i32,
    pub troubleshooting_url: String,
    pub motd_file: String,
    /// Metadata the agent collects by running scripts (`metadata` blocks).
    pub metadata: Vec<AgentMetadata>,
    /// Built-in apps shown for this agent.
    pub display_apps: DisplayApps,
    /// Scripts the agent runs: `coder_script` resources plus the agent's legacy
    /// `startup_script`/`shutdown_script`.
    pub scripts: Vec<Script>,
    /// Environment variables from `coder_env` resources.
    pub extra_envs: Vec<Env>,
    /// Position among the resource's agents in the UI.
    pub order: i64,
    pub resources_monitoring: ResourcesMonitoring,
    /// Scope of the API key the agent hands to the workspace (`all` or `no_user_data`), as
    /// the template wrote it: empty when the provider predates the attribute (coderd reads
    /// that as `all`).
    pub api_key_scope: String,
    /// Dev containers the agent should start (`coder_devcontainer`), each with its sub-agent.
    pub devcontainers: Vec<Devcontainer>,
}

/// A `coder_devcontainer`: a dev container the agent starts, with a sub-agent inside it that
/// runs the apps, scripts and environment variables attached to `subagent_id`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Devcontainer {
    /// Terraform's id of the `coder_devcontainer`; empty at plan time.
    pub id: String,
    /// The resource's name (`repo` in `coder_devcontainer.repo`).
    pub name: String,
    pub workspace_folder: String,
    /// Path of `devcontainer.json`; empty for the default location.
    pub config_path: String,
    /// Id of the sub-agent inside the container; empty at plan time.
    pub subagent_id: String,
    pub apps: Vec<App>,
    pub scripts: Vec<Script>,
    pub envs: Vec<Env>,
}

/// The credential an agent authenticates with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentAuth {
    /// A per-agent secret token; empty at plan time.
    Token(String),
    /// A cloud instance identity (Google, AWS or Azure); the id is empty until known.
    InstanceId(String),
}

impl Default for AgentAuth {
    fn default() -> Self {
        Self::Token(String::new())
    }
}

/// One `metadata` block of a `coder_agent`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentMetadata {
    pub key: String,
    pub display_name: String,
    pub script: String,
    /// Seconds between runs.
    pub interval: i64,
    /// Seconds a run may take.
    pub timeout: i64,
    pub order: i64,
}

/// Built-in apps shown for an agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DisplayApps {
    pub vscode: bool,
    pub vscode_insiders: bool,
    pub web_terminal: bool,
    pub ssh_helper: bool,
    pub port_forwarding_helper: bool,
}

impl Default for DisplayApps {
    /// What an agent without a `display_apps` block gets: everything but VS Code Insiders.
    fn default() -> Self {
        Self {
            vscode: true,
            vscode_insiders: false,
            web_terminal: true,
            ssh_helper: true,
            port_forwarding_helper: true,
        }
    }
}

/// Thresholds at which the agent reports resource exhaustion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourcesMonitoring {
    pub memory: Option<MemoryResourceMonitor>,
    pub volumes: Vec<VolumeResourceMonitor>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryResourceMonitor {
    pub enabled: bool,
    /// Percentage of memory in use that triggers an alert.
    pub threshold: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VolumeResourceMonitor {
    pub path: String,
    pub enabled: bool,
    /// Percentage of the volume in use that triggers an alert.
    pub threshold: i32,
}

/// A script the agent runs on start, on stop or on a schedule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Script {
    pub display_name: String,
    pub icon: String,
    pub script: String,
    /// Cron schedule; empty when the script only runs on start/stop.
    pub cron: String,
    /// Logins wait until the script has finished.
    pub start_blocks_login: bool,
    pub run_on_start: bool,
    pub run_on_stop: bool,
    /// Zero means no timeout.
    pub timeout_seconds: i32,
    /// File the agent writes the script's output to.
    pub log_path: String,
    /// Terraform address of the `coder_script` (`module.m.coder_script.x[0]`); empty for
    /// scripts made from an agent's `startup_script`/`shutdown_script`.
    pub resource_address: String,
    /// Scripts of the same agent and phase this one waits for (`coder_script_order`),
    /// sorted by address.
    pub dependencies: Vec<ScriptDependency>,
}

/// One prerequisite of a script.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScriptDependency {
    /// `resource_address` of the script waited for.
    pub prerequisite_resource_address: String,
    pub requirement: ScriptRequirement,
}

/// What a script needs from a prerequisite before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptRequirement {
    /// It succeeded; otherwise (failed, timed out, skipped) the dependant is skipped.
    #[default]
    Success,
    /// It ended, whatever the outcome.
    Completion,
}

/// An environment variable a `coder_env` resource sets on an agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Env {
    pub name: String,
    pub value: String,
    /// What happens when several sources set the same variable.
    pub merge_strategy: EnvMergeStrategy,
}

/// How a `coder_env` value combines with another `coder_env` setting the same name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvMergeStrategy {
    /// The last value wins.
    #[default]
    Replace,
    /// Added after the other value, joined with `:` (PATH style).
    Append,
    /// Added before the other value, joined with `:`.
    Prepend,
    /// Setting the same name twice fails the build.
    Error,
}

/// A `coder_app`: something a user opens from the dashboard (a web IDE, a terminal command...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct App {
    /// Terraform's id of the `coder_app`; empty at plan time, before it exists.
    pub id: String,
    /// Unique per template, URL- and hostname-safe.
    pub slug: String,
    pub display_name: String,
    pub command: String,
    pub url: String,
    pub icon: String,
    /// Served on its own subdomain rather than a path.
    pub subdomain: bool,
    pub healthcheck: Option<Healthcheck>,
    pub sharing_level: AppSharingLevel,
    /// Opened directly by the browser, not proxied through coderd.
    pub external: bool,
    pub order: i64,
    pub hidden: bool,
    pub open_in: AppOpenIn,
    /// Name of the group the app is shown in.
    pub group: String,
}

/// How the agent checks that an app is up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Healthcheck {
    pub url: String,
    /// Seconds between checks.
    pub interval: i32,
    /// Consecutive failures before the app counts as unhealthy.
    pub threshold: i32,
}

/// Who may open an app.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppSharingLevel {
    #[default]
    Owner,
    Authenticated,
    Public,
}

/// Where the dashboard opens an app.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppOpenIn {
    #[default]
    SlimWindow,
    Tab,
}

/// A `coder_parameter`: a value the user chooses when creating or updating a workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RichParameter {
    pub name: String,
    pub description: String,
    /// `string`, `number`, `bool` or `list(string)`.
    #[serde(rename = "type")]
    pub kind: String,
    /// May change after the workspace is created.
    pub mutable: bool,
    pub default_value: String,
    pub icon: String,
    pub options: Vec<RichParameterOption>,
    pub validation_regex: String,
    pub validation_error: String,
    pub validation_min: Option<i32>,
    pub validation_max: Option<i32>,
    /// `increasing`, `decreasing` or empty.
    pub validation_monotonic: String,
    /// The user must supply a value (the parameter has no default).
    pub required: bool,
    pub display_name: String,
    pub order: i32,
    /// Used for one build only, not remembered for the next.
    pub ephemeral: bool,
    pub form_type: ParameterFormType,
}

/// One `option` block of a `coder_parameter`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RichParameterOption {
    pub name: String,
    pub description: String,
    pub value: String,
    pub icon: String,
}

/// The input widget the dashboard shows for a parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ParameterFormType {
    /// Let the dashboard choose from the parameter's type and options.
    #[default]
    #[serde(rename = "")]
    Default,
    /// The template's form type is invalid; the dashboard shows an error.
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "radio")]
    Radio,
    #[serde(rename = "dropdown")]
    Dropdown,
    #[serde(rename = "input")]
    Input,
    #[serde(rename = "textarea")]
    Textarea,
    #[serde(rename = "slider")]
    Slider,
    #[serde(rename = "checkbox")]
    Checkbox,
    #[serde(rename = "switch")]
    Switch,
    #[serde(rename = "tag-select")]
    TagSelect,
    #[serde(rename = "multi-select")]
    MultiSelect,
}

/// A `coder_workspace_preset`: parameter values users may pick together, and the prebuilt
/// workspaces Coder keeps ready for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Preset {
    pub name: String,
    /// By parameter name. Names the template does not declare are kept (a preset may outlive
    /// a parameter); the converter warns about them.
    pub parameters: Vec<PresetParameter>,
    /// Absent when the preset has no `prebuilds` block.
    pub prebuild: Option<Prebuild>,
    /// Selected by default when creating a workspace (at most one preset per template).
    pub default: bool,
    pub description: String,
    pub icon: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PresetParameter {
    pub name: String,
    pub value: String,
}

/// How many prebuilt workspaces to keep for a preset, and when.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prebuild {
    /// Workspaces to keep when no schedule applies.
    pub instances: i32,
    pub expiration_policy: Option<ExpirationPolicy>,
    pub scheduling: Option<Scheduling>,
}

/// Unclaimed prebuilds older than `ttl` seconds are replaced; 0 never.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExpirationPolicy {
    pub ttl: i32,
}

/// Instances per schedule: while a schedule's cron matches, its `instances` apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Scheduling {
    /// IANA zone the crons are read in.
    pub timezone: String,
    pub schedule: Vec<Schedule>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Schedule {
    /// `* HOUR DOM MONTH DOW` (whole hours).
    pub cron: String,
    pub instances: i32,
}

/// A `coder_ai_task`: the template runs Coder Tasks, with `app_id` as their interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AiTask {
    /// Terraform's id of the `coder_ai_task` (the task's id in a task build); empty at plan
    /// time.
    pub id: String,
    /// Id of the `coder_app` (from `app_id`, or the deprecated `sidebar_app`).
    pub app_id: String,
}

/// What a template declares besides resources and parameters, for the API parts that act on
/// it: presets (and their prebuilds), AI tasks and external agents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateFeatures {
    pub presets: Vec<Preset>,
    /// The `coder_ai_task` resources that will exist after this plan or apply.
    pub ai_tasks: Vec<AiTask>,
    /// The template declares a `coder_ai_task`, even one with `count = 0` in this plan.
    pub has_ai_tasks: bool,
    /// The template declares a `coder_external_agent`.
    pub has_external_agents: bool,
    /// The owner's secrets the template reads (`coder_secret` data sources).
    pub secrets: Vec<SecretRequirement>,
}

/// A `coder_secret` data source: the template needs a secret of the workspace's owner that
/// provides this environment variable or this file (exactly one is set).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecretRequirement {
    pub env: String,
    pub file: String,
    pub help_message: String,
}

/// An external auth provider (`data "coder_external_auth"`) the template needs a token for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExternalAuthProviderResource {
    /// The provider id configured in coderd (`github`, ...).
    pub id: String,
    /// Workspaces may be built without linking this provider.
    pub optional: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_defaults() -> Result<(), serde_json::Error> {
        let agent: Agent = serde_json::from_str(r#"{"name": "main"}"#)?;
        assert_eq!(agent.name, "main");
        assert_eq!(agent.auth, AgentAuth::Token(String::new()));
        assert_eq!(agent.display_apps, DisplayApps::default());
        assert!(agent.display_apps.vscode && !agent.display_apps.vscode_insiders);
        Ok(())
    }

    #[test]
    fn enums_use_template_spelling() -> Result<(), serde_json::Error> {
        let app = App {
            sharing_level: AppSharingLevel::Authenticated,
            open_in: AppOpenIn::SlimWindow,
            ..App::default()
        };
        let json = serde_json::to_value(&app)?;
        assert_eq!(json["sharing_level"], "authenticated");
        assert_eq!(json["open_in"], "slim-window");

        let param: RichParameter = serde_json::from_str(r#"{"form_type": "multi-select"}"#)?;
        assert_eq!(param.form_type, ParameterFormType::MultiSelect);
        let param: RichParameter = serde_json::from_str(r#"{"form_type": ""}"#)?;
        assert_eq!(param.form_type, ParameterFormType::Default);
        Ok(())
    }

    #[test]
    fn auth_is_one_keyed_object() -> Result<(), serde_json::Error> {
        let auth = AgentAuth::InstanceId("i-123".into());
        assert_eq!(serde_json::to_string(&auth)?, r#"{"instance_id":"i-123"}"#);
        let back: AgentAuth = serde_json::from_str(r#"{"token":"t"}"#)?;
        assert_eq!(back, AgentAuth::Token("t".into()));
        Ok(())
    }

    #[test]
    fn round_trips() -> Result<(), serde_json::Error> {
        let resource = Resource {
            name: "dev".into(),
            kind: "null_resource".into(),
            agents: vec![Agent {
                name: "main".into(),
                display_apps: DisplayApps {
                    vscode: false,
                    vscode_insiders: false,
                    web_terminal: false,
                    ssh_helper: false,
                    port_forwarding_helper: false,
                },
                apps: vec![App {
                    slug: "code".into(),
                    healthcheck: Some(Healthcheck::default()),
                    ..App::default()
                }],
                ..Agent::default()
            }],
            ..Resource::default()
        };
        let json = serde_json::to_string(&resource)?;
        assert_eq!(serde_json::from_str::<Resource>(&json)?, resource);
        Ok(())
    }
}
