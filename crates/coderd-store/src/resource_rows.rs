//! A job's resource tree as rows: its resources, their metadata and agents (with dev
//! containers' sub-agents), the agents' metadata, log sources, scripts, apps and dev containers,
//! flattened into one array per column with their ids made here, and inserted by one
//! statement. A completion pays one round trip for what a job produced, however many rows
//! that is, instead of one per row.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use codersdk::proto::{self, AgentAuth};
use serde_json::Value;
use uuid::Uuid;

use super::Result;

#[derive(Default)]
struct Resources {
    id: Vec<Uuid>,
    kind: Vec<String>,
    name: Vec<String>,
    hide: Vec<bool>,
    icon: Vec<String>,
    instance_type: Vec<String>,
    daily_cost: Vec<i32>,
    module_path: Vec<String>,
}

#[derive(Default)]
struct ResourceMetadata {
    resource: Vec<Uuid>,
    position: Vec<i32>,
    key: Vec<String>,
    value: Vec<Option<String>>,
    sensitive: Vec<bool>,
}

#[derive(Default)]
struct Agents {
    id: Vec<Uuid>,
    resource: Vec<Uuid>,
    name: Vec<String>,
    token_hash: Vec<Option<Vec<u8>>>,
    instance_id: Vec<Option<String>>,
    architecture: Vec<String>,
    operating_system: Vec<String>,
    directory: Vec<String>,
    env: Vec<Value>,
    connection_timeout: Vec<i32>,
    troubleshooting_url: Vec<String>,
    motd_file: Vec<String>,
    /// Each agent's `text[]` as a JSON array: an array parameter cannot nest arrays of
    /// different lengths.
    display_apps: Vec<Value>,
    api_key_scope: Vec<String>,
    display_order: Vec<i64>,
    spec: Vec<Value>,
    parent: Vec<Option<Uuid>>,
}

#[derive(Default)]
struct AgentMetadata {
    agent: Vec<Uuid>,
    key: Vec<String>,
    display_name: Vec<String>,
    script: Vec<String>,
    interval: Vec<i64>,
    timeout: Vec<i64>,
    display_order: Vec<i32>,
}

#[derive(Default)]
struct LogSources {
    id: Vec<Uuid>,
    agent: Vec<Uuid>,
    display_name: Vec<String>,
    icon: Vec<String>,
}

#[derive(Default)]
struct Scripts {
    id: Vec<Uuid>,
    agent: Vec<Uuid>,
    log_source: Vec<Uuid>,
    display_name: Vec<String>,
    script: Vec<String>,
    cron: Vec<String>,
    run_on_start: Vec<bool>,
    run_on_stop: Vec<bool>,
    start_blocks_login: Vec<bool>,
    timeout: Vec<i32>,
    log_path: Vec<String>,
    resource_address: Vec<String>,
    dependencies: Vec<Value>,
}

#[derive(Default)]
struct Apps {
    id: Vec<Uuid>,
    /// The provider's id of each app (not stored): what an AI task names its app by.
    provider_id: Vec<String>,
    agent: Vec<Uuid>,
    slug: Vec<String>,
    display_name: Vec<String>,
    icon: Vec<String>,
    command: Vec<Option<String>>,
    url: Vec<Option<String>>,
    external: Vec<bool>,
    subdomain: Vec<bool>,
    sharing_level: Vec<String>,
    healthcheck_url: Vec<String>,
    healthcheck_interval: Vec<i32>,
    healthcheck_threshold: Vec<i32>,
    health: Vec<String>,
    open_in: Vec<String>,
    display_order: Vec<i64>,
    hidden: Vec<bool>,
    display_group: Vec<String>,
}

#[derive(Default)]
struct Devcontainers {
    id: Vec<Uuid>,
    agent: Vec<Uuid>,
    log_source: Vec<Uuid>,
    name: Vec<String>,
    workspace_folder: Vec<String>,
    config_path: Vec<String>,
    subagent: Vec<Uuid>,
}

/// Every row a job's resources make, column by column.
#[derive(Default)]
pub(super) struct TreeRows {
    resources: Resources,
    metadata: ResourceMetadata,
    agents: Agents,
    agent_metadata: AgentMetadata,
    log_sources: LogSources,
    scripts: Scripts,
    apps: Apps,
    devcontainers: Devcontainers,
    /// Sub-agent ids the provider chose that are free: not held by an earlier build's agent,
    /// nor used already in this tree.
    free_subagent_ids: HashSet<Uuid>,
}

