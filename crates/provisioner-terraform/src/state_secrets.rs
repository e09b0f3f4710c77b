//! Secrets out of the state coderd keeps. Terraform writes every data source's attributes into
//! its state, `coder_secret`'s `value` included, and coderd stores a build's state in its
//! database. Data sources are read again at every plan, so their stored values serve nothing:
//! the values are blanked before the state leaves the daemon. (A template that copies a secret
//! into a resource's attributes keeps it there; that is the template's choice.)

use serde_json::Value;

/// `state` with every `coder_secret` data source's `value` emptied; unchanged when there is
/// none, or when it is not a state document this code understands.
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
    for resource in resources.filter(|r| {
        r.get("mode").and_then(Value::as_str) == Some("data")
            && r.get("type").and_then(Value::as_str) == Some("coder_secret")
    }) {
        let instances = resource
            .get_mut("instances")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten();
        for instance in instances {
            if let Some(value) = instance.pointer_mut("/attributes/value")
                && value.as_str().is_some_and(|v| !v.is_empty())
            {
                *value = Value::String(String::new());
                changed = true;
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
                {"mode": "managed", "type": "coder_metadata", "name": "m",
                 "instances": [{"attributes": {"value": "kept"}}]}
            ]
        });
        let out = scrub(serde_json::to_vec(&state).expect("json"));
        let text = String::from_utf8(out).expect("utf-8");
        assert!(!text.contains("s3cret"), "{text}");
        let doc: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(doc["serial"], 3);
        assert_eq!(
            doc["resources"][0]["instances"][0]["attributes"]["env"],
            "TOKEN"
        );
        assert_eq!(
            doc["resources"][1]["instances"][0]["attributes"]["value"],
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
