//! The SDK views of workspaces, builds, templates and versions, rendered in bulk (a handful
//! of queries per page, however many rows): what the API returns and the dashboard shows.

use std::collections::{BTreeMap, HashMap};

use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::templates::{MinimalUser, Template, TemplateVersion, TransitionStats};
use codersdk::workspaces::{Workspace, WorkspaceBuild, WorkspaceHealth, WorkspaceStatus};
use uuid::Uuid;

use super::render::{build_status, job_status, resources};
use super::{Error, Result, jobs, template_schedules};
use crate::state::AppState;
use coderd_authz::{self as authz, Action, Subject};
use coderd_store::{
    BuildFacts, BuildRow, BuildTimes, JobRow, ResourceTree, TemplateRow, TemplateVersionRow,
    WorkspaceRow,
};

/// Everything needed to render builds in bulk: their jobs, resources and the daemons.
struct BuildContext {
    jobs: HashMap<Uuid, JobRow>,
    resources: HashMap<Uuid, Vec<ResourceTree>>,
    daemons: jobs::Daemons,
    /// Queue (position, size) of pending jobs, where read with the daemons.
    queues: HashMap<Uuid, (i64, i64)>,
}

impl From<BuildFacts> for BuildContext {
    fn from(facts: BuildFacts) -> Self {
        let mut resources: HashMap<Uuid, Vec<ResourceTree>> = HashMap::new();
        for tree in facts.trees {
            resources
                .entry(tree.resource.job_id)
                .or_default()
                .push(tree);
        }
        Self {
            jobs: facts.jobs.into_iter().map(|j| (j.id, j)).collect(),
            resources,
            daemons: facts.daemons.into(),
            queues: HashMap::new(),
        }
    }
}

async fn build_view(
    state: &AppState,
    row: BuildRow,
    ctx: &mut BuildContext,
) -> Result<WorkspaceBuild> {
    let job = ctx
        .jobs
        .remove(&row.job_id)
        .ok_or_else(|| Error::internal(format!("build {} has no job", row.id)))?;
    let queue = ctx.queues.remove(&job.id);
    let (rendered, matched) = jobs::render_matched(state, &job, &ctx.daemons, queue).await?;
    let status = build_status(&row.transition, rendered.status);
    let mut resources = resources(ctx.resources.remove(&row.job_id).unwrap_or_default());
    name_subdomain_apps(
        state,
        &mut resources,
        &row.workspace_name,
        &row.owner_username,
    );
    Ok(WorkspaceBuild {
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        workspace_id: row.workspace_id,
        workspace_name: row.workspace_name,
        workspace_owner_id: row.workspace_owner_id,
        workspace_owner_name: row.owner_username,
        workspace_owner_avatar_url: row.owner_avatar_url,
        template_version_id: row.template_version_id,
        template_version_name: row.template_version_name,
        build_number: row.build_number,
        transition: row.transition,
        initiator_id: row.initiator_id,
        initiator_name: row.initiator_username,
        job: rendered,
        reason: row.reason,
        resources,
        deadline: row.deadline,
        max_deadline: row.max_deadline,
        status,
        daily_cost: row.daily_cost,
        matched_provisioners: Some(matched),
        has_ai_task: row.has_ai_task,
        ai_task_sidebar_app_id: row.ai_task_sidebar_app_id,
        has_external_agent: row.has_external_agent,
        template_version_preset_id: row.template_version_preset_id,
    })
}

/// Fills `subdomain_name` of subdomain apps, as Coder does, when the deployment has a wildcard
/// access URL (without one, such apps are unavailable and have none).
fn name_subdomain_apps(
    state: &AppState,
    resources: &mut [codersdk::workspaces::WorkspaceResource],
    workspace: &str,
    owner: &str,
) {
    for agent in resources.iter_mut().flat_map(|r| r.agents.iter_mut()) {
        for app in agent.apps.iter_mut().filter(|a| a.subdomain) {
            app.subdomain_name = crate::app_urls::subdomain_name(
                &state.options.apps,
                &app.slug,
                &agent.name,
                workspace,
                owner,
            );
        }
    }
}

pub async fn builds(state: &AppState, rows: Vec<BuildRow>) -> Result<Vec<WorkspaceBuild>> {
    let ctx = state.store.build_facts(&rows).await?.into();
    render_builds(state, rows, ctx).await
}

async fn render_builds(
    state: &AppState,
    rows: Vec<BuildRow>,
    mut ctx: BuildContext,
) -> Result<Vec<WorkspaceBuild>> {
    let mut builds = Vec::with_capacity(rows.len());
    for row in rows {
        builds.push(build_view(state, row, &mut ctx).await?);
    }
    Ok(builds)
}