fn display_apps(d: &proto::DisplayApps) -> Value {
    [
        (d.vscode, "vscode"),
        (d.vscode_insiders, "vscode_insiders"),
        (d.web_terminal, "web_terminal"),
        (d.ssh_helper, "ssh_helper"),
        (d.port_forwarding_helper, "port_forwarding_helper"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| Value::from(name))
    .collect()
}

fn enum_str<T: serde::Serialize>(value: &T, fallback: &str) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        _ => fallback.to_string(),
    }
}

impl TreeRows {
    /// The rows of `resources`. A dev container's sub-agent takes the provider's
    /// `subagent_id` (so the API shows the id the template sees) when it is a UUID no earlier
    /// build's agent holds: one query finds those, and only when there are dev containers.
    pub(super) async fn of(
        tx: &mut sqlx::PgConnection,
        resources: &[proto::Resource],
    ) -> Result<Self> {
        let wanted: Vec<Uuid> = resources
            .iter()
            .flat_map(|r| &r.agents)
            .flat_map(|a| &a.devcontainers)
            .filter_map(|d| d.subagent_id.parse().ok())
            .collect();
        let mut rows = Self::default();
        if !wanted.is_empty() {
            let taken: HashSet<Uuid> = sqlx::query_scalar!(
                "SELECT id FROM workspace_agents WHERE id = ANY($1)",
                &wanted
            )
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
            rows.free_subagent_ids = wanted
                .into_iter()
                .filter(|id| !taken.contains(id))
                .collect();
        }
        for resource in resources {
            rows.push_resource(resource);
        }
        Ok(rows)
    }

    /// The id given to the app the provider knows as `provider_id`.
    pub(super) fn app_id(&self, provider_id: &str) -> Option<Uuid> {
        self.apps
            .provider_id
            .iter()
            .position(|p| !provider_id.is_empty() && p == provider_id)
            .map(|i| self.apps.id[i])
    }

    fn push_resource(&mut self, resource: &proto::Resource) {
        let id = Uuid::new_v4();
        let r = &mut self.resources;
        r.id.push(id);
        r.kind.push(resource.kind.clone());
        r.name.push(resource.name.clone());
        r.hide.push(resource.hide);
        r.icon.push(resource.icon.clone());
        r.instance_type.push(resource.instance_type.clone());
        r.daily_cost.push(resource.daily_cost);
        r.module_path.push(resource.module_path.clone());
        for (position, item) in resource.metadata.iter().enumerate() {
            let m = &mut self.metadata;
            m.resource.push(id);
            m.position.push(i32::try_from(position).unwrap_or(i32::MAX));
            m.key.push(item.key.clone());
            m.value.push((!item.is_null).then(|| item.value.clone()));
            m.sensitive.push(item.sensitive);
        }
        for agent in &resource.agents {
            let parent = Uuid::new_v4();
            self.push_agent(id, agent, parent, None);
            for container in &agent.devcontainers {
                self.push_devcontainer(id, agent, parent, container);
            }
        }
    }

