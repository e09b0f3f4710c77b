//! Coder's Tasks: a prompt for an AI agent, run in a workspace of a template version that
//! declares a `coder_ai_task`. A task is a workspace with a name, a prompt and a derived status
//! on top: it is created through the domain's workspace creation (the same rules, audit and
//! job as any workspace; the task row is written in its transaction), seen by whoever may see
//! the workspace (anyone else gets *not found*), and deleted with a delete build of the
//! workspace. Every build of its workspace hands the prompt to the provider
//! (`CODER_TASK_ID`, `CODER_TASK_PROMPT`; see `provisioners::payload`).
//!
//! Sending input to a task's app and reading its conversation (Coder's `send` and `logs`) go
//! through the AgentAPI server the app runs ([`app`], over the relay).

mod agentapi;
mod app;
mod name;
mod query;
pub mod routes;
mod status;

use codersdk::ValidationError;
use codersdk::provisionerd::Transition;
use codersdk::tasks::{CreateTaskRequest, Task};
use codersdk::workspaces::{CreateWorkspaceRequest, WorkspaceBuildParameter};
use uuid::Uuid;

use coderd_authz::{Action, Resource, Subject};
use coderd_core::domain::builds::{self, BuildReason, BuildRequest};
use coderd_core::domain::{Error, Result, parameters, resolve, views};
use coderd_core::state::AppState;
use coderd_core::validate;
use coderd_store::{NewTask, TaskRow, WorkspaceRow};

pub use app::{Error as AppError, logs, send};
pub use name::DISPLAY_NAME_MAX;

/// The parameter through which templates made for Coder before the `coder_task` data source
/// received the prompt; a version that still declares it gets the prompt there too.
pub const LEGACY_PROMPT_PARAMETER: &str = "AI Prompt";

fn invalid(field: &str, detail: impl Into<String>) -> ValidationError {
    ValidationError {
        field: field.into(),
        detail: detail.into(),
    }
}

/// Creates a task for `user` (`me`, a username or an id) and its workspace, whose first build
/// starts at once.
pub async fn create(
    state: &AppState,
    subject: &Subject,
    user: &str,
    req: &CreateTaskRequest,
) -> Result<Task> {
    let owner = resolve::user(state, subject, user).await?;
    // Named in the body, not the path: a version the caller cannot see is a bad request.
    let version = match resolve::version(state, subject, req.template_version_id).await {
        Ok(version) => version,
        Err(Error::NotFound) => {
            return Err(Error::Validation(vec![invalid(
                "template_version_id",
                "Template version not found or you do not have access to this resource.",
            )]));
        }
        Err(e) => return Err(e),
    };
    let mut invalids = Vec::new();
    if !version.has_ai_task {
        invalids.push(invalid(
            "template_version_id",
            "Template does not have a valid \"coder_ai_task\" resource.",
        ));
    }
    if req.input.trim().is_empty() {
        invalids.push(invalid("input", "A task needs an input (its prompt)."));
    }
    if !req.name.is_empty()
        && let Err(detail) = validate::name(&req.name)
    {
        invalids.push(invalid("name", detail));
    }
    let display_name = req.display_name.trim();
    if display_name.chars().count() > DISPLAY_NAME_MAX {
        invalids.push(invalid(
            "display_name",
            format!("must be {DISPLAY_NAME_MAX} characters or less"),
        ));
    }
    if !invalids.is_empty() {
        return Err(Error::Validation(invalids));
    }
    let name = match req.name.as_str() {
        "" => name::generate(&req.input),
        given => given.to_owned(),
    };
    let task = NewTask {
        id: Uuid::new_v4(),
        name: name.clone(),
        display_name: match display_name {
            "" => name::display_name(&req.input),
            given => given.to_owned(),
        },
        prompt: req.input.clone(),
    };
    let rich_parameter_values = parameters::declared(&version)
        .iter()
        .filter(|p| p.name == LEGACY_PROMPT_PARAMETER)
        .map(|p| WorkspaceBuildParameter {
            name: p.name.clone(),
            value: req.input.clone(),
        })
        .collect();
    let workspace = CreateWorkspaceRequest {
        template_version_id: Some(version.id),
        template_version_preset_id: req.template_version_preset_id,
        name,
        rich_parameter_values,
        ..CreateWorkspaceRequest::default()
    };
    let row = builds::create_task_workspace(state, subject, owner.id, &workspace, &task).await?;
    let task = state.store.task_by_id(task.id).await?;
    render(state, task, row).await
}

