//! `coder provisioner list | jobs list | keys create|list|delete`.

use anyhow::bail;
use codersdk::provisioners::{
    CreateProvisionerKeyRequest, ProvisionerDaemon, ProvisionerJob, ProvisionerJobStatus,
    ProvisionerKey,
};
use serde::Serialize;

use crate::orgs::{OrgArg, parse_pairs};
use crate::output::{self, OutputArgs, Tabular};
use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Subcommand)]
pub enum ProvisionerCommand {
    /// List provisioner daemons.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        org: OrgArg,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Provisioner jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Provisioner keys, for authenticating external daemons.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// List recent provisioner jobs.
    #[command(alias = "ls")]
    List {
        /// Only jobs with these statuses (comma separated).
        #[arg(short, long, value_delimiter = ',')]
        status: Vec<String>,
        #[arg(short, long, default_value_t = 50)]
        limit: i64,
        #[command(flatten)]
        org: OrgArg,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key; its secret is shown once.
    Create {
        name: String,
        /// Tags daemons using the key get (repeatable).
        #[arg(short, long = "tag", value_name = "KEY=VALUE")]
        tags: Vec<String>,
        #[command(flatten)]
        org: OrgArg,
    },
    /// List keys.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        org: OrgArg,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a key; daemons using it can no longer connect.
    #[command(alias = "rm")]
    Delete {
        name: String,
        #[arg(short, long)]
        yes: bool,
        #[command(flatten)]
        org: OrgArg,
    },
}

fn tags(t: &std::collections::BTreeMap<String, String>) -> String {
    t.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Serialize)]
#[serde(transparent)]
struct DaemonRow(ProvisionerDaemon);

impl Tabular for DaemonRow {
    fn headers() -> &'static [&'static str] {
        &[
            "name",
            "status",
            "current job",
            "last seen at",
            "key name",
            "version",
            "provisioners",
            "tags",
        ]
    }
    fn row(&self) -> Vec<String> {
        let d = &self.0;
        vec![
            d.name.clone(),
            d.status.as_str().into(),
            d.current_job
                .as_ref()
                .map(|j| j.id.to_string())
                .unwrap_or_default(),
            d.last_seen_at
                .as_ref()
                .map(output::time)
                .unwrap_or_default(),
            d.key_name.clone().unwrap_or_else(|| "-".into()),
            d.version.clone(),
            d.provisioners.join(","),
            tags(&d.tags),
        ]
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct JobRow(ProvisionerJob);

impl Tabular for JobRow {
    fn headers() -> &'static [&'static str] {
        &[
            "created at",
            "id",
            "type",
            "status",
            "queue",
            "tags",
            "waiting because",
        ]
    }
    fn row(&self) -> Vec<String> {
        let j = &self.0;
        vec![
            output::time(&j.created_at),
            j.id.to_string(),
            j.job_type.as_str().into(),
            j.status.as_str().into(),
            if j.status == ProvisionerJobStatus::Pending {
                format!("{}/{}", j.queue_position, j.queue_size)
            } else {
                String::new()
            },
            tags(&j.tags),
            j.waiting_reason.clone(),
        ]
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct KeyRow(ProvisionerKey);

impl Tabular for KeyRow {
    fn headers() -> &'static [&'static str] {
        &["name", "created at", "tags"]
    }
    fn row(&self) -> Vec<String> {
        vec![
            self.0.name.clone(),
            output::time(&self.0.created_at),
            tags(&self.0.tags),
        ]
    }
}

pub async fn run(global: &GlobalArgs, cmd: ProvisionerCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        ProvisionerCommand::List { org, output } => {
            let org = org.resolve(&client).await?;
            let rows: Vec<DaemonRow> = client
                .provisioner_daemons(&org.id.to_string())
                .await?
                .into_iter()
                .map(DaemonRow)
                .collect();
            output::print_list(output.output, &rows)
        }
        ProvisionerCommand::Jobs(JobsCommand::List {
            status,
            limit,
            org,
            output,
        }) => {
            let org = org.resolve(&client).await?;
            let mut query: Vec<(&str, String)> = vec![("limit", limit.to_string())];
            if !status.is_empty() {
                query.push(("status", status.join(",")));
            }
            let jobs: Vec<ProvisionerJob> = client
                .get_query(
                    &format!("/api/v2/organizations/{}/provisionerjobs", org.id),
                    &query,
                )
                .await?;
            let rows: Vec<JobRow> = jobs.into_iter().map(JobRow).collect();
            output::print_list(output.output, &rows)
        }
        ProvisionerCommand::Keys(KeysCommand::Create { name, tags, org }) => {
            let org = org.resolve(&client).await?;
            let created = client
                .create_provisioner_key(
                    &org.id.to_string(),
                    &CreateProvisionerKeyRequest {
                        name: name.clone(),
                        tags: parse_pairs(&tags, "tag")?.into_iter().collect(),
                    },
                )
                .await?;
            eprintln!(
                "Successfully created provisioner key {name}! Save the key below; it will not be shown again:"
            );
            println!("{}", created.key);
            Ok(())
        }
        ProvisionerCommand::Keys(KeysCommand::List { org, output }) => {
            let org = org.resolve(&client).await?;
            let rows: Vec<KeyRow> = client
                .provisioner_keys(&org.id.to_string())
                .await?
                .into_iter()
                .map(KeyRow)
                .collect();
            output::print_list(output.output, &rows)
        }
        ProvisionerCommand::Keys(KeysCommand::Delete { name, yes, org }) => {
            let org = org.resolve(&client).await?;
            if !yes && !prompt::confirm(&format!("Delete provisioner key {name}?"))? {
                bail!("aborted");
            }
            client
                .delete_provisioner_key(&org.id.to_string(), &name)
                .await?;
            println!("Deleted provisioner key {name}.");
            Ok(())
        }
    }
}