    /// An agent with its metadata, scripts and apps (not its dev containers). Fresh ids per
    /// build: terraform keeps an unchanged agent's (and app's) id across builds, but every
    /// build's rows are its own.
    fn push_agent(
        &mut self,
        resource: Uuid,
        agent: &proto::Agent,
        agent_id: Uuid,
        parent: Option<Uuid>,
    ) {
        let (token_hash, instance_id) = match &agent.auth {
            AgentAuth::Token(token) if !token.is_empty() => {
                (Some(coderd_authz::auth::hash_secret(token)), None)
            }
            AgentAuth::Token(_) => (None, None),
            AgentAuth::InstanceId(id) => (None, Some(id.clone())),
        };
        // Keep what the agent needs later (scripts, metadata, env) without its secret or apps,
        // which have their own rows.
        let mut spec = agent.clone();
        spec.auth = AgentAuth::Token(String::new());
        spec.apps.clear();
        spec.devcontainers.clear();
        let mut env = agent.env.clone();
        for extra in &agent.extra_envs {
            env.insert(extra.name.clone(), extra.value.clone());
        }
        let a = &mut self.agents;
        a.id.push(agent_id);
        a.resource.push(resource);
        a.name.push(agent.name.clone());
        a.token_hash.push(token_hash);
        a.instance_id.push(instance_id);
        a.architecture.push(agent.architecture.clone());
        a.operating_system.push(agent.operating_system.clone());
        a.directory.push(agent.directory.clone());
        a.env.push(serde_json::to_value(&env).unwrap_or_default());
        a.connection_timeout.push(agent.connection_timeout_seconds);
        a.troubleshooting_url
            .push(agent.troubleshooting_url.clone());
        a.motd_file.push(agent.motd_file.clone());
        a.display_apps.push(display_apps(&agent.display_apps));
        // Providers before the attribute existed gave agents full scope.
        a.api_key_scope.push(if agent.api_key_scope.is_empty() {
            "all".into()
        } else {
            agent.api_key_scope.clone()
        });
        a.display_order.push(agent.order);
        a.spec.push(serde_json::to_value(&spec).unwrap_or_default());
        a.parent.push(parent);
        for (order, metadata) in agent.metadata.iter().enumerate() {
            let m = &mut self.agent_metadata;
            m.agent.push(agent_id);
            m.key.push(metadata.key.clone());
            m.display_name.push(metadata.display_name.clone());
            m.script.push(metadata.script.clone());
            m.interval.push(metadata.interval);
            m.timeout.push(metadata.timeout);
            let order = if metadata.order != 0 {
                metadata.order
            } else {
                order as i64
            };
            m.display_order.push(i32::try_from(order).unwrap_or(0));
        }
        for script in &agent.scripts {
            let log_source = self.push_log_source(agent_id, &script.display_name, &script.icon);
            let s = &mut self.scripts;
            s.id.push(Uuid::new_v4());
            s.agent.push(agent_id);
            s.log_source.push(log_source);
            s.display_name.push(script.display_name.clone());
            s.script.push(script.script.clone());
            s.cron.push(script.cron.clone());
            s.run_on_start.push(script.run_on_start);
            s.run_on_stop.push(script.run_on_stop);
            s.start_blocks_login.push(script.start_blocks_login);
            s.timeout.push(script.timeout_seconds);
            s.log_path.push(script.log_path.clone());
            s.resource_address.push(script.resource_address.clone());
            s.dependencies
                .push(serde_json::to_value(&script.dependencies).unwrap_or_default());
        }
        for app in &agent.apps {
            let healthcheck = app.healthcheck.clone().unwrap_or_default();
            let p = &mut self.apps;
            p.id.push(Uuid::new_v4());
            p.provider_id.push(app.id.clone());
            p.agent.push(agent_id);
            p.slug.push(app.slug.clone());
            p.display_name.push(app.display_name.clone());
            p.icon.push(app.icon.clone());
            p.command
                .push((!app.command.is_empty()).then(|| app.command.clone()));
            p.url.push((!app.url.is_empty()).then(|| app.url.clone()));
            p.external.push(app.external);
            p.subdomain.push(app.subdomain);
            p.sharing_level.push(enum_str(&app.sharing_level, "owner"));
            p.health.push(
                if healthcheck.url.is_empty() {
                    "disabled"
                } else {
                    "initializing"
                }
                .into(),
            );
            p.healthcheck_url.push(healthcheck.url);
            p.healthcheck_interval.push(healthcheck.interval);
            p.healthcheck_threshold.push(healthcheck.threshold);
            p.open_in.push(enum_str(&app.open_in, "slim-window"));
            p.display_order.push(app.order);
            p.hidden.push(app.hidden);
            p.display_group.push(app.group.clone());
        }
    }

    fn push_log_source(&mut self, agent: Uuid, display_name: &str, icon: &str) -> Uuid {
        let id = Uuid::new_v4();
        let l = &mut self.log_sources;
        l.id.push(id);
        l.agent.push(agent);
        l.display_name.push(display_name.to_string());
        l.icon.push(icon.to_string());
        id
    }

    /// One of `parent`'s dev containers with its sub-agent.
    fn push_devcontainer(
        &mut self,
        resource: Uuid,
        parent: &proto::Agent,
        parent_id: Uuid,
        container: &proto::Devcontainer,
    ) {
        let subagent = match container.subagent_id.parse::<Uuid>() {
            Ok(wanted) if self.free_subagent_ids.remove(&wanted) => wanted,
            _ => Uuid::new_v4(),
        };
        self.push_agent(
            resource,
            &super::subagents::subagent_of(parent, container),
            subagent,
            Some(parent_id),
        );
        // The parent reports on the container (starting it, or why it cannot) under a log
        // source of its own.
        let log_source =
            self.push_log_source(parent_id, &format!("Dev container {}", container.name), "");
        let d = &mut self.devcontainers;
        d.id.push(Uuid::new_v4());
        d.agent.push(parent_id);
        d.log_source.push(log_source);
        d.name.push(container.name.clone());
        d.workspace_folder.push(container.workspace_folder.clone());
        d.config_path.push(container.config_path.clone());
        d.subagent.push(subagent);
    }

