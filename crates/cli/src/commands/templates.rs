//! `coder templates ...`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use codersdk::Client;
use codersdk::templates::{
    CreateTemplateRequest, CreateTemplateVersionRequest, Template, TemplateAutostartRequirement,
    TemplateAutostopRequirement, TemplateVersion, UpdateTemplateMeta, VariableValue,
};
use serde::Serialize;

use crate::archive;
use crate::jobs::{self, Watched};
use crate::orgs::{OrgArg, parse_pairs};
use crate::output::{self, OutputArgs, Tabular};
use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Subcommand)]
pub enum TemplatesCommand {
    /// Create a template from a directory (fails if it exists; see `push`).
    Create(PushArgs),
    /// Push a new version of a template from a directory, creating the template if needed.
    Push(PushArgs),
    /// List templates.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        org: OrgArg,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Edit the metadata and schedule settings of a template by name.
    Edit(Box<EditArgs>),
    /// Manage a template's versions.
    #[command(subcommand)]
    Versions(VersionsCommand),
    /// Delete templates.
    #[command(alias = "rm")]
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        org: OrgArg,
        /// Do not ask for confirmation.
        #[arg(short, long)]
        yes: bool,
    },
    /// Download a template's active (or a named) version into a directory.
    Pull {
        name: String,
        /// Directory to write to (default: ./<name>).
        destination: Option<PathBuf>,
        /// A version name instead of the active one.
        #[arg(long)]
        version: Option<String>,
        /// Write the archive to stdout instead.
        #[arg(long)]
        tar: bool,
        #[command(flatten)]
        org: OrgArg,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum VersionsCommand {
    /// List a template's versions.
    #[command(alias = "ls")]
    List {
        template: String,
        #[command(flatten)]
        org: OrgArg,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// Template name (default: the directory's name).
    pub name: Option<String>,
    /// Directory with the template.
    #[arg(short, long, default_value = ".")]
    pub directory: PathBuf,
    /// Tags a provisioner daemon must have to import and build this template (repeatable).
    #[arg(long = "provisioner-tag", value_name = "KEY=VALUE")]
    pub provisioner_tags: Vec<String>,
    /// Values of the template's variables (repeatable).
    #[arg(long = "variable", value_name = "NAME=VALUE")]
    pub variables: Vec<String>,
    /// Name of the new version (random when missing).
    #[arg(long = "version-name", alias = "name-version")]
    pub version_name: Option<String>,
    /// Message describing the version.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Make the new version active (push).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub activate: bool,
    /// Provisioner to import and build with.
    #[arg(long, default_value = "terraform", env = "CODER_TEMPLATE_PROVISIONER")]
    pub provisioner: String,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    #[command(flatten)]
    pub org: OrgArg,
}

/// A flag that is true when given alone (`--allow-user-autostart`) and takes `=false`.
fn bool_flag(s: &str) -> Result<bool, String> {
    s.parse().map_err(|_| format!("{s:?} is not true or false"))
}

/// Go-style durations as Coder's flags take them (`24h`, `30m`, `0h`); a bare `0` is off.
fn duration_ms(s: &str) -> Result<i64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("{s:?}: {e}"))?;
    i64::try_from(d.as_millis()).map_err(|_| format!("{s:?} is too long"))
}

#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// The template to edit.
    pub template: String,
    /// Edit the template name.
    #[arg(long)]
    pub name: Option<String>,
    /// Edit the template display name.
    #[arg(long)]
    pub display_name: Option<String>,
    /// Edit the template description.
    #[arg(long)]
    pub description: Option<String>,
    /// Sets the template as deprecated: a message explaining why (empty to undeprecate).
    #[arg(long)]
    pub deprecated: Option<String>,
    /// Edit the template icon path.
    #[arg(long)]
    pub icon: Option<String>,
    /// Time before shutdown for workspaces created from this template ("Default autostop").
    #[arg(long, value_parser = duration_ms, value_name = "DURATION")]
    pub default_ttl: Option<i64>,
    /// How far activity pushes a running workspace's shutdown ("Activity bump").
    #[arg(long, value_parser = duration_ms, value_name = "DURATION")]
    pub activity_bump: Option<i64>,
    /// Weekdays workspaces may autostart on; `all` for every day.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub autostart_requirement_weekdays: Option<Vec<String>>,
    /// Weekdays workspaces must be restarted on (in their owner's quiet hours); `none` for
    /// no requirement.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub autostop_requirement_weekdays: Option<Vec<String>>,
    /// Restart every this many weeks.
    #[arg(long)]
    pub autostop_requirement_weeks: Option<i64>,
    /// Time after a failed start before coder stops the workspace to clean up ("Failure
    /// cleanup"); 0h for never.
    #[arg(long, value_parser = duration_ms, value_name = "DURATION")]
    pub failure_ttl: Option<i64>,
    /// Time a workspace may be unused before it becomes dormant ("Dormancy threshold"); 0h
    /// for never.
    #[arg(long, value_parser = duration_ms, value_name = "DURATION")]
    pub dormancy_threshold: Option<i64>,
    /// Time a workspace may be dormant before it is deleted ("Dormancy Auto-Deletion"); 0h
    /// for never.
    #[arg(long, value_parser = duration_ms, value_name = "DURATION")]
    pub dormancy_auto_deletion: Option<i64>,
    /// Allow users to cancel in-progress workspace jobs.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag)]
    pub allow_user_cancel_workspace_jobs: Option<bool>,
    /// Allow users to configure autostart for workspaces on this template.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag)]
    pub allow_user_autostart: Option<bool>,
    /// Allow users to customize the autostop TTL for workspaces on this template.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag)]
    pub allow_user_autostop: Option<bool>,
    /// Require workspace builds to use the active template version (template admins are
    /// exempt).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag)]
    pub require_active_version: Option<bool>,
    /// Bypass prompts (accepted as Coder's CLI does; editing asks nothing).
    #[arg(short, long)]
    pub yes: bool,
    #[command(flatten)]
    pub org: OrgArg,
}

