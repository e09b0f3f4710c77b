//! `coder schedule show|start|stop|extend`: when workspaces start and stop by themselves.

use anyhow::Context;
use chrono::Utc;
use codersdk::Client;
use codersdk::workspaces::{
    PutExtendWorkspaceRequest, UpdateWorkspaceAutostartRequest, UpdateWorkspaceTTLRequest,
    Workspace,
};
use serde::Serialize;

use crate::GlobalArgs;
use crate::commands::workspaces::find;
use crate::output::{self, OutputArgs, Tabular};
use crate::schedule;

#[derive(Debug, clap::Subcommand)]
pub enum ScheduleCommand {
    /// Show workspace schedules.
    Show {
        /// A workspace (`name` or `owner/name`); without one, those the search finds.
        workspace: Option<String>,
        /// Show the schedules of every workspace you can see.
        #[arg(short, long)]
        all: bool,
        /// Coder's workspace search query.
        #[arg(long, default_value = "owner:me")]
        search: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Edit workspace start schedule: `<start-time> [day-of-week] [location]` or `manual`.
    ///
    /// The start time is hh:mm (24-hour) or hh:mm{am|pm}; days of the week are cron's (1-5,
    /// Mon-Fri; default every day); the location is an IANA time zone (default: TZ, else
    /// /etc/localtime). E.g. `coder schedule start my-workspace 9:30AM Mon-Fri Europe/Dublin`.
    Start {
        workspace: String,
        #[arg(required = true, num_args = 1..=3, value_name = "SCHEDULE")]
        schedule: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Edit workspace stop schedule: stop a duration (e.g. 8h, 90m, or minutes) after each
    /// start, or `manual`. Takes effect from the next start.
    Stop {
        workspace: String,
        duration: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Extend the stop time of a currently running workspace instance, to a duration from
    /// now (at least 30 minutes).
    #[command(alias = "override-stop")]
    Extend {
        workspace: String,
        duration: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Serialize)]
struct ScheduleRow {
    workspace: String,
    starts_at: String,
    starts_next: String,
    stops_after: String,
    stops_next: String,
}

impl ScheduleRow {
    fn of(w: &Workspace) -> Self {
        let c = schedule::columns(w, Utc::now());
        Self {
            workspace: format!("{}/{}", w.owner_name, w.name),
            starts_at: c.starts_at,
            starts_next: c.starts_next,
            stops_after: c.stops_after,
            stops_next: c.stops_next,
        }
    }
}

impl Tabular for ScheduleRow {
    fn headers() -> &'static [&'static str] {
        &[
            "workspace",
            "starts at",
            "starts next",
            "stops after",
            "stops next",
        ]
    }
    fn row(&self) -> Vec<String> {
        vec![
            self.workspace.clone(),
            self.starts_at.clone(),
            self.starts_next.clone(),
            self.stops_after.clone(),
            self.stops_next.clone(),
        ]
    }
}

async fn show_one(client: &Client, workspace: &str, out: &OutputArgs) -> anyhow::Result<()> {
    let w = find(client, workspace).await?;
    output::print_list(out.output, &[ScheduleRow::of(&w)])
}

pub async fn run(global: &GlobalArgs, cmd: ScheduleCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        ScheduleCommand::Show {
            workspace: Some(workspace),
            output,
            ..
        } => show_one(&client, &workspace, &output).await,
        ScheduleCommand::Show {
            workspace: None,
            all,
            search,
            output,
        } => {
            let query = if all { String::new() } else { search };
            let found = client.workspaces(&query).await?;
            let rows: Vec<ScheduleRow> = found.workspaces.iter().map(ScheduleRow::of).collect();
            output::print_list(output.output, &rows)
        }
        ScheduleCommand::Start {
            workspace,
            schedule: args,
            output,
        } => {
            let w = find(&client, &workspace).await?;
            let schedule = if args.len() == 1 && args[0].eq_ignore_ascii_case("manual") {
                None
            } else {
                Some(schedule::from_args(&args, schedule::local_zone())?)
            };
            client
                .update_workspace_autostart(w.id, &UpdateWorkspaceAutostartRequest { schedule })
                .await
                .context("setting the start schedule")?;
            show_one(&client, &workspace, &output).await
        }
        ScheduleCommand::Stop {
            workspace,
            duration,
            output,
        } => {
            let w = find(&client, &workspace).await?;
            let ttl_ms = if duration.eq_ignore_ascii_case("manual") {
                None
            } else {
                Some(schedule::parse_duration(&duration)?.num_milliseconds())
            };
            client
                .update_workspace_ttl(w.id, &UpdateWorkspaceTTLRequest { ttl_ms })
                .await
                .context("setting the stop schedule")?;
            show_one(&client, &workspace, &output).await
        }
        ScheduleCommand::Extend {
            workspace,
            duration,
            output,
        } => {
            let w = find(&client, &workspace).await?;
            let deadline = Utc::now() + schedule::parse_duration(&duration)?;
            client
                .extend_workspace(w.id, &PutExtendWorkspaceRequest { deadline })
                .await
                .context("extending the workspace")?;
            show_one(&client, &workspace, &output).await
        }
    }
}
