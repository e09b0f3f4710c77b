//! Rendering rows as the SDK types every front door shows, and the statuses derived from them
//! (job, build, agent): one place, so the API and the dashboard can never disagree.

use chrono::Utc;
use codersdk::proto::RichParameter;
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::templates::{TemplateVersionParameter, TemplateVersionParameterOption};
use codersdk::workspaces::{
    AgentConnectionTiming, AgentScriptTiming, Healthcheck, ProvisionerTiming, WorkspaceAgent,
    WorkspaceAgentHealth, WorkspaceAgentLogSource, WorkspaceAgentScript, WorkspaceApp,
    WorkspaceBuildTimings, WorkspaceResource, WorkspaceResourceMetadata, WorkspaceStatus,
};

use codersdk::users::{LoginType, SlimRole, User, UserStatus};
use uuid::Uuid;

use crate::agents::INACTIVE_AFTER;
use coderd_authz::site_role;
use coderd_store::{AgentRow, AgentTree, AppRow, BuildTimings, JobRow, ResourceTree, UserRow};

/// The job's status, derived from its timestamps as Coder does.
pub fn job_status(job: &JobRow) -> ProvisionerJobStatus {
    if job.completed_at.is_some() {
        if job.error.is_some() {
            ProvisionerJobStatus::Failed
        } else if job.canceled_at.is_some() {
            ProvisionerJobStatus::Canceled
        } else {
            ProvisionerJobStatus::Succeeded
        }
    } else if job.error.is_some() {
        ProvisionerJobStatus::Failed
    } else if job.canceled_at.is_some() {
        ProvisionerJobStatus::Canceling
    } else if job.started_at.is_none() {
        ProvisionerJobStatus::Pending
    } else {
        ProvisionerJobStatus::Running
    }
}

/// A workspace build's status: its job's status read through its transition.
pub fn build_status(transition: &str, job: ProvisionerJobStatus) -> WorkspaceStatus {
    use ProvisionerJobStatus as J;
    use WorkspaceStatus as W;
    match (job, transition) {
        (J::Pending, _) => W::Pending,
        (J::Running, "start") => W::Starting,
        (J::Running, "stop") => W::Stopping,
        (J::Running, _) => W::Deleting,
        (J::Succeeded, "start") => W::Running,
        (J::Succeeded, "stop") => W::Stopped,
        (J::Succeeded, _) => W::Deleted,
        (J::Canceling, _) => W::Canceling,
        (J::Canceled, _) => W::Canceled,
        (J::Failed, _) => W::Failed,
    }
}

/// Connection status of an agent, derived from its connection timestamps: connecting (never
/// connected, within its timeout), timeout (never connected, past it), disconnected (a recorded
/// disconnect after the last connection, or no sign of life for [`INACTIVE_AFTER`]), connected.
pub fn agent_status(agent: &AgentRow) -> &'static str {
    let now = Utc::now();
    match (agent.first_connected_at, agent.last_connected_at) {
        (None, _) | (_, None) => {
            let waited = (now - agent.created_at).num_seconds();
            if agent.connection_timeout_seconds > 0
                && waited > i64::from(agent.connection_timeout_seconds)
            {
                "timeout"
            } else {
                "connecting"
            }
        }
        (Some(_), Some(last)) => {
            let silent = (now - last).to_std().unwrap_or_default() > INACTIVE_AFTER;
            if agent.disconnected_at.is_some_and(|d| d >= last) || silent {
                "disconnected"
            } else {
                "connected"
            }
        }
    }
}

pub fn app(row: AppRow) -> WorkspaceApp {
    WorkspaceApp {
        id: row.id,
        url: row.url,
        external: row.external,
        slug: row.slug,
        display_name: row.display_name,
        command: row.command,
        icon: row.icon,
        subdomain: row.subdomain,
        subdomain_name: None,
        sharing_level: row.sharing_level,
        healthcheck: (!row.healthcheck_url.is_empty()).then_some(Healthcheck {
            url: row.healthcheck_url,
            interval: row.healthcheck_interval,
            threshold: row.healthcheck_threshold,
        }),
        health: row.health,
        group: row.display_group,
        hidden: row.hidden,
        open_in: row.open_in,
        statuses: Vec::new(),
    }
}

