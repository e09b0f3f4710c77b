//! Listing workspaces with Coder's search language (`owner:me name:dev template:docker
//! status:running deleted:true has_external_agent:true`, a bare word searching names),
//! counted and paged in SQL so counts and pages only ever include what the subject may see.

use codersdk::workspaces::WorkspaceStatus;
use uuid::Uuid;

use super::{Error, Result};
use crate::state::AppState;
use coderd_authz::{Resource, Subject};
use coderd_store::{self as store, WorkspaceQuery};

/// Parses a search; unknown filters and statuses are refused rather than ignored.
pub async fn parse_workspace_query(
    state: &AppState,
    subject: &Subject,
    q: &str,
) -> Result<WorkspaceQuery> {
    let mut query = WorkspaceQuery::default();
    let bad =
        |detail: String| Error::bad_request("Invalid workspace search query.").with_detail(detail);
    for term in q.split_whitespace() {
        match term.split_once(':') {
            Some(("owner", "me")) => query.owner = Some(subject.user_id),
            Some(("owner", name)) => {
                query.owner = Some(match state.store.user_by_username(name).await {
                    Ok(u) => u.id,
                    // An unknown owner matches nothing rather than everything.
                    Err(store::Error::NotFound) => Uuid::nil(),
                    Err(e) => return Err(e.into()),
                })
            }
            Some(("name", v)) => query.name = v.to_string(),
            Some(("template", v)) => query.template = v.to_string(),
            Some(("status", v)) => {
                v.parse::<WorkspaceStatus>().map_err(bad)?;
                query.status = v.to_string();
            }
            Some(("deleted", v)) => query.deleted = v == "true",
            // Coder's server reads `has_external_agent`; its CLI has sent `has-external-agent`.
            Some(("has_external_agent" | "has-external-agent", v)) => {
                query.has_external_agent = Some(match v {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(bad(format!(
                            "has_external_agent must be true or false, not {v:?}"
                        )));
                    }
                })
            }
            Some((key, _)) => return Err(bad(format!("unknown filter {key:?}"))),
            None => query.name = term.to_string(),
        }
    }
    Ok(query)
}

/// The ids of one page of the workspaces `q` matches among those the subject may see, and how
/// many match in all. Render them with `views::workspaces` (in chunks, for long pages).
pub async fn workspaces(
    state: &AppState,
    subject: &Subject,
    q: &str,
    limit: i64,
    offset: i64,
) -> Result<(Vec<Uuid>, i64)> {
    let mut query = parse_workspace_query(state, subject, q).await?;
    (query.limit, query.offset) = (limit, offset);
    let filter = subject.filter(Resource::Workspace);
    Ok(state.store.list_workspace_ids(&query, &filter).await?)
}
