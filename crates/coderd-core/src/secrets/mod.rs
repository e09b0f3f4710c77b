//! User secrets: values a user keeps for their workspaces (Coder's `/users/{user}/secrets`),
//! matched to a template's `coder_secret` data sources by environment variable name or file
//! path and handed to the builds of templates that declare them.
//!
//! - **At rest** a value is only ever stored sealed (AES-256-GCM from `oauth-client`'s
//!   `KeyRing`), bound to its row's id so a sealed value copied onto another row does not
//!   open. The sealing key is the deployment's `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` (as
//!   Coder's database encryption) when set, else a key coderd keeps in `site_configs` — which
//!   keeps values out of the table's plain text but not out of a dump of the whole database;
//!   operators who need that set the keys. Values sealed under the site key still open after
//!   keys are configured.
//! - **In the API** a value goes in on create and update and never comes out; a user's
//!   secrets are theirs alone: anyone else, owners included, is told they do not exist.
//! - **In builds** only the secrets the build's template version declares travel with the
//!   job, opened when the job is handed to a daemon and never written to a log, the job's
//!   input or the build's state (the engine blanks `coder_secret` values in the state).

mod rules;

use codersdk::proto::SecretRequirement;
use codersdk::provisionerd::BuildSecret;
use codersdk::usersecrets::{CreateUserSecretRequest, UpdateUserSecretRequest, UserSecret};
use oauth_client::{KeyRing, SealError};
use uuid::Uuid;

use crate::domain::{self, resolve};
use crate::state::AppState;
use coderd_authz::Subject;
use coderd_store::{self as store, UserSecretChanges, UserSecretRow};

/// The `site_configs` key of the sealing key used when the deployment configures none.
const SITE_KEY: &str = "user_secrets_key";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Domain(#[from] domain::Error),
    /// Another secret of the user already has this name, variable or file.
    #[error("{field}: {detail}")]
    InUse {
        field: &'static str,
        detail: &'static str,
    },
    /// A stored value cannot be opened with this deployment's keys.
    #[error("a stored secret cannot be opened: {0}")]
    Sealed(#[from] SealError),
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::Conflict { constraint } => in_use(&constraint),
            other => Self::Domain(other.into()),
        }
    }
}

