//! OIDC group sync: which groups a sign-in's claims put the person in (Coder's
//! `CODER_OIDC_GROUP_FIELD`, `CODER_OIDC_GROUP_MAPPING`, `CODER_OIDC_GROUP_REGEX_FILTER`,
//! `CODER_OIDC_GROUP_AUTO_CREATE` and `CODER_OIDC_ALLOWED_GROUPS`). Pure: the sign-in applies
//! the result in its own transaction (`store::GroupSync`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The name of every organization's implicit group of all its members.
pub const EVERYONE: &str = "Everyone";

/// How a deployment reads groups from OIDC claims.
#[derive(Debug, Clone, Default)]
pub struct GroupSyncSettings {
    /// The claim holding the groups; empty turns sync off.
    pub field: String,
    /// Claim value → group name (values not in it keep their name).
    pub mapping: BTreeMap<String, String>,
    /// Create groups the claim names that do not exist yet.
    pub auto_create: bool,
    /// Only groups (after mapping) matching it are synced.
    pub regex_filter: Option<regex::Regex>,
    /// When not empty, only people with one of these groups in the claim may sign in.
    pub allowed_groups: Vec<String>,
}

/// Why a sign-in is refused by its groups.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("you are not in any group allowed to sign in (claim {field:?})")]
pub struct NotAllowed {
    pub field: String,
}

impl GroupSyncSettings {
    /// The groups of a sign-in, or `None` when sync is off. The allow-list is checked even
    /// when sync is off, as Coder does.
    pub fn groups(&self, claims: &Map<String, Value>) -> Result<Option<Vec<String>>, NotAllowed> {
        let field = if self.field.is_empty() {
            "groups"
        } else {
            self.field.as_str()
        };
        let raw: Vec<String> = match claims.get(field) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            // Some providers send a single group as a string.
            Some(Value::String(one)) if !one.is_empty() => vec![one.clone()],
            _ => Vec::new(),
        };
        if !self.allowed_groups.is_empty() && !raw.iter().any(|g| self.allowed_groups.contains(g)) {
            return Err(NotAllowed {
                field: field.into(),
            });
        }
        if self.field.is_empty() {
            return Ok(None);
        }
        let mut groups: Vec<String> = raw
            .into_iter()
            .map(|g| self.mapping.get(&g).cloned().unwrap_or(g))
            .filter(|g| !g.is_empty() && !g.eq_ignore_ascii_case(EVERYONE))
            .filter(|g| self.regex_filter.as_ref().is_none_or(|r| r.is_match(g)))
            .collect();
        groups.sort();
        groups.dedup();
        Ok(Some(groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn claims_are_mapped_filtered_and_allowed() {
        let off = GroupSyncSettings::default();
        assert_eq!(
            off.groups(&claims(serde_json::json!({"groups": ["a"]}))),
            Ok(None)
        );

        let sync = GroupSyncSettings {
            field: "roles".into(),
            mapping: [("idp-devs".to_string(), "devs".to_string())].into(),
            regex_filter: Some(regex::Regex::new("^(devs|ops|x)$").expect("regex")),
            ..Default::default()
        };
        let got = sync.groups(&claims(serde_json::json!({
            "roles": ["idp-devs", "ops", "ignored", "Everyone", 7, "ops"]
        })));
        assert_eq!(got, Ok(Some(vec!["devs".into(), "ops".into()])));
        assert_eq!(
            sync.groups(&claims(serde_json::json!({"roles": "x"}))),
            Ok(Some(vec!["x".into()]))
        );
        assert_eq!(
            sync.groups(&claims(serde_json::json!({}))),
            Ok(Some(vec![]))
        );

        let gated = GroupSyncSettings {
            field: "groups".into(),
            allowed_groups: vec!["staff".into()],
            ..Default::default()
        };
        assert!(
            gated
                .groups(&claims(serde_json::json!({"groups": ["staff"]})))
                .is_ok()
        );
        assert!(
            gated
                .groups(&claims(serde_json::json!({"groups": ["guest"]})))
                .is_err()
        );
        assert!(gated.groups(&claims(serde_json::json!({}))).is_err());
    }
}
