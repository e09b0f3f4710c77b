//! The tokens of a workspace's running agents, for the build that claims a prebuilt workspace.
//! The `coder/coder` provider gives `coder_agent` a fresh token whenever it is read unless it is
//! told the running one; coderd keeps only token hashes, so the tokens come from the previous
//! state the job carries (terraform keeps every attribute there). Passing them on keeps the
//! token the prebuild's agent was started with valid, so the agent keeps running for its new
//! owner and the resources that hold the token are not replaced.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The running agents' tokens, as `CODER_RUNNING_WORKSPACE_AGENT_TOKEN_*` variables.
#[derive(Clone, Default)]
pub(crate) struct RunningAgentTokens(Vec<(String, String)>);

impl std::fmt::Debug for RunningAgentTokens {
    // A token is an agent's credential: only the variables' names may show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.0.iter().map(|(name, _)| name).collect();
        f.debug_tuple("RunningAgentTokens").field(&names).finish()
    }
}

impl RunningAgentTokens {
    /// The tokens of the `coder_agent` resources in `state` (a terraform state document).
    /// As Coder does: one agent's token goes under the name keyed by the empty agent id, the
    /// one the provider reads; with several, each goes under its agent's id, which providers
    /// do not read yet, so their agents get new tokens. Nothing when the state has no agent or
    /// is not a state document.
    pub(crate) fn from_state(state: &[u8]) -> Self {
        let Ok(doc) = serde_json::from_slice::<Value>(state) else {
            return Self::default();
        };
        let agents: Vec<(&str, &str)> = doc
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| {
                r.get("mode").and_then(Value::as_str) == Some("managed")
                    && r.get("type").and_then(Value::as_str) == Some("coder_agent")
            })
            .flat_map(|r| {
                r.get("instances")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .filter_map(|instance| {
                let attributes = instance.get("attributes")?;
                let id = attributes.get("id").and_then(Value::as_str).unwrap_or("");
                let token = attributes.get("token").and_then(Value::as_str)?;
                (!token.is_empty()).then_some((id, token))
            })
            .collect();
        let vars = match agents.as_slice() {
            [(_, token)] => vec![(variable(""), (*token).to_owned())],
            several => several
                .iter()
                .map(|(id, token)| (variable(id), (*token).to_owned()))
                .collect(),
        };
        Self(vars)
    }

    pub(crate) fn variables(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.0.iter().cloned()
    }
}

/// `CODER_RUNNING_WORKSPACE_AGENT_TOKEN_<sha256 hex of the agent's id>`.
pub(crate) fn variable(agent_id: &str) -> String {
    format!(
        "CODER_RUNNING_WORKSPACE_AGENT_TOKEN_{}",
        hex::encode(Sha256::digest(agent_id.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(agents: &[(&str, &str)]) -> Vec<u8> {
        let instances: Vec<Value> = agents
            .iter()
            .map(|(id, token)| serde_json::json!({"attributes": {"id": id, "token": token}}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "version": 4,
            "resources": [
                {"mode": "data", "type": "coder_agent", "name": "x",
                 "instances": [{"attributes": {"id": "d", "token": "not-a-resource"}}]},
                {"mode": "managed", "type": "null_resource", "name": "x",
                 "instances": [{"attributes": {"id": "n", "token": "not-an-agent"}}]},
                {"mode": "managed", "type": "coder_agent", "name": "main", "instances": instances},
            ]
        }))
        .unwrap_or_default()
    }

    #[test]
    fn one_agent_is_keyed_by_the_empty_id() {
        let tokens = RunningAgentTokens::from_state(&state(&[("agent-a", "token-a")]));
        let vars: Vec<_> = tokens.variables().collect();
        assert_eq!(
            vars,
            vec![(
                "CODER_RUNNING_WORKSPACE_AGENT_TOKEN_\
                 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                    .to_owned(),
                "token-a".to_owned()
            )]
        );
        assert!(!format!("{tokens:?}").contains("token-a"));
    }

    #[test]
    fn several_agents_are_keyed_by_their_ids() {
        let tokens =
            RunningAgentTokens::from_state(&state(&[("agent-a", "token-a"), ("agent-b", "t-b")]));
        let vars: Vec<_> = tokens.variables().collect();
        assert_eq!(
            vars,
            vec![
                (variable("agent-a"), "token-a".to_owned()),
                (variable("agent-b"), "t-b".to_owned())
            ]
        );
        assert_ne!(variable("agent-a"), variable(""));
    }

    #[test]
    fn no_state_no_tokens() {
        for state in [&b""[..], b"not json", br#"{"resources": []}"#] {
            assert_eq!(RunningAgentTokens::from_state(state).variables().count(), 0);
        }
    }
}
