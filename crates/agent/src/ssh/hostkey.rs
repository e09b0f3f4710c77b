//! The SSH server's host key, derived from the workspace's identity so that it stays the same
//! across agent restarts and workspace rebuilds: clients that remember it (editors' remote
//! plugins do, whatever `config-ssh` says) never see "host key changed".
//!
//! It authenticates nothing and is not secret: anyone who knows the workspace id can derive
//! it. The SSH server is reachable only through streams coderd opened for an authorised
//! client over the agent's authenticated connection, and that is what proves who is on the
//! other end; the host key only completes the SSH handshake.

use russh::keys::PrivateKey;
use russh::keys::ssh_key::private::Ed25519Keypair;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Names the derivation, so the seed is never one that some other use of the same inputs
/// would produce.
const DOMAIN: &[u8] = b"coder-rs workspace agent SSH host key v1\0";

/// The ed25519 host key of the agent `agent_name` of workspace `workspace_id`.
pub(crate) fn derive(workspace_id: Uuid, agent_name: &str) -> PrivateKey {
    let mut hash = Sha256::new();
    hash.update(DOMAIN);
    hash.update(workspace_id.as_bytes());
    hash.update(agent_name.as_bytes());
    let seed: [u8; 32] = hash.finalize().into();
    PrivateKey::from(Ed25519Keypair::from_seed(&seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_depends_on_the_workspace_and_the_agent_only() {
        let workspace = Uuid::new_v4();
        let key = |w, a| derive(w, a).public_key().to_openssh().expect("encode");
        assert_eq!(key(workspace, "main"), key(workspace, "main"));
        assert_ne!(key(workspace, "main"), key(workspace, "other"));
        assert_ne!(key(workspace, "main"), key(Uuid::new_v4(), "main"));
        assert!(key(workspace, "main").starts_with("ssh-ed25519 "));
    }
}
