//! `coder task create|list|status|delete|send|logs`: Coder's Tasks. A task is named by its id,
//! by its name (the caller's), or as `owner/name`. `send` and `logs` talk to the task's app
//! (its AgentAPI server) through coderd.

use std::io::Read as _;
use std::time::Duration;

use anyhow::{Context as _, bail};
use codersdk::Client;
use codersdk::tasks::{CreateTaskRequest, Task, TaskSendRequest, TaskStatus, TasksFilter};
use codersdk::workspaces::CreateWorkspaceBuildRequest;
use serde::Serialize;

use crate::GlobalArgs;
use crate::jobs::{self, Watched};
use crate::orgs::OrgArg;
use crate::output::{self, Format, OutputArgs, Tabular};

#[derive(Debug, clap::Subcommand)]
pub enum TaskCommand {
    /// Create a task.
    Create(CreateArgs),
    /// List tasks.
    #[command(alias = "ls")]
    List(ListArgs),
    /// Show the status of a task.
    #[command(alias = "stat")]
    Status(StatusArgs),
    /// Delete tasks.
    #[command(aliases = ["rm", "remove"])]
    Delete {
        /// Tasks to delete.
        #[arg(required = true)]
        tasks: Vec<String>,
        /// Bypass confirmation prompts.
        #[arg(short, long)]
        yes: bool,
    },
    /// Send input to a task.
    Send {
        task: String,
        input: Option<String>,
        /// Reads the input from stdin.
        #[arg(long)]
        stdin: bool,
    },
    /// Show a task's logs.
    Logs(LogsArgs),
}

/// The columns `coder task logs` can show (Coder's names).
const LOG_COLUMNS: &[&str] = &["id", "content", "type", "time"];

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    task: String,
    /// Columns to display in table output (id, content, type, time).
    #[arg(
        short,
        long = "column",
        value_delimiter = ',',
        default_value = "type,content"
    )]
    columns: Vec<String>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The task's input (its prompt).
    input: Option<String>,
    /// Name of the task; generated from the input when missing.
    #[arg(long)]
    name: Option<String>,
    /// Owner of the task; defaults to you.
    #[arg(long, default_value = "me")]
    owner: String,
    /// Template to run the task in; may be left out when the organization has one template.
    #[arg(long, env = "CODER_TASK_TEMPLATE_NAME")]
    template: Option<String>,
    /// Version of the template; defaults to its active version.
    #[arg(long = "template-version", env = "CODER_TASK_TEMPLATE_VERSION")]
    template_version: Option<String>,
    /// Preset of the template version (`none` for none).
    #[arg(long, env = "CODER_TASK_PRESET_NAME", default_value = crate::presets::NONE)]
    preset: String,
    /// Read the input from standard input.
    #[arg(long)]
    stdin: bool,
    /// Only print the created task's id.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    org: OrgArg,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only tasks of this status.
    #[arg(long, value_parser = parse_status)]
    status: Option<TaskStatus>,
    /// Tasks of every user you can see.
    #[arg(short, long)]
    all: bool,
    /// Tasks of this user (a username or `me`).
    #[arg(long)]
    user: Option<String>,
    /// Only print the tasks' ids.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    task: String,
    /// Keep printing the status as it changes, until the task's workspace stops.
    #[arg(long)]
    watch: bool,
    /// How often `--watch` polls.
    #[arg(long, hide = true, default_value = "1s", value_parser = humantime::parse_duration)]
    watch_interval: Duration,
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_status(s: &str) -> Result<TaskStatus, String> {
    s.parse()
}

/// How long ago, in whole seconds.
fn ago(t: &chrono::DateTime<chrono::Utc>) -> String {
    let seconds = (chrono::Utc::now() - *t).num_seconds().max(0);
    format!("{}s ago", seconds)
}

fn state(task: &Task) -> (String, String, String) {
    match &task.current_state {
        Some(s) => (
            s.state.as_str().to_owned(),
            ago(&s.timestamp),
            s.message.clone(),
        ),
        None => (String::new(), String::new(), String::new()),
    }
}