/// The tasks `q` matches among those the subject may see (Coder's search: `owner:`,
/// `organization:`, `status:`), newest first.
pub async fn list(state: &AppState, subject: &Subject, q: &str) -> Result<Vec<Task>> {
    let search = query::parse(state, subject, q).await?;
    let filter = subject.filter(Resource::Workspace);
    let rows = state.store.list_tasks(&search.store, &filter).await?;
    let ids: Vec<Uuid> = rows.iter().map(|t| t.workspace_id).collect();
    let workspaces: std::collections::HashMap<Uuid, _> = views::workspaces_by_ids(state, &ids)
        .await?
        .into_iter()
        .map(|w| (w.id, w))
        .collect();
    // A workspace deleted since the tasks were read takes its task with it.
    let tasks = rows.into_iter().filter_map(|task| {
        let ws = workspaces.get(&task.workspace_id)?;
        Some(status::render(task, ws))
    });
    Ok(tasks
        .filter(|t| search.status.is_none_or(|s| t.status == s))
        .collect())
}

/// The id of the user a path or search names (`me`, an id or a username), without deciding
/// whether the subject may see them: what is shown of them is their tasks, which the
/// workspaces' rules guard (an organization admin sees its members' tasks without reading the
/// users), and an unknown user is as absent as an invisible task.
pub(crate) async fn user_id(state: &AppState, subject: &Subject, param: &str) -> Result<Uuid> {
    if param == "me" {
        return Ok(subject.user_id);
    }
    if let Ok(id) = param.parse::<Uuid>() {
        return Ok(id);
    }
    Ok(state.store.user_by_username(param).await?.id)
}

/// A task of `user` by id or name, with its workspace, when the subject may see the workspace.
async fn find(
    state: &AppState,
    subject: &Subject,
    user: &str,
    task: &str,
) -> Result<(TaskRow, WorkspaceRow)> {
    let owner = user_id(state, subject, user).await?;
    let row = match task.parse::<Uuid>() {
        Ok(id) => state.store.task_by_id(id).await?,
        Err(_) => state.store.task_by_owner_and_name(owner, task).await?,
    };
    if row.owner_id != owner {
        return Err(Error::NotFound);
    }
    let workspace =
        resolve::workspace(state, subject, row.workspace_id, Action::Read, false).await?;
    Ok((row, workspace))
}

pub async fn get(state: &AppState, subject: &Subject, user: &str, task: &str) -> Result<Task> {
    let (task, workspace) = find(state, subject, user, task).await?;
    render(state, task, workspace).await
}

/// Deletes a task: a delete build of its workspace (which needs the right to delete it), then
/// the task itself. A workspace that is still building refuses, and the task stays.
pub async fn delete(state: &AppState, subject: &Subject, user: &str, task: &str) -> Result<()> {
    let (task, workspace) = find(state, subject, user, task).await?;
    builds::create_build(
        state,
        subject,
        &workspace,
        BuildRequest::new(Transition::Delete, BuildReason::Initiator),
    )
    .await?;
    state
        .store
        .delete_task(task.id, state.options.clock.now())
        .await?;
    Ok(())
}

async fn render(state: &AppState, task: TaskRow, workspace: WorkspaceRow) -> Result<Task> {
    let ws = views::workspace(state, workspace).await?;
    Ok(status::render(task, &ws))
}