impl EditArgs {
    fn request(self, current: &Template) -> UpdateTemplateMeta {
        let autostart_requirement =
            self.autostart_requirement_weekdays
                .map(|days| TemplateAutostartRequirement {
                    days_of_week: if days.iter().any(|d| d.eq_ignore_ascii_case("all")) {
                        coderd_schedule::bitmap_to_days(coderd_schedule::ALL_DAYS)
                    } else {
                        days
                    },
                });
        let autostop_requirement = match (
            self.autostop_requirement_weekdays,
            self.autostop_requirement_weeks,
        ) {
            (None, None) => None,
            (days, weeks) => Some(TemplateAutostopRequirement {
                days_of_week: match days {
                    Some(d) if d.iter().any(|d| d.eq_ignore_ascii_case("none")) => Vec::new(),
                    Some(d) => d,
                    None => current.autostop_requirement.days_of_week.clone(),
                },
                weeks: weeks.unwrap_or(current.autostop_requirement.weeks),
            }),
        };
        UpdateTemplateMeta {
            name: self.name,
            display_name: self.display_name,
            description: self.description,
            icon: self.icon,
            default_ttl_ms: self.default_ttl,
            allow_user_cancel_workspace_jobs: self.allow_user_cancel_workspace_jobs,
            deprecation_message: self.deprecated,
            activity_bump_ms: self.activity_bump,
            autostop_requirement,
            autostart_requirement,
            allow_user_autostart: self.allow_user_autostart,
            allow_user_autostop: self.allow_user_autostop,
            failure_ttl_ms: self.failure_ttl,
            time_til_dormant_ms: self.dormancy_threshold,
            time_til_dormant_autodelete_ms: self.dormancy_auto_deletion,
            require_active_version: self.require_active_version,
            ..Default::default()
        }
    }
}

async fn edit(client: &Client, args: EditArgs) -> anyhow::Result<()> {
    let org = args.org.resolve(client).await?;
    let template = client
        .template_by_name(&org.id.to_string(), &args.template)
        .await
        .with_context(|| format!("template {:?}", args.template))?;
    let name = template.name.clone();
    let req = args.request(&template);
    if req == UpdateTemplateMeta::default() {
        bail!("nothing to change: pass at least one flag (see --help)");
    }
    let updated = client.update_template_meta(template.id, &req).await?;
    println!("Updated template metadata for {name}!");
    if updated.name != name {
        println!("The template is now called {}.", updated.name);
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(transparent)]
struct TemplateRow(Template);

impl Tabular for TemplateRow {
    fn headers() -> &'static [&'static str] {
        &[
            "name",
            "organization",
            "last updated",
            "used by",
            "provisioner",
        ]
    }
    fn row(&self) -> Vec<String> {
        let t = &self.0;
        vec![
            t.name.clone(),
            t.organization_name.clone(),
            output::time(&t.updated_at),
            format!("{} developer(s)", t.active_user_count),
            t.provisioner.clone(),
        ]
    }
}

#[derive(Serialize)]
struct VersionRow {
    #[serde(flatten)]
    version: TemplateVersion,
    active: bool,
}

impl Tabular for VersionRow {
    fn headers() -> &'static [&'static str] {
        &["name", "created at", "created by", "status", "active"]
    }
    fn row(&self) -> Vec<String> {
        let v = &self.version;
        vec![
            v.name.clone(),
            output::time(&v.created_at),
            v.created_by.username.clone(),
            v.job.status.as_str().into(),
            if self.active {
                "Active".into()
            } else {
                String::new()
            },
        ]
    }
}