    /// Inserts every row, inside the caller's transaction. Nothing is sent when the job
    /// produced no resources.
    pub(super) async fn insert(
        &self,
        tx: &mut sqlx::PgConnection,
        job: Uuid,
        transition: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if self.resources.id.is_empty() {
            return Ok(());
        }
        let (r, m, a, am, l, s, p, d) = (
            &self.resources,
            &self.metadata,
            &self.agents,
            &self.agent_metadata,
            &self.log_sources,
            &self.scripts,
            &self.apps,
            &self.devcontainers,
        );
        // Foreign keys are checked at the end of the statement, when every CTE has run.
        sqlx::query!(
            r#"WITH resources AS (
                   INSERT INTO workspace_resources (id, job_id, transition, type, name, hide, icon,
                       instance_type, daily_cost, module_path, created_at)
                   SELECT r.id, $1, $2, r.type, r.name, r.hide, r.icon, r.instance_type,
                          r.daily_cost, r.module_path, $3
                   FROM unnest($4::uuid[], $5::text[], $6::text[], $7::bool[], $8::text[],
                               $9::text[], $10::int4[], $11::text[])
                        AS r(id, type, name, hide, icon, instance_type, daily_cost, module_path)
               ), metadata AS (
                   INSERT INTO workspace_resource_metadata (workspace_resource_id, position, key,
                       value, sensitive)
                   SELECT * FROM unnest($12::uuid[], $13::int4[], $14::text[], $15::text[],
                                        $16::bool[])
               ), agents AS (
                   INSERT INTO workspace_agents (id, resource_id, name, auth_token_hash,
                       auth_instance_id, architecture, operating_system, directory,
                       environment_variables, connection_timeout_seconds, troubleshooting_url,
                       motd_file, display_apps, api_key_scope, display_order, spec, created_at,
                       updated_at, parent_id)
                   SELECT a.id, a.resource_id, a.name, a.token_hash, a.instance_id,
                          a.architecture, a.operating_system, a.directory, a.env, a.timeout,
                          a.troubleshooting_url, a.motd_file,
                          ARRAY(SELECT jsonb_array_elements_text(a.display_apps)),
                          a.api_key_scope, a.display_order, a.spec, $3, $3, a.parent_id
                   FROM unnest($17::uuid[], $18::uuid[], $19::text[], $20::bytea[], $21::text[],
                               $22::text[], $23::text[], $24::text[], $25::jsonb[], $26::int4[],
                               $27::text[], $28::text[], $29::jsonb[], $30::text[], $31::int8[],
                               $32::jsonb[], $33::uuid[])
                        AS a(id, resource_id, name, token_hash, instance_id, architecture,
                             operating_system, directory, env, timeout, troubleshooting_url,
                             motd_file, display_apps, api_key_scope, display_order, spec,
                             parent_id)
               ), agent_metadata AS (
                   INSERT INTO workspace_agent_metadata (agent_id, key, display_name, script,
                       interval_seconds, timeout_seconds, display_order)
                   SELECT * FROM unnest($34::uuid[], $35::text[], $36::text[], $37::text[],
                                        $38::int8[], $39::int8[], $40::int4[])
                   ON CONFLICT (agent_id, key) DO NOTHING
               ), log_sources AS (
                   INSERT INTO workspace_agent_log_sources (id, agent_id, display_name, icon,
                       created_at)
                   SELECT l.id, l.agent_id, l.display_name, l.icon, $3
                   FROM unnest($41::uuid[], $42::uuid[], $43::text[], $44::text[])
                        AS l(id, agent_id, display_name, icon)
               ), scripts AS (
                   INSERT INTO workspace_agent_scripts (id, agent_id, log_source_id, display_name,
                       script, cron, run_on_start, run_on_stop, start_blocks_login,
                       timeout_seconds, log_path, resource_address, dependencies, created_at)
                   SELECT s.id, s.agent_id, s.log_source_id, s.display_name, s.script, s.cron,
                          s.run_on_start, s.run_on_stop, s.start_blocks_login, s.timeout,
                          s.log_path, s.resource_address, s.dependencies, $3
                   FROM unnest($45::uuid[], $46::uuid[], $47::uuid[], $48::text[], $49::text[],
                               $50::text[], $51::bool[], $52::bool[], $53::bool[], $54::int4[],
                               $55::text[], $56::text[], $57::jsonb[])
                        AS s(id, agent_id, log_source_id, display_name, script, cron,
                             run_on_start, run_on_stop, start_blocks_login, timeout, log_path,
                             resource_address, dependencies)
               ), apps AS (
                   INSERT INTO workspace_apps (id, agent_id, slug, display_name, icon, command,
                       url, external, subdomain, sharing_level, healthcheck_url,
                       healthcheck_interval, healthcheck_threshold, health, open_in,
                       display_order, hidden, display_group, created_at)
                   SELECT p.id, p.agent_id, p.slug, p.display_name, p.icon, p.command, p.url,
                          p.external, p.subdomain, p.sharing_level, p.healthcheck_url,
                          p.healthcheck_interval, p.healthcheck_threshold, p.health, p.open_in,
                          p.display_order, p.hidden, p.display_group, $3
                   FROM unnest($58::uuid[], $59::uuid[], $60::text[], $61::text[], $62::text[],
                               $63::text[], $64::text[], $65::bool[], $66::bool[], $67::text[],
                               $68::text[], $69::int4[], $70::int4[], $71::text[], $72::text[],
                               $73::int8[], $74::bool[], $75::text[])
                        AS p(id, agent_id, slug, display_name, icon, command, url, external,
                             subdomain, sharing_level, healthcheck_url, healthcheck_interval,
                             healthcheck_threshold, health, open_in, display_order, hidden,
                             display_group)
               )
               INSERT INTO workspace_agent_devcontainers (id, agent_id, log_source_id, name,
                   workspace_folder, config_path, created_at, subagent_id)
               SELECT d.id, d.agent_id, d.log_source_id, d.name, d.workspace_folder,
                      d.config_path, $3, d.subagent_id
               FROM unnest($76::uuid[], $77::uuid[], $78::uuid[], $79::text[], $80::text[],
                           $81::text[], $82::uuid[])
                    AS d(id, agent_id, log_source_id, name, workspace_folder, config_path,
                         subagent_id)"#,
            job,
            transition,
            now,
            &r.id,
            &r.kind,
            &r.name,
            &r.hide,
            &r.icon,
            &r.instance_type,
            &r.daily_cost,
            &r.module_path,
            &m.resource,
            &m.position,
            &m.key,
            &m.value as _,
            &m.sensitive,
            &a.id,
            &a.resource,
            &a.name,
            &a.token_hash as _,
            &a.instance_id as _,
            &a.architecture,
            &a.operating_system,
            &a.directory,
            &a.env,
            &a.connection_timeout,
            &a.troubleshooting_url,
            &a.motd_file,
            &a.display_apps,
            &a.api_key_scope,
            &a.display_order,
            &a.spec,
            &a.parent as _,
            &am.agent,
            &am.key,
            &am.display_name,
            &am.script,
            &am.interval,
            &am.timeout,
            &am.display_order,
            &l.id,
            &l.agent,
            &l.display_name,
            &l.icon,
            &s.id,
            &s.agent,
            &s.log_source,
            &s.display_name,
            &s.script,
            &s.cron,
            &s.run_on_start,
            &s.run_on_stop,
            &s.start_blocks_login,
            &s.timeout,
            &s.log_path,
            &s.resource_address,
            &s.dependencies,
            &p.id,
            &p.agent,
            &p.slug,
            &p.display_name,
            &p.icon,
            &p.command as _,
            &p.url as _,
            &p.external,
            &p.subdomain,
            &p.sharing_level,
            &p.healthcheck_url,
            &p.healthcheck_interval,
            &p.healthcheck_threshold,
            &p.health,
            &p.open_in,
            &p.display_order,
            &p.hidden,
            &p.display_group,
            &d.id,
            &d.agent,
            &d.log_source,
            &d.name,
            &d.workspace_folder,
            &d.config_path,
            &d.subagent
        )
        .execute(&mut *tx)
        .await?;
        Ok(())
    }
}
