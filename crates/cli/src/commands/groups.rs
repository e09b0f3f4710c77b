//! `coder groups create|list|edit|delete`: an organization's groups, as Coder's CLI has them.

use anyhow::Context;
use codersdk::Client;
use codersdk::groups::{CreateGroupRequest, Group, PatchGroupRequest};
use serde::Serialize;

use crate::GlobalArgs;
use crate::orgs::OrgArg;
use crate::output::{OutputArgs, Tabular};

#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// Create a user group.
    Create {
        name: String,
        /// Set an avatar for the group.
        #[arg(short = 'u', long, env = "CODER_AVATAR_URL", default_value = "")]
        avatar_url: String,
        /// Optional human friendly name for the group.
        #[arg(long, env = "CODER_DISPLAY_NAME", default_value = "")]
        display_name: String,
        #[command(flatten)]
        org: OrgArg,
    },
    /// List user groups.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        org: OrgArg,
    },
    /// Edit a user group.
    Edit {
        name: String,
        /// Update the group name.
        #[arg(short = 'n', long = "name")]
        new_name: Option<String>,
        /// Update the group avatar.
        #[arg(short = 'u', long)]
        avatar_url: Option<String>,
        /// Optional human friendly name for the group.
        #[arg(long, env = "CODER_DISPLAY_NAME")]
        display_name: Option<String>,
        /// Add users to the group. Accepts emails, usernames or IDs.
        #[arg(short = 'a', long, value_delimiter = ',')]
        add_users: Vec<String>,
        /// Remove users from the group. Accepts emails, usernames or IDs.
        #[arg(short = 'r', long, value_delimiter = ',')]
        remove_users: Vec<String>,
        #[command(flatten)]
        org: OrgArg,
    },
    /// Delete a user group.
    #[command(alias = "rm")]
    Delete {
        name: String,
        #[command(flatten)]
        org: OrgArg,
    },
}

#[derive(Serialize)]
#[serde(transparent)]
struct GroupRow(Group);

impl Tabular for GroupRow {
    fn headers() -> &'static [&'static str] {
        &[
            "name",
            "display name",
            "organization id",
            "members",
            "avatar url",
        ]
    }
    fn row(&self) -> Vec<String> {
        let g = &self.0;
        vec![
            g.name.clone(),
            g.display_name.clone(),
            g.organization_id.to_string(),
            g.members
                .iter()
                .map(|m| m.email.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            g.avatar_url.clone(),
        ]
    }
}

/// User ids for emails, usernames or ids.
async fn user_ids(client: &Client, users: &[String]) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(users.len());
    for user in users {
        if user.parse::<uuid::Uuid>().is_ok() {
            ids.push(user.clone());
            continue;
        }
        let found = if user.contains('@') {
            client
                .users(&format!("email:{user}"))
                .await?
                .users
                .into_iter()
                .find(|u| u.email.eq_ignore_ascii_case(user))
        } else {
            client.user(user).await.ok()
        };
        let found = found.with_context(|| format!("no user {user:?}"))?;
        ids.push(found.id.to_string());
    }
    Ok(ids)
}

pub async fn run(global: &GlobalArgs, cmd: GroupsCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        GroupsCommand::Create {
            name,
            avatar_url,
            display_name,
            org,
        } => {
            let org = org.resolve(&client).await?;
            let group = client
                .create_group(
                    &org.id.to_string(),
                    &CreateGroupRequest {
                        name,
                        display_name,
                        avatar_url,
                        quota_allowance: 0,
                    },
                )
                .await?;
            println!("Successfully created group {}!", group.name);
            Ok(())
        }
        GroupsCommand::List { output, org } => {
            let org = org.resolve(&client).await?;
            let groups = client.groups_by_organization(&org.id.to_string()).await?;
            let rows: Vec<GroupRow> = groups.into_iter().map(GroupRow).collect();
            crate::output::print_list(output.output, &rows)
        }
        GroupsCommand::Edit {
            name,
            new_name,
            avatar_url,
            display_name,
            add_users,
            remove_users,
            org,
        } => {
            let org = org.resolve(&client).await?;
            let group = client
                .group_by_org_and_name(&org.id.to_string(), &name)
                .await?;
            let patch = PatchGroupRequest {
                add_users: user_ids(&client, &add_users).await?,
                remove_users: user_ids(&client, &remove_users).await?,
                name: new_name.unwrap_or_default(),
                display_name,
                avatar_url,
                quota_allowance: None,
            };
            let group = client.patch_group(group.id, &patch).await?;
            println!("Successfully patched group {}!", group.name);
            Ok(())
        }
        GroupsCommand::Delete { name, org } => {
            let org = org.resolve(&client).await?;
            let group = client
                .group_by_org_and_name(&org.id.to_string(), &name)
                .await?;
            client.delete_group(group.id).await?;
            println!("Successfully deleted group {}!", group.name);
            Ok(())
        }
    }
}
