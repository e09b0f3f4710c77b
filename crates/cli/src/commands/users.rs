//! `coder users ...`.

use codersdk::users::{CreateUserRequest, LoginType, User, UserStatus};
use serde::Serialize;

use crate::output::{self, OutputArgs, Tabular};
use crate::{GlobalArgs, prompt};

#[derive(Debug, clap::Subcommand)]
pub enum UsersCommand {
    /// List users.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a user ("me" for yourself).
    Show {
        user: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create a user.
    Create(CreateArgs),
    /// Suspend a user: their sessions and tokens stop working at once.
    Suspend { user: String },
    /// Reactivate a suspended user.
    Activate { user: String },
    /// Delete a user.
    #[command(alias = "rm")]
    Delete { user: String },
    /// Replace a user's site roles.
    EditRoles {
        user: String,
        /// Roles to hold (repeat or separate with commas); none removes all.
        #[arg(long, value_delimiter = ',')]
        roles: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[arg(short, long)]
    pub username: Option<String>,
    #[arg(short, long)]
    pub email: Option<String>,
    #[arg(long)]
    pub full_name: Option<String>,
    /// Password (prompted for when missing and the login type is password).
    #[arg(short, long)]
    pub password: Option<String>,
    /// `password` or `none` (API-only users).
    #[arg(long, default_value = "password")]
    pub login_type: String,
}

#[derive(Serialize)]
#[serde(transparent)]
struct UserRow(User);

impl Tabular for UserRow {
    fn headers() -> &'static [&'static str] {
        &["username", "email", "created at", "status", "roles"]
    }
    fn row(&self) -> Vec<String> {
        let u = &self.0;
        vec![
            u.username.clone(),
            u.email.clone(),
            output::time(&u.created_at),
            u.status.as_str().into(),
            u.roles
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ]
    }
}

pub async fn run(global: &GlobalArgs, cmd: UsersCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        UsersCommand::List { output } => {
            let users = client.users("").await?;
            let rows: Vec<UserRow> = users.users.into_iter().map(UserRow).collect();
            output::print_list(output.output, &rows)
        }
        UsersCommand::Show { user, output } => {
            output::print_one(output.output, &UserRow(client.user(&user).await?))
        }
        UsersCommand::Create(args) => {
            let login_type: LoginType = args
                .login_type
                .parse()
                .map_err(|e: String| anyhow::anyhow!(e))?;
            let username = match args.username {
                Some(u) => u,
                None => prompt::text("Username", None)?,
            };
            let email = match args.email {
                Some(e) => e,
                None => prompt::text("Email", None)?,
            };
            let password = match (args.password, login_type) {
                (Some(p), _) => p,
                (None, LoginType::Password) => prompt::password("Password", true)?,
                (None, _) => String::new(),
            };
            let user = client
                .create_user(&CreateUserRequest {
                    email,
                    username,
                    name: args.full_name.unwrap_or_default(),
                    password,
                    login_type: Some(login_type),
                    ..Default::default()
                })
                .await?;
            println!("Created user {} ({})", user.username, user.email);
            Ok(())
        }
        UsersCommand::Suspend { user } => {
            let u = client
                .update_user_status(&user, UserStatus::Suspended)
                .await?;
            println!("User {} is now suspended.", u.username);
            Ok(())
        }
        UsersCommand::Activate { user } => {
            let u = client.update_user_status(&user, UserStatus::Active).await?;
            println!("User {} is now active.", u.username);
            Ok(())
        }
        UsersCommand::Delete { user } => {
            client.delete_user(&user).await?;
            println!("Deleted user {user}.");
            Ok(())
        }
        UsersCommand::EditRoles { user, roles } => {
            let u = client.update_user_roles(&user, &roles).await?;
            let names: Vec<_> = u.roles.iter().map(|r| r.name.as_str()).collect();
            println!(
                "User {} now has roles: {}",
                u.username,
                if names.is_empty() {
                    "member".to_string()
                } else {
                    names.join(", ")
                }
            );
            Ok(())
        }
    }
}