pub async fn run(global: &GlobalArgs, cmd: TemplatesCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        TemplatesCommand::Create(args) => push(&client, args, Mode::Create).await,
        TemplatesCommand::Push(args) => push(&client, args, Mode::Push).await,
        TemplatesCommand::Edit(args) => edit(&client, *args).await,
        TemplatesCommand::List { org, output } => {
            let org = org.resolve(&client).await?;
            let rows: Vec<TemplateRow> = client
                .templates(&org.id.to_string())
                .await?
                .into_iter()
                .map(TemplateRow)
                .collect();
            if rows.is_empty() && output.output == output::Format::Table {
                eprintln!(
                    "No templates found in {}. Create one with 'coder templates push'.",
                    org.name
                );
                return Ok(());
            }
            output::print_list(output.output, &rows)
        }
        TemplatesCommand::Versions(VersionsCommand::List {
            template,
            org,
            output,
        }) => {
            let org = org.resolve(&client).await?;
            let template = client
                .template_by_name(&org.id.to_string(), &template)
                .await?;
            let rows: Vec<VersionRow> = client
                .template_versions(template.id)
                .await?
                .into_iter()
                .rev()
                .map(|version| VersionRow {
                    active: version.id == template.active_version_id,
                    version,
                })
                .collect();
            output::print_list(output.output, &rows)
        }
        TemplatesCommand::Delete { names, org, yes } => {
            let org = org.resolve(&client).await?;
            let mut templates = Vec::new();
            for name in &names {
                templates.push(client.template_by_name(&org.id.to_string(), name).await?);
            }
            if !yes && !prompt::confirm(&format!("Delete {}?", names.join(", ")))? {
                bail!("aborted");
            }
            for t in templates {
                client.delete_template(t.id).await?;
                println!("Deleted template {}.", t.name);
            }
            Ok(())
        }
        TemplatesCommand::Pull {
            name,
            destination,
            version,
            tar,
            org,
        } => {
            let org = org.resolve(&client).await?;
            let template = client.template_by_name(&org.id.to_string(), &name).await?;
            let version = match version {
                Some(v) => client.template_version_by_name(template.id, &v).await?,
                None => client.template_version(template.active_version_id).await?,
            };
            let data = client.download_file(version.job.file_id).await?;
            if tar {
                use std::io::Write;
                std::io::stdout().write_all(&data)?;
                return Ok(());
            }
            let dest = destination.unwrap_or_else(|| PathBuf::from(&name));
            if dest.exists() && std::fs::read_dir(&dest)?.next().is_some() {
                bail!("{} exists and is not empty", dest.display());
            }
            archive::untar_into(&data, &dest)?;
            println!(
                "Wrote template {} version {} to {}",
                name,
                version.name,
                dest.display()
            );
            Ok(())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Push,
}

async fn push(client: &Client, args: PushArgs, mode: Mode) -> anyhow::Result<()> {
    let dir = args
        .directory
        .canonicalize()
        .with_context(|| format!("template directory {}", args.directory.display()))?;
    let name = match args.name {
        Some(n) => n,
        None => dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .context("cannot name the template after the directory; pass a name")?,
    };
    let org = args.org.resolve(client).await?;
    let org_id = org.id.to_string();
    let existing = match client.template_by_name(&org_id, &name).await {
        Ok(t) => Some(t),
        Err(codersdk::ClientError::Api { status: 404, .. }) => None,
        Err(e) => return Err(e.into()),
    };
    if mode == Mode::Create && existing.is_some() {
        bail!("template {name:?} already exists; use 'coder templates push' to add a version");
    }
    let tags = parse_pairs(&args.provisioner_tags, "provisioner tag")?;
    let variables = parse_pairs(&args.variables, "variable")?;
    if !args.yes
        && existing.is_none()
        && mode == Mode::Push
        && !prompt::confirm(&format!(
            "Template {name:?} does not exist in {}. Create it?",
            org.name
        ))?
    {
        bail!("aborted");
    }
    let tar = archive::tar_dir(&dir)?;
    eprintln!(
        "Uploading {} ({} KiB)...",
        dir.display(),
        tar.len().div_ceil(1024)
    );
    let file = client.upload_tar(tar).await?;
    let version = client
        .create_template_version(
            &org_id,
            &CreateTemplateVersionRequest {
                name: args.version_name.unwrap_or_default(),
                message: args.message.unwrap_or_default(),
                template_id: existing.as_ref().map(|t| t.id),
                storage_method: "file".into(),
                file_id: file.hash,
                example_id: String::new(),
                provisioner: args.provisioner,
                tags: tags.into_iter().collect(),
                user_variable_values: variables
                    .into_iter()
                    .map(|(name, value)| VariableValue { name, value })
                    .collect(),
            },
        )
        .await?;
    jobs::watch(client, Watched::TemplateVersion(version.id))
        .await
        .context("the template import failed")?;
    match existing {
        Some(template) => {
            if args.activate {
                client
                    .update_active_template_version(template.id, version.id)
                    .await?;
                println!("Updated version of {name} to {} (active).", version.name);
            } else {
                println!("Created version {} of {name} (not active).", version.name);
            }
        }
        None => {
            client
                .create_template(
                    &org_id,
                    &CreateTemplateRequest {
                        name: name.clone(),
                        template_version_id: version.id,
                        ..Default::default()
                    },
                )
                .await?;
            println!(
                "The {name} template has been created! Developers can provision a workspace with it: coder create --template={name} [workspace name]"
            );
        }
    }
    Ok(())
}
