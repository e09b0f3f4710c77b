//! A task's status, derived as Coder derives it, from its workspace as the API renders it:
//! first the latest build (its transition and job), then the lifecycle of the agent that
//! serves the task's app, then that app's health. The first that is not `active` decides.

use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::tasks::{Task, TaskState, TaskStateEntry, TaskStatus};
use codersdk::workspaces::{Workspace, WorkspaceAgent, WorkspaceApp, WorkspaceStatus};

use coderd_store::TaskRow;

fn from_build(transition: &str, job: ProvisionerJobStatus) -> TaskStatus {
    use ProvisionerJobStatus as J;
    match (transition, job) {
        (_, J::Failed | J::Canceling | J::Canceled) => TaskStatus::Error,
        ("stop" | "delete", J::Succeeded) => TaskStatus::Paused,
        ("start", J::Pending) => TaskStatus::Pending,
        ("start", J::Running | J::Succeeded) => TaskStatus::Active,
        _ => TaskStatus::Unknown,
    }
}

/// The task's agent by its lifecycle. A dev container's sub-agent that never connected never
/// will here (no container engine runs the container): an error, whose reason the agent's
/// health gives, rather than initialising for good.
fn from_agent(lifecycle: Option<&str>, stranded_subagent: bool) -> TaskStatus {
    if stranded_subagent {
        return TaskStatus::Error;
    }
    match lifecycle {
        None | Some("created" | "starting") => TaskStatus::Initializing,
        Some("ready" | "start_timeout" | "start_error") => TaskStatus::Active,
        Some(_) => TaskStatus::Unknown,
    }
}

fn from_app(health: Option<&str>) -> TaskStatus {
    match health {
        Some("initializing") => TaskStatus::Initializing,
        Some("unhealthy") => TaskStatus::Error,
        Some("healthy" | "disabled") => TaskStatus::Active,
        _ => TaskStatus::Unknown,
    }
}

/// The task's app in the latest build (the one its `coder_ai_task` names) and its agent.
pub(super) fn task_app(ws: &Workspace) -> Option<(&WorkspaceAgent, &WorkspaceApp)> {
    let app_id = ws.latest_build.ai_task_sidebar_app_id?;
    ws.latest_build
        .resources
        .iter()
        .flat_map(|r| &r.agents)
        .find_map(|agent| {
            agent
                .apps
                .iter()
                .find(|app| app.id == app_id)
                .map(|app| (agent, app))
        })
}

pub fn status(ws: &Workspace) -> TaskStatus {
    let build = &ws.latest_build;
    let by_build = from_build(&build.transition, build.job.status);
    if by_build != TaskStatus::Active {
        return by_build;
    }
    let app = task_app(ws);
    let by_agent = from_agent(
        app.map(|(agent, _)| agent.lifecycle_state.as_str()),
        app.is_some_and(|(agent, _)| {
            agent.parent_id.is_some() && agent.first_connected_at.is_none()
        }),
    );
    if by_agent != TaskStatus::Active {
        return by_agent;
    }
    from_app(app.map(|(_, app)| app.health.as_str()))
}

/// What the task is doing while it initialises (coderd keeps no app statuses yet, so nothing
/// is known once it is up).
fn current_state(ws: &Workspace, status: TaskStatus) -> Option<TaskStateEntry> {
    if status != TaskStatus::Initializing {
        return None;
    }
    let build = &ws.latest_build;
    let app = task_app(ws);
    let message = match (build.status, app) {
        (WorkspaceStatus::Pending | WorkspaceStatus::Starting, _) => {
            format!("Workspace is {}", build.status.as_str())
        }
        (_, Some((agent, app))) => match agent.lifecycle_state.as_str() {
            "created" => "Agent is connecting".to_owned(),
            "starting" => "Agent is starting".to_owned(),
            "ready" if app.health == "initializing" => "App is initializing".to_owned(),
            "ready" => "Initializing workspace applications".to_owned(),
            _ => "Initializing workspace agent".to_owned(),
        },
        (_, None) => "Initializing workspace".to_owned(),
    };
    Some(TaskStateEntry {
        timestamp: build.created_at,
        state: TaskState::Working,
        message,
        uri: String::new(),
    })
}

/// The API's task: the row's own facts and what its workspace shows now.
pub fn render(task: TaskRow, ws: &Workspace) -> Task {
    let status = status(ws);
    let app = task_app(ws);
    Task {
        id: task.id,
        organization_id: task.organization_id,
        owner_id: task.owner_id,
        owner_name: ws.owner_name.clone(),
        owner_avatar_url: ws.owner_avatar_url.clone(),
        name: task.name,
        display_name: task.display_name,
        template_id: ws.template_id,
        template_version_id: task.template_version_id,
        template_name: ws.template_name.clone(),
        template_display_name: ws.template_display_name.clone(),
        template_icon: ws.template_icon.clone(),
        workspace_id: Some(ws.id),
        workspace_name: ws.name.clone(),
        workspace_status: Some(ws.latest_build.status),
        workspace_build_number: ws.latest_build.build_number,
        workspace_agent_id: app.map(|(agent, _)| agent.id),
        workspace_agent_lifecycle: app.map(|(agent, _)| agent.lifecycle_state.clone()),
        workspace_agent_health: app.map(|(agent, _)| agent.health.clone()),
        workspace_app_id: app.map(|(_, app)| app.id),
        initial_prompt: task.prompt,
        status,
        current_state: current_state(ws, status),
        created_at: task.created_at,
        updated_at: ws.updated_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProvisionerJobStatus as J;

    #[test]
    fn the_build_decides_first() {
        assert_eq!(from_build("start", J::Pending), TaskStatus::Pending);
        assert_eq!(from_build("start", J::Running), TaskStatus::Active);
        assert_eq!(from_build("start", J::Succeeded), TaskStatus::Active);
        assert_eq!(from_build("start", J::Failed), TaskStatus::Error);
        assert_eq!(from_build("stop", J::Canceled), TaskStatus::Error);
        assert_eq!(from_build("stop", J::Succeeded), TaskStatus::Paused);
        assert_eq!(from_build("delete", J::Succeeded), TaskStatus::Paused);
        assert_eq!(from_build("stop", J::Running), TaskStatus::Unknown);
    }

    #[test]
    fn then_the_agent_then_the_app() {
        assert_eq!(from_agent(None, false), TaskStatus::Initializing);
        assert_eq!(
            from_agent(Some("starting"), false),
            TaskStatus::Initializing
        );
        assert_eq!(from_agent(Some("start_error"), false), TaskStatus::Active);
        assert_eq!(from_agent(Some("off"), false), TaskStatus::Unknown);
        assert_eq!(from_agent(Some("created"), true), TaskStatus::Error);
        assert_eq!(from_app(Some("initializing")), TaskStatus::Initializing);
        assert_eq!(from_app(Some("unhealthy")), TaskStatus::Error);
        assert_eq!(from_app(Some("disabled")), TaskStatus::Active);
        assert_eq!(from_app(None), TaskStatus::Unknown);
    }
}
