//! Talking to a task's app, as Coder's `send` and `logs` do: the app its `coder_ai_task`
//! names is an AgentAPI server in the workspace, reached through the relay to the app's port
//! on its agent's loopback ([`agentapi`]). Either needs the right to connect into the task's
//! workspace (Coder's `ApplicationConnect`), and sending also the right to update it (input
//! changes what the workspace does); whoever lacks them gets *not found*, like whoever cannot
//! see the task. A task that is not active answers with Coder's status codes and messages
//! before any connection is tried.

use codersdk::tasks::{TaskLogEntry, TaskLogType, TaskLogsResponse, TaskStatus};
use codersdk::workspaces::Workspace;

use super::agentapi::{self, AgentStatus, Role};
use super::status;
use coderd_authz::{Action, Subject};
use coderd_core::domain::{self, resolve, views};
use coderd_core::state::AppState;

/// Why input could not be sent or the conversation read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Decided before the app was asked: not found, not active, an unusable app.
    #[error(transparent)]
    Domain(#[from] domain::Error),
    /// The app could not be reached, refused, or answered something unusable (Coder's 502).
    #[error("{message}: {detail}")]
    Gateway {
        message: &'static str,
        detail: String,
    },
}

fn gateway(message: &'static str) -> impl FnOnce(agentapi::Error) -> Error {
    move |e| Error::Gateway {
        message,
        detail: e.to_string(),
    }
}

/// The task's workspace as the API renders it and the task's status, once the subject may
/// `send` (or read the logs) of the task.
async fn authorised(
    state: &AppState,
    subject: &Subject,
    user: &str,
    task: &str,
    send: bool,
) -> Result<(Workspace, TaskStatus), Error> {
    let (_, row) = super::find(state, subject, user, task).await?;
    let object = resolve::workspace_object(&row);
    let needed: &[Action] = if send {
        &[Action::Connect, Action::Update]
    } else {
        &[Action::Connect]
    };
    if !needed.iter().all(|a| subject.can(*a, &object)) {
        return Err(domain::Error::NotFound.into());
    }
    let ws = views::workspace(state, row).await?;
    let status = status::status(&ws);
    Ok((ws, status))
}

/// Coder's refusal of input for a task that is not active.
fn not_active(status: TaskStatus) -> domain::Error {
    match status {
        TaskStatus::Pending | TaskStatus::Initializing => {
            domain::Error::conflict(format!("Task is {status}.")).with_detail(
                "The task is resuming. Wait for the task to become active before sending messages.",
            )
        }
        TaskStatus::Paused => domain::Error::conflict("Task is paused.")
            .with_detail("Resume the task to send messages."),
        _ => domain::Error::bad_request("Task must be active.").with_detail(format!(
            "Task status is \"{status}\", it must be \"active\" to interact with the task."
        )),
    }
}

/// The port of the task app's URL: AgentAPI speaks plain HTTP, and only the agent's loopback
/// is reachable through the relay.
fn app_port(url: &str) -> Result<u16, domain::Error> {
    let parsed = url::Url::parse(url).map_err(|e| {
        domain::Error::bad_request("The task app's URL is invalid.").with_detail(e.to_string())
    })?;
    if parsed.scheme() != "http" {
        return Err(domain::Error::bad_request(
            "Only http scheme is supported for direct agent-dial.",
        )
        .with_detail(format!("The task app's URL is {url:?}.")));
    }
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        None => false,
    };
    if !loopback {
        return Err(domain::Error::bad_request(
            "The task app's host is not reachable through the agent.",
        )
        .with_detail("Task apps are reached on the workspace's loopback (localhost)."));
    }
    Ok(parsed.port_or_known_default().unwrap_or(80))
}