fn workspace_view(state: &AppState, row: WorkspaceRow, latest_build: WorkspaceBuild) -> Workspace {
    // Dev containers' sub-agents never run here (no container engine): counting them would
    // make every workspace with a dev container unhealthy for good. Their own health says why.
    let failing_agents: Vec<Uuid> = latest_build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .filter(|a| a.parent_id.is_none())
        .filter(|a| !a.health.healthy && latest_build.status == WorkspaceStatus::Running)
        .map(|a| a.id)
        .collect();
    Workspace {
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        owner_id: row.owner_id,
        owner_name: row.owner_username,
        owner_avatar_url: row.owner_avatar_url,
        organization_id: row.organization_id,
        organization_name: row.organization_name,
        template_id: row.template_id,
        template_name: row.template_name,
        template_display_name: row.template_display_name,
        template_icon: row.template_icon,
        template_allow_user_cancel_workspace_jobs: row.template_allow_user_cancel_workspace_jobs,
        template_active_version_id: row.template_active_version_id,
        template_require_active_version: row.template_require_active_version,
        outdated: latest_build.template_version_id != row.template_active_version_id,
        latest_build,
        name: row.name,
        autostart_schedule: row.autostart_schedule,
        // When the template decides when workspaces stop, its TTL is the one that applies.
        ttl_ms: if row.template_allow_user_autostop {
            row.ttl_ms
        } else {
            Some(row.template_default_ttl_ms)
        },
        last_used_at: row.last_used_at,
        deleting_at: row.dormant_at.and_then(|at| {
            (row.template_time_til_dormant_autodelete_ms > 0).then(|| {
                at + chrono::Duration::milliseconds(row.template_time_til_dormant_autodelete_ms)
            })
        }),
        dormant_at: row.dormant_at,
        health: WorkspaceHealth {
            healthy: failing_agents.is_empty(),
            failing_agents,
        },
        automatic_updates: row.automatic_updates,
        allow_renames: state.options.allow_workspace_renames,
        favorite: row.favorite,
        next_start_at: row
            .next_start_at
            .filter(|_| row.template_allow_user_autostart),
        is_prebuild: row.owner_id == coderd_store::PREBUILDS_USER_ID,
        latest_app_status: None,
        template_use_classic_parameter_flow: true,
    }
}

/// Renders workspaces with their latest builds, in bulk.
pub async fn workspaces(state: &AppState, rows: Vec<WorkspaceRow>) -> Result<Vec<Workspace>> {
    let ids: Vec<Uuid> = rows.iter().map(|w| w.id).collect();
    let (latest, facts) = state.store.latest_builds_with_facts(&ids).await?;
    render_workspaces(state, rows, latest, facts).await
}

/// Renders the workspaces `ids` name (the caller may see them all), in that order.
pub async fn workspaces_by_ids(state: &AppState, ids: &[Uuid]) -> Result<Vec<Workspace>> {
    let (rows, latest, facts) = state.store.workspaces_with_latest_builds(ids).await?;
    render_workspaces(state, rows, latest, facts).await
}

/// A workspace by id (deleted ones only when asked for), rendered, when `subject` may read
/// it; [`Error::NotFound`] otherwise, as [`super::resolve::workspace`] answers. Its rows are read
/// before the check so that the whole response is one connection's work.
pub async fn readable_workspace(
    state: &AppState,
    subject: &Subject,
    id: Uuid,
    include_deleted: bool,
) -> Result<Workspace> {
    // Deleted ones are looked up too: one the caller could see answers 410, as Coder's does.
    let (row, latest, facts) = state.store.workspace_with_latest_build(id, true).await?;
    authz::authorize(
        subject,
        Action::Read,
        &super::resolve::workspace_object(&row),
    )?;
    if row.deleted && !include_deleted {
        return Err(Error::Gone {
            message: format!("Workspace {id:?} was deleted; add ?include_deleted=true to see it."),
        });
    }
    render_workspaces(state, vec![row], latest, facts)
        .await?
        .pop()
        .ok_or_else(|| Error::internal("a rendered workspace vanished"))
}

async fn render_workspaces(
    state: &AppState,
    rows: Vec<WorkspaceRow>,
    latest: Vec<BuildRow>,
    facts: BuildFacts,
) -> Result<Vec<Workspace>> {
    let mut builds: HashMap<Uuid, WorkspaceBuild> = render_builds(state, latest, facts.into())
        .await?
        .into_iter()
        .map(|b| (b.workspace_id, b))
        .collect();
    rows.into_iter()
        .map(|row| {
            let build = builds
                .remove(&row.id)
                .ok_or_else(|| Error::internal(format!("workspace {} has no build", row.id)))?;
            Ok(workspace_view(state, row, build))
        })
        .collect()
}

/// One build, rendered.
pub async fn build(state: &AppState, row: BuildRow) -> Result<WorkspaceBuild> {
    builds(state, vec![row])
        .await?
        .pop()
        .ok_or_else(|| Error::internal("a rendered build vanished"))
}

