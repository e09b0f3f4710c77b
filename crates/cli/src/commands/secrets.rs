//! `coder secrets ...`: the caller's user secrets. Values go to coderd and never come back;
//! `--value` may be left out to read the value from standard input (it then stays out of the
//! process list and the shell's history).

use std::io::Read as _;

use anyhow::Context as _;
use codersdk::usersecrets::{CreateUserSecretRequest, UpdateUserSecretRequest, UserSecret};
use serde::Serialize;

use crate::GlobalArgs;
use crate::output::{self, OutputArgs, Tabular};

#[derive(Debug, clap::Subcommand)]
pub enum SecretsCommand {
    /// Create a new user secret.
    Create {
        name: String,
        /// Value of the secret (read from standard input when missing).
        #[arg(long)]
        value: Option<String>,
        /// Description of the secret.
        #[arg(long, default_value = "")]
        description: String,
        /// Environment variable the secret is set as in workspaces.
        #[arg(long = "env", aliases = ["env_name", "env-name"], default_value = "")]
        env_name: String,
        /// File the secret is written to in workspaces (`~/…` or an absolute path).
        #[arg(long = "file", aliases = ["file_path", "file-path"], default_value = "")]
        file_path: String,
    },
    /// List user secrets.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Get user secret.
    Get {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Update a user secret; only the options given change.
    Update {
        name: String,
        /// New value (`-` reads it from standard input).
        #[arg(long)]
        value: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long = "env", aliases = ["env_name", "env-name"])]
        env_name: Option<String>,
        #[arg(long = "file", aliases = ["file_path", "file-path"])]
        file_path: Option<String>,
    },
    /// Delete a user secret.
    #[command(aliases = ["rm", "remove"])]
    Delete { name: String },
}

#[derive(Serialize)]
#[serde(transparent)]
struct SecretRow(UserSecret);

impl Tabular for SecretRow {
    fn headers() -> &'static [&'static str] {
        &["name", "env name", "file path", "description", "updated at"]
    }
    fn row(&self) -> Vec<String> {
        let s = &self.0;
        vec![
            s.name.clone(),
            s.env_name.clone(),
            s.file_path.clone(),
            s.description.clone(),
            output::time(&s.updated_at),
        ]
    }
}

fn stdin_value() -> anyhow::Result<String> {
    let mut value = String::new();
    std::io::stdin()
        .read_to_string(&mut value)
        .context("reading the secret's value from standard input")?;
    // A value typed or piped in ends with the line's newline, which is not part of it.
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    Ok(value)
}

pub async fn run(global: &GlobalArgs, cmd: SecretsCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        SecretsCommand::Create {
            name,
            value,
            description,
            env_name,
            file_path,
        } => {
            let value = match value {
                Some(v) => v,
                None => stdin_value()?,
            };
            let created = client
                .create_user_secret(
                    "me",
                    &CreateUserSecretRequest {
                        name,
                        value,
                        description,
                        env_name,
                        file_path,
                    },
                )
                .await?;
            println!("Secret {} has been created.", created.name);
            Ok(())
        }
        SecretsCommand::List { output } => {
            let rows: Vec<SecretRow> = client
                .user_secrets("me")
                .await?
                .into_iter()
                .map(SecretRow)
                .collect();
            output::print_list(output.output, &rows)
        }
        SecretsCommand::Get { name, output } => {
            let secret = client.user_secret("me", &name).await?;
            match output.output {
                output::Format::Json => {
                    println!("{}", serde_json::to_string_pretty(&secret)?);
                    Ok(())
                }
                format => output::print_list(format, &[SecretRow(secret)]),
            }
        }
        SecretsCommand::Update {
            name,
            value,
            description,
            env_name,
            file_path,
        } => {
            let value = match value.as_deref() {
                Some("-") => Some(stdin_value()?),
                _ => value,
            };
            let updated = client
                .update_user_secret(
                    "me",
                    &name,
                    &UpdateUserSecretRequest {
                        value,
                        description,
                        env_name,
                        file_path,
                    },
                )
                .await?;
            println!("Secret {} has been updated.", updated.name);
            Ok(())
        }
        SecretsCommand::Delete { name } => {
            client.delete_user_secret("me", &name).await?;
            println!("Secret {name} has been deleted.");
            Ok(())
        }
    }
}
