//! Provisioner tags: normalisation, the matching rule, and the canonical keys the job queue is
//! indexed by.
//!
//! Every job and daemon carries `scope` and `owner`. A daemon may take a job iff (same
//! organization and provisioner type, checked elsewhere):
//! 1. the job is untagged (`{scope: organization, owner: ""}`) and so is the daemon, or
//! 2. the job is tagged and every job tag is in the daemon's tags with the same value.
//!
//! Rule 2 means a daemon accepts exactly the jobs whose tag set is a subset of its own that
//! contains its `scope` and `owner` — with the untagged set excluded for tagged daemons (rule 1).
//! Enumerating those subsets gives a short list of canonical keys; the queue's index on
//! `tags_key` turns acquisition into one probe per key, however many jobs no daemon matches.

use codersdk::provisionerd::{SCOPE_ORGANIZATION, SCOPE_USER, TAG_OWNER, TAG_SCOPE, Tags};
use uuid::Uuid;

/// Tags beyond `scope` and `owner` a daemon may have: it accepts 2^n tag sets, so this bounds
/// the number of index probes per acquisition.
pub const MAX_EXTRA_TAGS: usize = 8;
const MAX_TAG_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error("tag keys must not be empty")]
    EmptyKey,
    #[error("tag {0:?} contains a NUL byte")]
    Nul(String),
    #[error("tag {0:?} is longer than {MAX_TAG_LEN} bytes")]
    TooLong(String),
    #[error("scope must be \"organization\" or \"user\", not {0:?}")]
    BadScope(String),
    #[error("at most {MAX_EXTRA_TAGS} tags besides scope and owner are supported")]
    TooMany,
}

/// Checks user-supplied tags before they are normalised.
pub fn validate(tags: &Tags) -> Result<(), TagError> {
    for (key, value) in tags {
        if key.is_empty() {
            return Err(TagError::EmptyKey);
        }
        if key.contains('\0') || value.contains('\0') {
            return Err(TagError::Nul(key.clone()));
        }
        if key.len() > MAX_TAG_LEN || value.len() > MAX_TAG_LEN {
            return Err(TagError::TooLong(key.clone()));
        }
    }
    if let Some(scope) = tags.get(TAG_SCOPE)
        && scope != SCOPE_ORGANIZATION
        && scope != SCOPE_USER
        && !scope.is_empty()
    {
        return Err(TagError::BadScope(scope.clone()));
    }
    let extra = tags
        .keys()
        .filter(|k| *k != TAG_SCOPE && *k != TAG_OWNER)
        .count();
    if extra > MAX_EXTRA_TAGS {
        return Err(TagError::TooMany);
    }
    Ok(())
}

/// Fills in `scope` and `owner`: user scope belongs to `user` (the daemon's user, or the
/// workspace owner for a build); anything else is organization scope with no owner.
pub fn normalize(mut tags: Tags, user: Option<Uuid>) -> Tags {
    let user_scoped = tags.get(TAG_SCOPE).map(String::as_str) == Some(SCOPE_USER);
    match (user_scoped, user) {
        (true, Some(user)) => {
            tags.insert(TAG_SCOPE.into(), SCOPE_USER.into());
            tags.insert(TAG_OWNER.into(), user.to_string());
        }
        _ => {
            tags.insert(TAG_SCOPE.into(), SCOPE_ORGANIZATION.into());
            tags.insert(TAG_OWNER.into(), String::new());
        }
    }
    tags
}

/// The canonical form of a (normalised) tag set: JSON with sorted keys.
pub fn key(tags: &Tags) -> String {
    serde_json::to_string(tags).unwrap_or_default()
}

fn is_untagged(tags: &Tags) -> bool {
    tags.len() == 2
        && tags.get(TAG_SCOPE).map(String::as_str) == Some(SCOPE_ORGANIZATION)
        && tags.get(TAG_OWNER).map(String::as_str) == Some("")
}

/// The rule, for one pair (normalised tags on both sides).
pub fn matches(daemon: &Tags, job: &Tags) -> bool {
    if is_untagged(job) {
        return is_untagged(daemon);
    }
    job.iter().all(|(k, v)| daemon.get(k) == Some(v))
}

