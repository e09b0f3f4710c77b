//! Coder's task search (`q`): `owner:` (a username, an id or `me`; a bare word means an
//! owner too), `organization:` (a name or an id) and `status:`. Values may be quoted, as
//! Coder's SDK quotes them. Unknown keys and statuses are refused, naming the term.

use codersdk::ValidationError;
use codersdk::tasks::TaskStatus;
use uuid::Uuid;

use coderd_authz::Subject;
use coderd_core::domain::{Error, Result, resolve};
use coderd_core::state::AppState;
use coderd_store::TaskQuery;

/// A parsed search: what the store filters on, and the status (derived, so filtered after).
#[derive(Debug, Default)]
pub struct Search {
    pub store: TaskQuery,
    pub status: Option<TaskStatus>,
}

/// The terms of `q`: whitespace separates them except inside double quotes.
fn terms(q: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in q.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    terms.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        terms.push(current);
    }
    terms
}

fn invalid(field: &str, detail: String) -> ValidationError {
    ValidationError {
        field: field.into(),
        detail,
    }
}

pub async fn parse(state: &AppState, subject: &Subject, q: &str) -> Result<Search> {
    let mut search = Search::default();
    let mut invalids = Vec::new();
    for term in terms(&q.to_lowercase()) {
        let (key, value) = term.split_once(':').unwrap_or(("owner", term.as_str()));
        match key {
            "owner" => {
                search.store.owner = Some(match super::user_id(state, subject, value).await {
                    Ok(id) => id,
                    // An unknown owner matches nothing rather than everything.
                    Err(Error::NotFound) => Uuid::nil(),
                    Err(e) => return Err(e),
                })
            }
            "organization" => {
                search.store.organization =
                    Some(match resolve::find_organization(state, value).await {
                        Ok(org) => org.id,
                        Err(Error::NotFound) => Uuid::nil(),
                        Err(e) => return Err(e),
                    })
            }
            "status" => match value.parse::<TaskStatus>() {
                Ok(status) => search.status = Some(status),
                Err(detail) => invalids.push(invalid("status", detail)),
            },
            other => invalids.push(invalid(
                other,
                format!("{other:?} is not a valid query param"),
            )),
        }
    }
    if invalids.is_empty() {
        Ok(search)
    } else {
        Err(Error::Validation(invalids))
    }
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn quotes_keep_a_value_whole() {
        assert_eq!(
            terms(r#"owner:"me" status:"active"  alice"#),
            ["owner:me", "status:active", "alice"]
        );
        assert_eq!(terms(r#"organization:"my org""#), ["organization:my org"]);
        assert!(terms("  ").is_empty());
    }
}