/// A build just created, rendered from the rows its insert returned: the job as written
/// (pending unless claimed at the insert; a daemon may have claimed it since, as it may right
/// after any read), and no resources, which a job has only once it ran. Only the daemons and,
/// for a pending job, its place in the queue are read: in one statement when there are daemons.
pub async fn new_build(state: &AppState, row: BuildRow, job: JobRow) -> Result<WorkspaceBuild> {
    let mut queues = HashMap::new();
    let daemons = match job_status(&job) {
        ProvisionerJobStatus::Pending => match state.store.daemons_and_queue(&job).await? {
            Some((daemons, queue)) => {
                queues.insert(job.id, queue);
                daemons
            }
            // No daemon to carry the counts: `render_matched` reads the position itself.
            None => Vec::new(),
        },
        _ => state.store.daemons(Some(job.organization_id), None).await?,
    };
    let mut ctx = BuildContext {
        jobs: HashMap::from([(job.id, job)]),
        resources: HashMap::new(),
        daemons: daemons.into(),
        queues,
    };
    build_view(state, row, &mut ctx).await
}

/// One workspace with its latest build, rendered.
pub async fn workspace(state: &AppState, row: WorkspaceRow) -> Result<Workspace> {
    workspaces(state, vec![row])
        .await?
        .pop()
        .ok_or_else(|| Error::internal("a rendered workspace vanished"))
}

fn template_view(
    state: &AppState,
    row: TemplateRow,
    stats: Option<&BTreeMap<String, BuildTimes>>,
) -> Template {
    let build_time_stats = ["start", "stop", "delete"]
        .into_iter()
        .map(|transition| {
            let times = stats.and_then(|s| s.get(transition));
            (
                transition.to_string(),
                TransitionStats {
                    p50: times.map(|t| t.p50),
                    p95: times.map(|t| t.p95),
                },
            )
        })
        .collect();
    Template {
        active_user_count: state.template_usage.active_users(row.id),
        autostop_requirement: template_schedules::autostop_requirement(&row),
        autostart_requirement: template_schedules::autostart_requirement(&row),
        id: row.id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        organization_id: row.organization_id,
        organization_name: row.organization_name,
        organization_display_name: row.organization_display_name,
        organization_icon: row.organization_icon,
        name: row.name,
        display_name: row.display_name,
        provisioner: row.provisioner,
        active_version_id: row.active_version_id,
        description: row.description,
        deprecated: !row.deprecated.is_empty(),
        deprecation_message: row.deprecated,
        icon: row.icon,
        default_ttl_ms: row.default_ttl_ms,
        activity_bump_ms: row.activity_bump_ms,
        created_by_id: row.created_by,
        created_by_name: row.created_by_username,
        allow_user_cancel_workspace_jobs: row.allow_user_cancel_workspace_jobs,
        allow_user_autostart: row.allow_user_autostart,
        allow_user_autostop: row.allow_user_autostop,
        failure_ttl_ms: row.failure_ttl_ms,
        time_til_dormant_ms: row.time_til_dormant_ms,
        time_til_dormant_autodelete_ms: row.time_til_dormant_autodelete_ms,
        require_active_version: row.require_active_version,
        max_port_share_level: row.max_port_share_level,
        cors_behavior: row.cors_behavior,
        build_time_stats,
        deleted: row.deleted,
        disable_module_cache: false,
        use_classic_parameter_flow: true,
    }
}

/// Templates with their build time statistics, in bulk (one statistics query for all).
pub async fn templates(state: &AppState, rows: Vec<TemplateRow>) -> Result<Vec<Template>> {
    let stats = state.build_times.snapshot();
    Ok(rows
        .into_iter()
        .map(|row| {
            let times = stats.get(&row.id);
            template_view(state, row, times)
        })
        .collect())
}

pub async fn template(state: &AppState, row: TemplateRow) -> Result<Template> {
    templates(state, vec![row])
        .await?
        .pop()
        .ok_or_else(|| Error::internal("a rendered template vanished"))
}

pub async fn version(state: &AppState, row: TemplateVersionRow) -> Result<TemplateVersion> {
    let job = state.store.job_by_id(row.job_id).await?;
    let (rendered, matched) = jobs::render_one(state, &job).await?;
    Ok(TemplateVersion {
        id: row.id,
        template_id: row.template_id,
        organization_id: row.organization_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        name: row.name,
        message: row.message,
        job: rendered,
        readme: row.readme,
        created_by: MinimalUser {
            id: row.created_by,
            username: row.created_by_username,
            avatar_url: row.created_by_avatar_url,
            name: row.created_by_name,
        },
        archived: row.archived,
        warnings: Vec::new(),
        matched_provisioners: Some(matched),
        has_external_agent: row.has_external_agent,
    })
}
