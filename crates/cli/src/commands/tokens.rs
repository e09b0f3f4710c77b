//! `coder tokens ...`.

use std::time::Duration;

use codersdk::apikeys::{ApiKey, CreateTokenRequest};
use serde::Serialize;

use crate::GlobalArgs;
use crate::output::{self, OutputArgs, Tabular};

#[derive(Debug, clap::Subcommand)]
pub enum TokensCommand {
    /// Create a token; it is printed once.
    Create {
        /// Name of the token (random when missing).
        #[arg(short, long)]
        name: Option<String>,
        /// How long the token lasts, e.g. 30d, 12h.
        #[arg(long, value_parser = humantime::parse_duration)]
        lifetime: Option<Duration>,
    },
    /// List your tokens.
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Expire a token by name, id or the token itself (it stays listed, expired); --delete
    /// removes it instead.
    #[command(aliases = ["rm", "delete"])]
    Remove {
        /// (Not `token`: that id belongs to the global `--token` flag.)
        #[arg(value_name = "NAME|ID|TOKEN")]
        name_or_id: String,
        /// Delete the token rather than expire it.
        #[arg(long)]
        delete: bool,
    },
}

#[derive(Serialize)]
#[serde(transparent)]
struct TokenRow(ApiKey);

impl Tabular for TokenRow {
    fn headers() -> &'static [&'static str] {
        &["id", "name", "last used", "expires at", "created at"]
    }
    fn row(&self) -> Vec<String> {
        let k = &self.0;
        vec![
            k.id.clone(),
            k.token_name.clone(),
            output::time(&k.last_used),
            output::time(&k.expires_at),
            output::time(&k.created_at),
        ]
    }
}

pub async fn run(global: &GlobalArgs, cmd: TokensCommand) -> anyhow::Result<()> {
    let client = global.client()?;
    match cmd {
        TokensCommand::Create { name, lifetime } => {
            let lifetime = lifetime.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
            let created = client
                .create_token(
                    "me",
                    &CreateTokenRequest {
                        lifetime,
                        scope: String::new(),
                        token_name: name.unwrap_or_default(),
                    },
                )
                .await?;
            println!("{}", created.key);
            Ok(())
        }
        TokensCommand::List { output } => {
            let rows: Vec<TokenRow> = client
                .tokens("me")
                .await?
                .into_iter()
                .map(TokenRow)
                .collect();
            output::print_list(output.output, &rows)
        }
        TokensCommand::Remove {
            name_or_id: token,
            delete,
        } => {
            let id = match client.token_by_name("me", &token).await {
                Ok(key) => key.id,
                // A whole token is `<id>-<secret>`: its id is the part before the dash.
                Err(codersdk::ClientError::Api { status: 404, .. }) => token
                    .split_once('-')
                    .map_or(token.clone(), |(id, _)| id.to_string()),
                Err(e) => return Err(e.into()),
            };
            if delete {
                client.delete_api_key("me", &id).await?;
                println!("Token has been deleted.");
            } else {
                client.expire_api_key("me", &id).await?;
                println!("Token has been expired.");
            }
            Ok(())
        }
    }
}