fn in_use(constraint: &str) -> Error {
    let (field, detail) = match constraint {
        "user_secrets_user_env_name" => {
            ("env_name", "Environment variable name is already in use.")
        }
        "user_secrets_user_file_path" => ("file_path", "File path is already in use."),
        _ => ("name", "Name is already in use."),
    };
    Error::InUse { field, detail }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The keys that seal and open values.
struct Keys {
    configured: Option<std::sync::Arc<KeyRing>>,
    site: KeyRing,
}

impl Keys {
    async fn load(state: &AppState) -> Result<Self> {
        let site = state
            .store
            .site_secret(SITE_KEY, KeyRing::generate_key)
            .await?;
        let site = KeyRing::from_base64(&[site])?;
        Ok(Self {
            configured: state.options.external_token_keys.clone(),
            site,
        })
    }

    fn sealing(&self) -> &KeyRing {
        self.configured.as_deref().unwrap_or(&self.site)
    }

    /// The sealed value and the id of the key that sealed it.
    fn seal(&self, id: Uuid, value: &str) -> (String, String) {
        let sealed = self.sealing().seal(&purpose(id), value.as_bytes());
        let key_id = sealed
            .split_once(':')
            .map(|(k, _)| k)
            .unwrap_or_default()
            .to_owned();
        (sealed, key_id)
    }

    fn open(&self, row: &UserSecretRow) -> Result<String> {
        self.open_for(&purpose(row.id), &row.value)
    }

    fn open_for(&self, purpose: &str, sealed: &str) -> Result<String> {
        let opened = match &self.configured {
            Some(keys) => match keys.open(purpose, sealed) {
                Err(SealError::UnknownKey(_)) => self.site.open(purpose, sealed),
                other => other,
            },
            None => self.site.open(purpose, sealed),
        }?;
        String::from_utf8(opened).map_err(|_| Error::Sealed(SealError::Damaged))
    }
}

/// Seals a value other than a user secret with the same keys, bound to `purpose` (a sealed
/// value opens only for the purpose it was sealed for). External agents' tokens use it.
pub(crate) async fn seal_value(state: &AppState, purpose: &str, value: &str) -> Result<String> {
    Ok(Keys::load(state)
        .await?
        .sealing()
        .seal(purpose, value.as_bytes()))
}

/// Opens what [`seal_value`] sealed for `purpose`.
pub(crate) async fn open_value(state: &AppState, purpose: &str, sealed: &str) -> Result<String> {
    Keys::load(state).await?.open_for(purpose, sealed)
}

/// What a sealed value is bound to: its row.
fn purpose(id: Uuid) -> String {
    format!("user_secret:{id}")
}

fn render(row: UserSecretRow) -> UserSecret {
    UserSecret {
        id: row.id,
        name: row.name,
        description: row.description,
        env_name: row.env_name,
        file_path: row.file_path,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

/// The user whose secrets these are, who must be the caller: a user's secrets are nobody
/// else's business, so for anyone else they do not exist.
async fn owner(state: &AppState, subject: &Subject, user: &str) -> Result<Uuid> {
    let user = resolve::user(state, subject, user).await?;
    if user.id != subject.user_id {
        return Err(domain::Error::NotFound.into());
    }
    Ok(user.id)
}

pub async fn create(
    state: &AppState,
    subject: &Subject,
    user: &str,
    req: CreateUserSecretRequest,
) -> Result<UserSecret> {
    let user = owner(state, subject, user).await?;
    rules::check_create(&req)?;
    if state.store.user_secrets(user).await?.len() >= rules::MAX_SECRETS_PER_USER {
        return Err(domain::Error::BadRequest {
            message: "User secrets limit reached.".into(),
            detail: format!(
                "Each user can have at most {} secrets.",
                rules::MAX_SECRETS_PER_USER
            ),
        }
        .into());
    }
    let keys = Keys::load(state).await?;
    let id = Uuid::new_v4();
    let (value, value_key_id) = keys.seal(id, &req.value);
    let row = state
        .store
        .insert_user_secret(&UserSecretRow {
            id,
            user_id: user,
            name: req.name,
            description: req.description,
            value,
            value_key_id,
            env_name: req.env_name,
            file_path: req.file_path,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        })
        .await?;
    Ok(render(row))
}

pub async fn list(state: &AppState, subject: &Subject, user: &str) -> Result<Vec<UserSecret>> {
    let user = owner(state, subject, user).await?;
    Ok(state
        .store
        .user_secrets(user)
        .await?
        .into_iter()
        .map(render)
        .collect())
}

async fn find(state: &AppState, user: Uuid, name: &str) -> Result<UserSecretRow> {
    state
        .store
        .user_secret(user, name)
        .await?
        .ok_or_else(|| domain::Error::NotFound.into())
}

pub async fn get(
    state: &AppState,
    subject: &Subject,
    user: &str,
    name: &str,
) -> Result<UserSecret> {
    let user = owner(state, subject, user).await?;
    Ok(render(find(state, user, name).await?))
}

pub async fn update(
    state: &AppState,
    subject: &Subject,
    user: &str,
    name: &str,
    req: UpdateUserSecretRequest,
) -> Result<UserSecret> {
    let user = owner(state, subject, user).await?;
    rules::check_update(&req)?;
    let row = find(state, user, name).await?;
    let value = match &req.value {
        Some(value) => Some(Keys::load(state).await?.seal(row.id, value)),
        None => None,
    };
    let changes = UserSecretChanges {
        value,
        description: req.description,
        env_name: req.env_name,
        file_path: req.file_path,
    };
    Ok(render(
        state.store.update_user_secret(row.id, &changes).await?,
    ))
}

pub async fn delete(state: &AppState, subject: &Subject, user: &str, name: &str) -> Result<()> {
    let user = owner(state, subject, user).await?;
    if !state.store.delete_user_secret(user, name).await? {
        return Err(domain::Error::NotFound.into());
    }
    Ok(())
}

/// The owner's secrets a build's template version declares, opened for the job that runs it.
/// Secrets the owner has not set are simply absent: the provider fails a start build that
/// needs one, with the template's help message.
pub async fn for_build(
    state: &AppState,
    wanted: &[SecretRequirement],
    owner: Uuid,
) -> Result<Vec<BuildSecret>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let rows = state.store.user_secrets(owner).await?;
    // Only what the template asked for: a secret that is both a variable and a file goes as
    // the one the template declares.
    let chosen: Vec<(&UserSecretRow, bool, bool)> = rows
        .iter()
        .map(|row| {
            let env = !row.env_name.is_empty() && wanted.iter().any(|w| w.env == row.env_name);
            let file = !row.file_path.is_empty() && wanted.iter().any(|w| w.file == row.file_path);
            (row, env, file)
        })
        .filter(|(_, env, file)| *env || *file)
        .collect();
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    let keys = Keys::load(state).await?;
    chosen
        .into_iter()
        .map(|(row, env, file)| {
            Ok(BuildSecret {
                env_name: if env {
                    row.env_name.clone()
                } else {
                    String::new()
                },
                file_path: if file {
                    row.file_path.clone()
                } else {
                    String::new()
                },
                value: keys.open(row)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: Uuid, value: String) -> UserSecretRow {
        UserSecretRow {
            id,
            user_id: Uuid::new_v4(),
            name: "n".into(),
            description: String::new(),
            value,
            value_key_id: String::new(),
            env_name: String::new(),
            file_path: String::new(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn values_open_only_on_their_row_and_survive_configuring_keys() {
        let site_key = KeyRing::generate_key();
        let site_only = Keys {
            configured: None,
            site: KeyRing::from_base64(std::slice::from_ref(&site_key)).expect("key"),
        };
        let id = Uuid::new_v4();
        let (sealed, key_id) = site_only.seal(id, "v4lue");
        assert!(!sealed.contains("v4lue") && sealed.starts_with(&format!("{key_id}:")));
        assert_eq!(
            site_only.open(&row(id, sealed.clone())).expect("open"),
            "v4lue"
        );
        // Copied onto another row, it does not open.
        assert!(
            site_only
                .open(&row(Uuid::new_v4(), sealed.clone()))
                .is_err()
        );

        let configured = Keys {
            configured: Some(std::sync::Arc::new(KeyRing::ephemeral())),
            site: KeyRing::from_base64(&[site_key]).expect("key"),
        };
        assert_eq!(configured.open(&row(id, sealed)).expect("open"), "v4lue");
        let (resealed, new_id) = configured.seal(id, "v4lue");
        assert_ne!(new_id, key_id, "new values use the configured key");
        assert!(site_only.open(&row(id, resealed)).is_err());
    }
}
