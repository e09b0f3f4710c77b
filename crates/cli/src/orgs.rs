//! Choosing the organization a command acts in.

use anyhow::Context;
use codersdk::Client;
use codersdk::organizations::Organization;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct OrgArg {
    /// Organization to act in (name or id); defaults to your default organization.
    #[arg(short = 'O', long = "org", env = "CODER_ORGANIZATION")]
    pub org: Option<String>,
}

impl OrgArg {
    pub async fn resolve(&self, client: &Client) -> anyhow::Result<Organization> {
        if let Some(org) = &self.org {
            return client
                .organization(org)
                .await
                .with_context(|| format!("organization {org:?}"));
        }
        let orgs = client.user_organizations("me").await?;
        if orgs.len() == 1 {
            return orgs.into_iter().next().context("no organization");
        }
        orgs.into_iter()
            .find(|o| o.is_default)
            .context("you belong to several organizations and none is the default; pass --org")
    }
}

/// Parses `key=value` pairs from flags.
pub fn parse_pairs(pairs: &[String], what: &str) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .filter(|(k, _)| !k.is_empty())
                .with_context(|| format!("{what} {pair:?} is not of the form key=value"))
        })
        .collect()
}