/// Agent healthy and neither starting nor shutting down.
fn healthy(task: &Task) -> bool {
    task.workspace_agent_health
        .as_ref()
        .is_some_and(|h| h.healthy)
        && matches!(
            task.workspace_agent_lifecycle.as_deref(),
            Some("ready" | "start_timeout" | "start_error")
        )
}

#[derive(Serialize)]
#[serde(transparent)]
struct ListRow(Task);

impl Tabular for ListRow {
    fn headers() -> &'static [&'static str] {
        &["name", "status", "state", "state changed", "message"]
    }
    fn row(&self) -> Vec<String> {
        let (state, changed, message) = state(&self.0);
        vec![
            self.0.name.clone(),
            self.0.status.to_string(),
            state,
            changed,
            message,
        ]
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct StatusRow(Task);

impl Tabular for StatusRow {
    fn headers() -> &'static [&'static str] {
        &["state changed", "status", "healthy", "state", "message"]
    }
    fn row(&self) -> Vec<String> {
        let task = &self.0;
        let (state, changed, message) = state(task);
        vec![
            if changed.is_empty() {
                ago(&task.updated_at)
            } else {
                changed
            },
            task.status.to_string(),
            healthy(task).to_string(),
            state,
            message,
        ]
    }
}

fn read_stdin() -> anyhow::Result<String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the input from standard input")?;
    Ok(input)
}

pub async fn run(global: &GlobalArgs, cmd: TaskCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        TaskCommand::Create(args) => create(&client, args).await,
        TaskCommand::List(args) => list(&client, args).await,
        TaskCommand::Status(args) => status(&client, args).await,
        TaskCommand::Delete { tasks, yes } => delete(&client, &tasks, yes).await,
        TaskCommand::Send { task, input, stdin } => {
            let input = match (input, stdin) {
                (_, true) => read_stdin()?,
                (Some(input), false) => input,
                (None, false) => bail!("expected an input for the task"),
            };
            send(&client, &task, input).await
        }
        TaskCommand::Logs(args) => logs(&client, args).await,
    }
}

