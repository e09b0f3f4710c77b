//! Coder's audit search language: space-separated `key:value` terms (`resource_type:`,
//! `resource_id:`, `action:`, `username:`, `email:`, `date_from:`, `date_to:`,
//! `build_reason:`); dates are `YYYY-MM-DD` in UTC, `date_to` including that whole day.

use chrono::{NaiveDate, TimeZone, Utc};
use codersdk::audit::{AuditAction, ResourceType};
use uuid::Uuid;

use coderd_store::AuditQuery;

/// A term the language does not accept: which one and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct QueryError {
    pub field: String,
    pub detail: String,
}

fn refuse(field: &str, detail: impl Into<String>) -> QueryError {
    QueryError {
        field: field.into(),
        detail: detail.into(),
    }
}

fn date(field: &str, value: &str) -> Result<NaiveDate, QueryError> {
    NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| {
        refuse(
            field,
            format!("{value:?} is not a date of the form 2006-01-02"),
        )
    })
}

/// Parses `q`; every problem found is returned, not just the first.
pub fn parse_query(q: &str) -> Result<AuditQuery, Vec<QueryError>> {
    let mut out = AuditQuery::default();
    let mut errors = Vec::new();
    for term in q.split_whitespace() {
        let Some((key, value)) = term.split_once(':') else {
            errors.push(refuse(
                "q",
                format!("{term:?} is not a key:value term (e.g. action:create)"),
            ));
            continue;
        };
        let result = match key {
            "resource_type" => value
                .parse::<ResourceType>()
                .map(|r| out.resource_type = Some(r.as_str().into()))
                .map_err(|e| refuse(key, e)),
            "resource_id" => value
                .parse::<Uuid>()
                .map(|id| out.resource_id = Some(id))
                .map_err(|_| refuse(key, format!("{value:?} is not a UUID"))),
            "action" => value
                .parse::<AuditAction>()
                .map(|a| out.action = Some(a.as_str().into()))
                .map_err(|e| refuse(key, e)),
            "username" => {
                out.username = Some(value.into());
                Ok(())
            }
            "email" => {
                out.email = Some(value.into());
                Ok(())
            }
            "build_reason" => {
                out.build_reason = Some(value.into());
                Ok(())
            }
            "date_from" => date(key, value).map(|d| {
                out.date_from = Some(Utc.from_utc_datetime(&d.and_time(Default::default())));
            }),
            "date_to" => date(key, value).and_then(|d| {
                let next = d
                    .succ_opt()
                    .ok_or_else(|| refuse(key, "date is out of range"))?;
                out.date_to = Some(Utc.from_utc_datetime(&next.and_time(Default::default())));
                Ok(())
            }),
            other => Err(refuse(
                other,
                format!("{other:?} is not a valid query param"),
            )),
        };
        if let Err(e) = result {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_fill_the_query() {
        let q = parse_query(
            "resource_type:workspace_build action:start username:alice build_reason:autostart \
             date_from:2024-01-02 date_to:2024-01-02",
        )
        .unwrap_or_default();
        assert_eq!(q.resource_type.as_deref(), Some("workspace_build"));
        assert_eq!(q.action.as_deref(), Some("start"));
        assert_eq!(q.username.as_deref(), Some("alice"));
        assert_eq!(q.build_reason.as_deref(), Some("autostart"));
        let from = q.date_from.map(|d| d.to_rfc3339());
        let to = q.date_to.map(|d| d.to_rfc3339());
        assert_eq!(from.as_deref(), Some("2024-01-02T00:00:00+00:00"));
        assert_eq!(to.as_deref(), Some("2024-01-03T00:00:00+00:00"));
    }

    #[test]
    fn bad_terms_are_all_reported() {
        let errors = parse_query("action:fly colour:red date_from:yesterday plain")
            .err()
            .unwrap_or_default();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["action", "colour", "date_from", "q"]);
    }
}
