//! `coder whoami`: who the CLI is signed in as, and where.

use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

use crate::GlobalArgs;

#[derive(Debug, clap::Args)]
pub struct WhoamiArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Columns to display in table output.
    #[arg(short, long, value_delimiter = ',', default_value = "url,username,id")]
    pub column: Vec<Column>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Table,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "lower")]
pub enum Column {
    Url,
    Username,
    Id,
    Orgs,
    Roles,
}

/// One row, in Coder's JSON shape (its CLI prints a list of one).
#[derive(Debug, Serialize)]
struct Row {
    url: String,
    username: String,
    user_id: Uuid,
    organization_ids: Vec<Uuid>,
    /// Role display names by organization id (`*` for the deployment's roles).
    roles: BTreeMap<String, Vec<String>>,
}

pub async fn run(global: &GlobalArgs, args: WhoamiArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let me = client.user("me").await?;
    let url = client.url().as_str().trim_end_matches('/').to_string();
    let mut roles: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for role in &me.roles {
        let scope = if role.organization_id.is_empty() {
            "*".to_string()
        } else {
            role.organization_id.clone()
        };
        let name = if role.display_name.is_empty() {
            role.name.clone()
        } else {
            role.display_name.clone()
        };
        roles.entry(scope).or_default().push(name);
    }
    let row = Row {
        url,
        username: me.username,
        user_id: me.id,
        organization_ids: me.organization_ids,
        roles,
    };
    match args.output {
        Format::Text => println!(
            "Coder is running at {}, You're authenticated as {} !",
            row.url, row.username
        ),
        Format::Json => println!("{}", serde_json::to_string_pretty(&[&row])?),
        Format::Table => {
            let cells = args
                .column
                .iter()
                .map(|column| match column {
                    Column::Url => row.url.clone(),
                    Column::Username => row.username.clone(),
                    Column::Id => row.user_id.to_string(),
                    Column::Orgs => join(row.organization_ids.iter().map(Uuid::to_string)),
                    Column::Roles => join(row.roles.values().flatten().cloned()),
                })
                .collect();
            let headers: Vec<&str> = args
                .column
                .iter()
                .map(|column| match column {
                    Column::Url => "url",
                    Column::Username => "username",
                    Column::Id => "id",
                    Column::Orgs => "orgs",
                    Column::Roles => "roles",
                })
                .collect();
            crate::output::print_table(&headers, vec![cells]);
        }
    }
    Ok(())
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}