/// The version to run in: the named template's (or the organization's only template's)
/// active version, or the named version of it.
async fn version_of(client: &Client, args: &CreateArgs) -> anyhow::Result<uuid::Uuid> {
    let org = args.org.resolve(client).await?;
    let org_id = org.id.to_string();
    let template = match &args.template {
        Some(name) => client
            .template_by_name(&org_id, name)
            .await
            .with_context(|| format!("template {name:?}"))?,
        None => {
            let mut templates = client.templates(&org_id).await?;
            match templates.len() {
                0 => bail!("no task templates configured"),
                1 => templates.remove(0),
                _ => bail!(
                    "template name not provided, available templates: {}",
                    templates
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    match &args.template_version {
        Some(version) => Ok(client
            .template_version_by_name(template.id, version)
            .await
            .with_context(|| format!("template version {version:?}"))?
            .id),
        None => Ok(template.active_version_id),
    }
}

async fn create(client: &Client, args: CreateArgs) -> anyhow::Result<()> {
    let input = match (&args.input, args.stdin) {
        (_, true) => read_stdin()?,
        (Some(input), false) => input.clone(),
        (None, false) => bail!("expected an input for the task"),
    };
    if input.is_empty() {
        bail!("a task cannot be started with an empty input");
    }
    let version = version_of(client, &args).await?;
    let preset = crate::presets::choose(
        client.template_version_presets(version).await?,
        Some(&args.preset),
        false,
    )?;
    let task = client
        .create_task(
            &args.owner,
            &CreateTaskRequest {
                template_version_id: version,
                template_version_preset_id: preset.map(|p| p.id),
                input,
                name: args.name.unwrap_or_default(),
                display_name: String::new(),
            },
        )
        .await
        .context("create task")?;
    if args.quiet {
        println!("{}", task.id);
    } else {
        println!(
            "The task {} has been created at {}!",
            task.name,
            output::time(&task.created_at)
        );
    }
    Ok(())
}

async fn list(client: &Client, args: ListArgs) -> anyhow::Result<()> {
    let owner = match (args.user, args.all) {
        (Some(user), _) => user.trim().to_owned(),
        (None, true) => String::new(),
        (None, false) => "me".to_owned(),
    };
    let tasks = client
        .tasks(&TasksFilter {
            owner,
            status: args.status,
            ..TasksFilter::default()
        })
        .await
        .context("list tasks")?;
    if args.quiet {
        for task in &tasks {
            println!("{}", task.id);
        }
        return Ok(());
    }
    if tasks.is_empty() && args.output.output == Format::Table {
        eprintln!("No tasks found.");
        return Ok(());
    }
    let rows: Vec<ListRow> = tasks.into_iter().map(ListRow).collect();
    output::print_list(args.output.output, &rows)
}

/// The task's workspace stopped, or its agent is up and its AI agent no longer working.
fn watch_ended(task: &Task) -> bool {
    use codersdk::workspaces::WorkspaceStatus;
    if task.workspace_status == Some(WorkspaceStatus::Stopped) {
        return true;
    }
    healthy(task)
        && task
            .current_state
            .as_ref()
            .is_some_and(|s| s.state != codersdk::tasks::TaskState::Working)
}

async fn status(client: &Client, args: StatusArgs) -> anyhow::Result<()> {
    let mut task = client.task_by_identifier(&args.task).await?;
    output::print_one(args.output.output, &StatusRow(task.clone()))?;
    if !args.watch {
        return Ok(());
    }
    let summary = |t: &Task| {
        let (state, _, message) = state(t);
        (t.status, healthy(t), state, message)
    };
    while !watch_ended(&task) {
        tokio::time::sleep(args.watch_interval).await;
        let next = client.task(&task.owner_name, &task.id.to_string()).await?;
        if summary(&next) != summary(&task) {
            match args.output.output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&next)?),
                Format::Table => println!("{}", StatusRow(next.clone()).row().join("  ")),
            }
        }
        task = next;
    }
    Ok(())
}

async fn delete(client: &Client, identifiers: &[String], yes: bool) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for identifier in identifiers {
        let task = client
            .task_by_identifier(identifier)
            .await
            .with_context(|| format!("resolve task {identifier:?}"))?;
        tasks.push(task);
    }
    let display: Vec<String> = tasks
        .iter()
        .map(|t| format!("{}/{}", t.owner_name, t.name))
        .collect();
    if !yes && !crate::prompt::confirm(&format!("Delete these tasks: {}?", display.join(", ")))? {
        bail!("canceled");
    }
    for (task, display) in tasks.iter().zip(&display) {
        client
            .delete_task(&task.owner_name, &task.id.to_string())
            .await
            .with_context(|| format!("delete task {display:?}"))?;
        println!(
            "Deleted task {display} at {}",
            output::time(&chrono::Utc::now())
        );
    }
    Ok(())
}

/// How often `send` looks whether a starting task has become active.
const READY_POLL: Duration = Duration::from_secs(2);
/// How long a starting task may show `error` before `send` gives up on it (Coder's grace: the
/// status can flicker through `error` while a healthy task starts).
const ERROR_GRACE: Duration = Duration::from_secs(5 * 60);

