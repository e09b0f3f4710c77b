//! External agents' tokens (`coder_external_agent`): when a build with external agents
//! completes, each token agent's token is sealed with the deployment's keys (`crate::secrets`)
//! and stored beside the agent, bound to its build's job and its name; coderd keeps only
//! hashes of every other agent's token. The API's credentials route opens them again.

use codersdk::proto::{AgentAuth, Resource};
use uuid::Uuid;

use crate::state::AppState;
use coderd_store::SealedAgentToken;

/// What a sealed token is bound to: its build's job and its agent.
fn purpose(job: Uuid, agent: &str) -> String {
    format!("external_agent:{job}:{agent}")
}

/// Seals the tokens of a completing build's agents. An agent whose token cannot be sealed
/// (the keys cannot be loaded) gets none: its credentials then say so, and the build still
/// completes.
pub async fn seal_tokens(
    state: &AppState,
    job: Uuid,
    resources: &[Resource],
) -> Vec<SealedAgentToken> {
    let mut sealed = Vec::new();
    for agent in resources.iter().flat_map(|r| &r.agents) {
        let AgentAuth::Token(token) = &agent.auth else {
            continue;
        };
        if token.is_empty() {
            continue;
        }
        match crate::secrets::seal_value(state, &purpose(job, &agent.name), token).await {
            Ok(value) => sealed.push(SealedAgentToken {
                agent_name: agent.name.clone(),
                sealed: value,
            }),
            Err(e) => {
                tracing::warn!(job = %job, agent = %agent.name, error = %e,
                    "external agents: sealing a token");
            }
        }
    }
    sealed
}

/// Opens the sealed token of `agent` of the build whose job is `job`.
pub async fn open_token(
    state: &AppState,
    job: Uuid,
    agent: &str,
    sealed: &str,
) -> Result<String, crate::secrets::Error> {
    crate::secrets::open_value(state, &purpose(job, agent), sealed).await
}
