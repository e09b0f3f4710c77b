//! `coder provisioner list | jobs list | keys create|list|delete`.

use anyhow::{Context, bail};
use codersdk::provisioners::{
    CreateProvisionerKeyRequest, ProvisionerDaemon, ProvisionerJob, ProvisionerJobStatus,
    ProvisionerJobType, ProvisionerKey,
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
    /// Run a provisioner daemon (the same as `coder provisionerd start`).
    Start(super::provisionerd::StartArgs),
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
    /// Cancel a provisioner job: a template version's import or a workspace's build.
    Cancel {
        #[arg(value_name = "JOB_ID")]
        job: uuid::Uuid,
        #[command(flatten)]
        org: OrgArg,
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
    // Starting a daemon needs no session of the caller's (a key or PSK may authenticate it).
    let client = || global.client();
    match cmd {
        ProvisionerCommand::Start(args) => super::provisionerd::start(global, args).await,
        ProvisionerCommand::List { org, output } => {
            let client = client()?;
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
            let client = client()?;
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
        ProvisionerCommand::Jobs(JobsCommand::Cancel { job, org }) => {
            let client = client()?;
            let org = org.resolve(&client).await?;
            let found: ProvisionerJob = client
                .get(&format!(
                    "/api/v2/organizations/{}/provisionerjobs/{job}",
                    org.id
                ))
                .await
                .with_context(|| format!("finding job {job}"))?;
            match (found.job_type, &found.input) {
                (ProvisionerJobType::TemplateVersionImport, input) => {
                    let version = input
                        .template_version_id
                        .context("the job names no template version")?;
                    client.cancel_template_version(version).await?;
                }
                (ProvisionerJobType::WorkspaceBuild, input) => {
                    let build = input
                        .workspace_build_id
                        .context("the job names no workspace build")?;
                    client.cancel_workspace_build(build).await?;
                }
                (ProvisionerJobType::TemplateVersionDryRun, _) => {
                    bail!("job {job} is a dry run; only imports and builds can be canceled")
                }
            }
            println!("Job {job} has been canceled.");
            Ok(())
        }
        ProvisionerCommand::Keys(KeysCommand::Create { name, tags, org }) => {
            let client = client()?;
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
            let client = client()?;
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
            let client = client()?;
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