/// Sends `input` to the task as Coder's CLI does: a paused task is resumed (a start build of
/// its workspace, whose log is shown) and a starting one waited for until it is active. Coder's
/// CLI then also waits for the AI agent to report itself idle; coderd keeps no app statuses,
/// so here the server's check of the task app's own status stands in: a busy agent is refused
/// with that status.
async fn send(client: &Client, identifier: &str, input: String) -> anyhow::Result<()> {
    let mut task = client
        .task_by_identifier(identifier)
        .await
        .context("resolve task")?;
    let display = format!("{}/{}", task.owner_name, task.name);
    match task.status {
        TaskStatus::Active => {}
        TaskStatus::Paused => {
            let workspace = task
                .workspace_id
                .with_context(|| format!("resume task {display:?}: it has no workspace"))?;
            let build = client
                .create_workspace_build(
                    workspace,
                    &CreateWorkspaceBuildRequest {
                        transition: "start".into(),
                        reason: "cli".into(),
                        ..Default::default()
                    },
                )
                .await
                .with_context(|| format!("resume task {display:?}"))?;
            jobs::watch(client, Watched::WorkspaceBuild(build.id))
                .await
                .with_context(|| format!("wait for task {display:?} to be ready"))?;
            task = wait_active(client, task, &display).await?;
        }
        TaskStatus::Pending | TaskStatus::Initializing => {
            eprintln!("Waiting for task {display} to become active...");
            task = wait_active(client, task, &display).await?;
        }
        status => bail!("task {display:?} has status {status} and cannot be sent input"),
    }
    client
        .task_send(
            &task.owner_name,
            &task.id.to_string(),
            &TaskSendRequest { input },
        )
        .await
        .with_context(|| format!("send input to task {display:?}"))
}

/// Polls the task until it is active; `unknown` ends the wait at once, `error` after
/// [`ERROR_GRACE`].
async fn wait_active(client: &Client, mut task: Task, display: &str) -> anyhow::Result<Task> {
    let started = std::time::Instant::now();
    loop {
        match task.status {
            TaskStatus::Active => return Ok(task),
            TaskStatus::Unknown => bail!(
                "wait for task {display:?} to be ready: task entered unknown state while waiting for it to become active"
            ),
            TaskStatus::Error if started.elapsed() > ERROR_GRACE => bail!(
                "wait for task {display:?} to be ready: task entered error state while waiting for it to become active"
            ),
            _ => {}
        }
        tokio::time::sleep(READY_POLL).await;
        task = client.task(&task.owner_name, &task.id.to_string()).await?;
    }
}

async fn logs(client: &Client, args: LogsArgs) -> anyhow::Result<()> {
    let mut picked = Vec::new();
    for column in &args.columns {
        let column = column.trim().to_lowercase();
        let index = LOG_COLUMNS
            .iter()
            .position(|c| *c == column)
            .with_context(|| {
                format!(
                    "unknown column {column:?}: choose from {}",
                    LOG_COLUMNS.join(", ")
                )
            })?;
        picked.push(index);
    }
    let task = client
        .task_by_identifier(&args.task)
        .await
        .with_context(|| format!("resolve task {:?}", args.task))?;
    let logs = client
        .task_logs(&task.owner_name, &task.id.to_string())
        .await
        .context("get task logs")?;
    if args.output.output == Format::Json {
        println!("{}", serde_json::to_string_pretty(&logs.logs)?);
        return Ok(());
    }
    if logs.snapshot {
        if logs.snapshot_at.is_none() {
            eprintln!(
                "WARN: Task is {}. No snapshot available (snapshot may have failed during pause, resume your task to view logs).\n",
                task.status
            );
        } else if !logs.logs.is_empty() {
            let n = logs.logs.len();
            eprintln!(
                "WARN: Task is {}. Showing last {n} message{} from snapshot.\n",
                task.status,
                if n == 1 { "" } else { "s" }
            );
        }
    }
    if logs.logs.is_empty() {
        eprintln!("No task logs found.");
        return Ok(());
    }
    let headers: Vec<&str> = picked.iter().map(|i| LOG_COLUMNS[*i]).collect();
    let rows = logs
        .logs
        .iter()
        .map(|entry| {
            let cells = [
                entry.id.to_string(),
                entry.content.clone(),
                entry.kind.as_str().to_owned(),
                output::time(&entry.time),
            ];
            picked.iter().map(|i| cells[*i].clone()).collect()
        })
        .collect();
    output::print_table(&headers, rows);
    Ok(())
}