/// A connection to the active task's app.
async fn connect(
    state: &AppState,
    subject: &Subject,
    ws: &Workspace,
) -> Result<agentapi::Client, Error> {
    let (agent, app) = status::task_app(ws)
        .ok_or_else(|| domain::Error::bad_request("Task does not have a workspace app."))?;
    let url = app
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| domain::Error::bad_request("Task app URL is not configured."))?;
    let port = app_port(url)?;
    // The relay's own rules for connecting: owner-only deployments, the latest build's agent.
    resolve::agent(state, subject, agent.id, Action::Connect)
        .await
        .map_err(|e| match e {
            domain::Error::Forbidden { .. } => domain::Error::NotFound,
            other => other,
        })?;
    agentapi::Client::connect(state, agent.id, ws.id, port)
        .await
        .map_err(gateway("Failed to reach task app endpoint."))
}

/// Sends `input` to the task's AI agent as the user's next message, once the agent waits for
/// input (AgentAPI refuses user messages while it works).
pub async fn send(
    state: &AppState,
    subject: &Subject,
    user: &str,
    task: &str,
    input: &str,
) -> Result<(), Error> {
    let (ws, status) = authorised(state, subject, user, task, true).await?;
    if input.is_empty() {
        return Err(domain::Error::bad_request("Task input is required.").into());
    }
    if status != TaskStatus::Active {
        return Err(not_active(status).into());
    }
    let mut app = connect(state, subject, &ws).await?;
    let agent = app
        .status()
        .await
        .map_err(gateway("Failed to get status from task app."))?;
    if agent != AgentStatus::Stable {
        return Err(Error::Gateway {
            message: "Task app is not ready to accept input.",
            detail: format!("Status: {}", agent.as_str()),
        });
    }
    app.post_user_message(input)
        .await
        .map_err(gateway("Task app rejected the message."))
}

/// The task's conversation: live from its app while the task is active. Coder shows a stored
/// snapshot of a paused or starting task's conversation; coderd stores none, so those get an
/// empty snapshot, and a failed task (whose snapshot would be stale) a conflict.
pub async fn logs(
    state: &AppState,
    subject: &Subject,
    user: &str,
    task: &str,
) -> Result<TaskLogsResponse, Error> {
    let (ws, status) = authorised(state, subject, user, task, false).await?;
    match status {
        TaskStatus::Active => {}
        TaskStatus::Paused | TaskStatus::Pending | TaskStatus::Initializing => {
            return Ok(TaskLogsResponse {
                logs: Vec::new(),
                snapshot: true,
                snapshot_at: None,
            });
        }
        TaskStatus::Error | TaskStatus::Unknown => {
            return Err(
                domain::Error::conflict("Cannot fetch logs for task in current state.")
                    .with_detail(format!("Task status is \"{status}\"."))
                    .into(),
            );
        }
    }
    let mut app = connect(state, subject, &ws).await?;
    let messages = app.messages().await.map_err(|e| match e {
        agentapi::Error::Invalid(detail) => Error::Gateway {
            message: "Invalid task app response.",
            detail,
        },
        other => gateway("Failed to get messages from task app.")(other),
    })?;
    Ok(TaskLogsResponse {
        logs: messages
            .into_iter()
            .map(|m| TaskLogEntry {
                id: m.id,
                content: m.content,
                kind: match m.role {
                    Role::User => TaskLogType::Input,
                    Role::Agent => TaskLogType::Output,
                },
                time: m.time,
            })
            .collect(),
        snapshot: false,
        snapshot_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_on_the_loopback() {
        assert_eq!(app_port("http://localhost:3284").ok(), Some(3284));
        assert_eq!(app_port("http://127.0.0.1/").ok(), Some(80));
        assert!(app_port("https://localhost:3284").is_err());
        assert!(app_port("http://example.com:3284").is_err());
        assert!(app_port("not a url").is_err());
    }

    #[test]
    fn inactive_tasks_are_refused_as_coder_refuses_them() {
        assert!(matches!(
            not_active(TaskStatus::Paused),
            domain::Error::Conflict { .. }
        ));
        assert!(matches!(
            not_active(TaskStatus::Initializing),
            domain::Error::Conflict { .. }
        ));
        assert!(matches!(
            not_active(TaskStatus::Error),
            domain::Error::BadRequest { .. }
        ));
    }
}