pub fn agent(tree: AgentTree) -> WorkspaceAgent {
    let AgentTree {
        agent: row,
        apps,
        scripts,
        log_sources,
    } = tree;
    let status = agent_status(&row);
    let behavior = if scripts.iter().any(|s| s.start_blocks_login) {
        "blocking"
    } else {
        "non-blocking"
    };
    // A connected agent whose apps fail their health checks is not healthy either, as in
    // Coder: the workspace's health counts it.
    let unhealthy_apps = apps.iter().any(|a| a.health == "unhealthy");
    let healthy = status == "connected" && !unhealthy_apps;
    // A dev container's sub-agent only connects once its container runs, which never happens
    // here: its health says so rather than "connecting" forever.
    let never_runs = row.parent_id.is_some() && row.first_connected_at.is_none();
    WorkspaceAgent {
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        first_connected_at: row.first_connected_at,
        last_connected_at: row.last_connected_at,
        disconnected_at: row.disconnected_at,
        started_at: row.started_at,
        ready_at: row.ready_at,
        status: status.into(),
        lifecycle_state: row.lifecycle_state,
        name: row.name,
        resource_id: row.resource_id,
        instance_id: row.auth_instance_id.unwrap_or_default(),
        architecture: row.architecture,
        environment_variables: serde_json::from_value(row.environment_variables)
            .unwrap_or_default(),
        operating_system: row.operating_system,
        logs_length: row.logs_length,
        logs_overflowed: row.logs_overflowed,
        directory: row.directory,
        expanded_directory: row.expanded_directory,
        version: row.version,
        api_version: row.api_version,
        apps: apps.into_iter().map(app).collect(),
        connection_timeout_seconds: row.connection_timeout_seconds,
        troubleshooting_url: row.troubleshooting_url,
        health: WorkspaceAgentHealth {
            healthy,
            reason: if healthy {
                String::new()
            } else if never_runs {
                format!(
                    "the dev container's sub-agent cannot start: {}",
                    crate::devcontainers::NOT_RUN
                )
            } else if status == "connected" {
                "one or more of the agent's apps are unhealthy".into()
            } else {
                format!("agent is {status}")
            },
        },
        display_apps: row.display_apps,
        log_sources: log_sources
            .into_iter()
            .map(|l| WorkspaceAgentLogSource {
                workspace_agent_id: l.agent_id,
                id: l.id,
                created_at: l.created_at,
                display_name: l.display_name,
                icon: l.icon,
            })
            .collect(),
        scripts: scripts
            .into_iter()
            .map(|s| WorkspaceAgentScript {
                id: s.id,
                log_source_id: s.log_source_id,
                log_path: s.log_path,
                script: s.script,
                cron: s.cron,
                run_on_start: s.run_on_start,
                run_on_stop: s.run_on_stop,
                start_blocks_login: s.start_blocks_login,
                timeout: i64::from(s.timeout_seconds) * 1_000_000_000,
                display_name: s.display_name,
            })
            .collect(),
        startup_script_behavior: behavior.into(),
        parent_id: row.parent_id,
        subsystems: Vec::new(),
    }
}

pub fn resources(trees: Vec<ResourceTree>) -> Vec<WorkspaceResource> {
    trees
        .into_iter()
        .map(|t| WorkspaceResource {
            id: t.resource.id,
            created_at: t.resource.created_at,
            job_id: t.resource.job_id,
            workspace_transition: t.resource.transition,
            kind: t.resource.r#type,
            name: t.resource.name,
            hide: t.resource.hide,
            icon: t.resource.icon,
            agents: t.agents.into_iter().map(agent).collect(),
            metadata: t
                .metadata
                .into_iter()
                .map(|m| WorkspaceResourceMetadata {
                    key: m.key,
                    // Sensitive values never leave coderd.
                    value: if m.sensitive {
                        String::new()
                    } else {
                        m.value.unwrap_or_default()
                    },
                    sensitive: m.sensitive,
                })
                .collect(),
            daily_cost: t.resource.daily_cost,
        })
        .collect()
}

/// A version's declared parameter as the SDK shows it (the create form is rendered from it).
pub fn parameter(p: RichParameter) -> TemplateVersionParameter {
    TemplateVersionParameter {
        description_plaintext: p.description.clone(),
        name: p.name,
        display_name: p.display_name,
        description: p.description,
        kind: p.kind,
        form_type: match serde_json::to_value(p.form_type) {
            Ok(serde_json::Value::String(s)) => s,
            _ => String::new(),
        },
        mutable: p.mutable,
        default_value: p.default_value,
        icon: p.icon,
        options: p
            .options
            .into_iter()
            .map(|o| TemplateVersionParameterOption {
                name: o.name,
                description: o.description,
                value: o.value,
                icon: o.icon,
            })
            .collect(),
        validation_error: p.validation_error,
        validation_regex: p.validation_regex,
        validation_min: p.validation_min,
        validation_max: p.validation_max,
        validation_monotonic: p.validation_monotonic,
        required: p.required,
        ephemeral: p.ephemeral,
        order: p.order,
    }
}

/// A build's timeline in Coder's shape.
pub fn build_timings(timings: BuildTimings) -> WorkspaceBuildTimings {
    WorkspaceBuildTimings {
        provisioner_timings: timings
            .provisioner
            .into_iter()
            .map(|t| ProvisionerTiming {
                job_id: t.job_id,
                started_at: t.started_at,
                ended_at: t.ended_at,
                stage: t.stage,
                source: t.source,
                action: t.action,
                resource: t.resource,
            })
            .collect(),
        agent_script_timings: timings
            .scripts
            .into_iter()
            .map(|t| AgentScriptTiming {
                started_at: t.started_at,
                ended_at: t.ended_at,
                exit_code: t.exit_code,
                stage: t.stage,
                status: t.status,
                display_name: t.display_name,
                workspace_agent_id: t.agent_id,
                workspace_agent_name: t.agent_name,
            })
            .collect(),
        agent_connection_timings: timings
            .connections
            .into_iter()
            .map(|t| AgentConnectionTiming {
                started_at: t.created_at,
                ended_at: t.first_connected_at,
                stage: "connect".into(),
                workspace_agent_id: t.agent_id,
                workspace_agent_name: t.agent_name,
            })
            .collect(),
    }
}

/// A user's site roles with their display names.
pub fn site_roles(names: &[String]) -> Vec<SlimRole> {
    names
        .iter()
        .map(|name| SlimRole {
            display_name: site_role(name).map_or_else(|| name.clone(), |r| r.display_name.into()),
            name: name.clone(),
            organization_id: String::new(),
        })
        .collect()
}

/// A user as the API shows it.
pub fn user(row: UserRow, organization_ids: Vec<Uuid>) -> User {
    User {
        id: row.id,
        roles: site_roles(&row.rbac_roles),
        username: row.username,
        name: row.name,
        email: row.email,
        avatar_url: row.avatar_url,
        created_at: row.created_at,
        updated_at: row.updated_at,
        last_seen_at: row.last_seen_at,
        status: row.status.parse().unwrap_or(UserStatus::Active),
        login_type: row.login_type.parse().unwrap_or(LoginType::Password),
        organization_ids,
        theme_preference: String::new(),
        has_ai_seat: false,
    }
}
