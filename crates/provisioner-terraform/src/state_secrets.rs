//! Secrets out of the state coderd keeps. Terraform writes every data source's attributes into
//! its state — `coder_secret`'s `value`, `coder_external_auth`'s `access_token`,
//! `coder_workspace_owner`'s session token and SSH private key included — and coderd stores a
//! build's state in its database. Data sources are read again at every plan, so their stored values serve nothing:
//! the values are blanked before the state leaves the daemon. (A template that copies a secret
//! into a resource's attributes keeps it there; that is the template's choice.)

use serde_json::Value;

/// The data sources' attributes that hold a credential.
const SECRET_ATTRIBUTES: &[(&str, &str)] = &[
    ("coder_secret", "value"),
    ("coder_external_auth", "access_token"),
    ("coder_git_auth", "access_token"),
    ("coder_workspace_owner", "session_token"),
    ("coder_workspace_owner", "ssh_private_key"),
];

/// `state` with every credential of a data source (see [`SECRET_ATTRIBUTES`]) emptied;
/// unchanged when there is none, or when it is not a state document this code understands.
pub(crate) fn scrub(state: Vec<u8>) -> Vec<u8> {
    let Ok(mut doc) = serde_json::from_slice::<Value>(&state) else {
        return state;
    };
    let mut changed = false;
    let resources = doc
        .get_mut("resources")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for resource in resources {
        if resource.get("mode").and_then(Value::as_str) != Some("data") {
            continue;
        }
        let kind = resource
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let secret: Vec<&str> = SECRET_ATTRIBUTES
            .iter()
            .filter(|(t, _)| *t == kind)
            .map(|(_, attribute)| *attribute)
            .collect();
        if secret.is_empty() {
            continue;
        }
        let instances = resource
            .get_mut("instances")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten();
        for instance in instances {
            for attribute in &secret {
                if let Some(value) = instance.pointer_mut(&format!("/attributes/{attribute}"))
                    && value.as_str().is_some_and(|v| !v.is_empty())
                {
                    *value = Value::String(String::new());
                    changed = true;
                }
            }
        }
    }
    if !changed {
        return state;
    }
    serde_json::to_vec_pretty(&doc).unwrap_or(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_blanked_and_everything_else_kept() {
        let state = serde_json::json!({
            "version": 4,
            "serial": 3,
            "resources": [
                {"mode": "data", "type": "coder_secret", "name": "token",
                 "instances": [{"attributes": {"id": "env:TOKEN", "env": "TOKEN", "value": "s3cret"}}]},
                {"mode": "data", "type": "coder_external_auth", "name": "git",
                 "instances": [{"attributes": {"id": "git", "access_token": "gho-token"}}]},
                {"mode": "data", "type": "coder_workspace_owner", "name": "me",
                 "instances": [{"attributes": {"name": "alice", "ssh_private_key": "-----BEGIN", "session_token": "tok"}}]},
                {"mode": "managed", "type": "coder_metadata", "name": "m",
                 "instances": [{"attributes": {"value": "kept"}}]}
            ]
        });
        let out = scrub(serde_json::to_vec(&state).expect("json"));
        let text = String::from_utf8(out).expect("utf-8");
        for secret in ["s3cret", "gho-token", "-----BEGIN", "\"tok\""] {
            assert!(!text.contains(secret), "{text}");
        }
        let doc: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(doc["serial"], 3);
        assert_eq!(
            doc["resources"][0]["instances"][0]["attributes"]["env"],
            "TOKEN"
        );
        assert_eq!(
            doc["resources"][2]["instances"][0]["attributes"]["name"],
            "alice"
        );
        assert_eq!(
            doc["resources"][3]["instances"][0]["attributes"]["value"],
            "kept"
        );
    }

    #[test]
    fn other_states_pass_through_byte_for_byte() {
        let plain = br#"{"version":4,"resources":[]}"#.to_vec();
        assert_eq!(scrub(plain.clone()), plain);
        assert_eq!(scrub(b"not json".to_vec()), b"not json".to_vec());
        assert_eq!(scrub(Vec::new()), Vec::<u8>::new());
    }
}