/// The keys of every tag set a daemon with `daemon` tags (normalised) accepts.
pub fn acceptable_keys(daemon: &Tags) -> Vec<String> {
    let base: Tags = daemon
        .iter()
        .filter(|(k, _)| *k == TAG_SCOPE || *k == TAG_OWNER)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let extra: Vec<(&String, &String)> = daemon
        .iter()
        .filter(|(k, _)| *k != TAG_SCOPE && *k != TAG_OWNER)
        .collect();
    let mut keys = Vec::with_capacity(1 << extra.len());
    for mask in 0u32..(1 << extra.len()) {
        let mut set = base.clone();
        for (i, (k, v)) in extra.iter().enumerate() {
            if mask & (1 << i) != 0 {
                set.insert((*k).clone(), (*v).clone());
            }
        }
        if matches(daemon, &set) {
            keys.push(key(&set));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The truth table of the spec, row by row (the organization row is checked by the queue).
    pub(crate) fn truth_table() -> Vec<(Tags, Tags, bool)> {
        let org = |extra: &[(&str, &str)]| {
            let mut t = tags(&[("scope", "organization"), ("owner", "")]);
            t.extend(tags(extra));
            t
        };
        let user = |owner: &str, extra: &[(&str, &str)]| {
            let mut t = tags(&[("scope", "user"), ("owner", owner)]);
            t.extend(tags(extra));
            t
        };
        vec![
            (org(&[]), org(&[]), true),
            (org(&[("env", "on-prem")]), org(&[("env", "on-prem")]), true),
            (
                org(&[("env", "on-prem"), ("dc", "chicago")]),
                org(&[("env", "on-prem")]),
                true,
            ),
            (user("aaa", &[]), user("aaa", &[]), true),
            (user("aaa", &[("env", "on-prem")]), user("aaa", &[]), true),
            (org(&[]), org(&[("env", "on-prem")]), false),
            (org(&[("env", "on-prem")]), org(&[]), false),
            (
                org(&[("env", "on-prem"), ("dc", "new_york")]),
                org(&[("env", "on-prem"), ("dc", "chicago")]),
                false,
            ),
            (user("aaa", &[]), org(&[]), false),
            (user("aaa", &[]), user("bbb", &[]), false),
            (org(&[]), user("aaa", &[]), false),
        ]
    }

    #[test]
    fn the_rule_follows_the_truth_table() {
        for (daemon, job, expected) in truth_table() {
            assert_eq!(
                matches(&daemon, &job),
                expected,
                "daemon {daemon:?} job {job:?}"
            );
        }
    }

    #[test]
    fn acceptable_keys_agree_with_the_rule() {
        for (daemon, job, expected) in truth_table() {
            let accepted = acceptable_keys(&daemon).contains(&key(&job));
            assert_eq!(accepted, expected, "daemon {daemon:?} job {job:?}");
        }
    }

    #[test]
    fn normalisation_fills_scope_and_owner() {
        let user = Uuid::new_v4();
        assert_eq!(
            normalize(Tags::new(), Some(user)),
            tags(&[("scope", "organization"), ("owner", "")])
        );
        let scoped = normalize(
            tags(&[("scope", "user"), ("owner", "someone-else")]),
            Some(user),
        );
        assert_eq!(
            scoped.get("owner"),
            Some(&user.to_string()),
            "owner forced to the user"
        );
        let org_with_owner = normalize(tags(&[("owner", "x")]), Some(user));
        assert_eq!(org_with_owner.get("owner").map(String::as_str), Some(""));
    }

    #[test]
    fn bad_tags_are_rejected() {
        assert_eq!(validate(&tags(&[("", "x")])), Err(TagError::EmptyKey));
        assert!(matches!(
            validate(&tags(&[("a", "b\0")])),
            Err(TagError::Nul(_))
        ));
        assert!(matches!(
            validate(&tags(&[("scope", "planet")])),
            Err(TagError::BadScope(_))
        ));
        let many: Tags = (0..=MAX_EXTRA_TAGS)
            .map(|i| (format!("k{i}"), "v".into()))
            .collect();
        assert_eq!(validate(&many), Err(TagError::TooMany));
    }

    #[test]
    fn key_count_is_bounded() {
        let mut daemon = tags(&[("scope", "organization"), ("owner", "")]);
        daemon.extend((0..MAX_EXTRA_TAGS).map(|i| (format!("k{i}"), "v".to_string())));
        assert_eq!(acceptable_keys(&daemon).len(), (1 << MAX_EXTRA_TAGS) - 1);
    }
}
