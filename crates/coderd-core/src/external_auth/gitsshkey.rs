//! Each user's git SSH key: made on first use, the private half sealed at rest and handed only
//! to the user's own workspaces (`coder gitssh`) and builds (`coder_workspace_owner`), the
//! public half shown to the user to register with their git provider.

use codersdk::externalauth::{AgentGitSshKey, GitSshKey};
use russh::keys::PrivateKey;
use russh::keys::ssh_key::LineEnding;
use russh::keys::ssh_key::private::Ed25519Keypair;
use uuid::Uuid;

use crate::domain;
use crate::state::AppState;
use coderd_store::GitSshKeyRow;

/// The algorithms `CODER_SSH_KEYGEN_ALGORITHM` may name here.
pub const ALGORITHMS: &[&str] = &["ed25519"];

fn purpose(user: Uuid) -> String {
    format!("gitsshkey:{user}")
}

/// A new ed25519 key pair: the OpenSSH private key and the `authorized_keys` line.
fn generate() -> domain::Result<(String, String)> {
    let seed: [u8; 32] = rand::random();
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    let private = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| domain::Error::Internal(format!("encoding an SSH key: {e}")))?;
    let public = key
        .public_key()
        .to_openssh()
        .map_err(|e| domain::Error::Internal(format!("encoding an SSH key: {e}")))?;
    Ok((private.to_string(), format!("{public}\n")))
}

async fn stored(state: &AppState, user: Uuid, reset: bool) -> domain::Result<GitSshKeyRow> {
    if !reset && let Some(row) = state.store.gitsshkey(user).await? {
        return Ok(row);
    }
    let (private, public) = generate()?;
    let sealed = crate::secrets::seal_value(state, &purpose(user), &private)
        .await
        .map_err(|e| domain::Error::Internal(e.to_string()))?;
    Ok(state
        .store
        .put_gitsshkey(user, &sealed, &public, reset)
        .await?)
}

fn public(row: GitSshKeyRow) -> GitSshKey {
    GitSshKey {
        user_id: row.user_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        public_key: row.public_key,
    }
}

/// `GET /users/{user}/gitsshkey`: the public key, made on first use.
pub async fn get(state: &AppState, user: Uuid) -> domain::Result<GitSshKey> {
    Ok(public(stored(state, user, false).await?))
}

/// `PUT /users/{user}/gitsshkey`: a new key replaces the old one.
pub async fn regenerate(state: &AppState, user: Uuid) -> domain::Result<GitSshKey> {
    Ok(public(stored(state, user, true).await?))
}

/// Both halves, for the user's workspaces and builds.
pub async fn for_workspace(state: &AppState, user: Uuid) -> domain::Result<AgentGitSshKey> {
    let row = stored(state, user, false).await?;
    let private_key = crate::secrets::open_value(state, &purpose(user), &row.private_key)
        .await
        .map_err(|e| domain::Error::Internal(e.to_string()))?;
    Ok(AgentGitSshKey {
        public_key: row.public_key,
        private_key,
    })
}
