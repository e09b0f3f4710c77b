//! Secrets: API key generation and hashing, password hashing.
//!
//! A token is `<id>-<secret>`: the id (10 characters) finds the row, the secret (22 characters)
//! proves possession. Only SHA-256 of the secret is stored — tokens are long random strings, so a
//! fast hash suffices. Passwords are people's choices and get argon2id.

use std::sync::{Arc, LazyLock};

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const ID_LEN: usize = 10;
const SECRET_LEN: usize = 22;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("hashing password: {0}")]
    Hash(String),
    #[error("password hashing task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A freshly minted key: hand `token` to the caller once, store `id` and `hashed_secret`.
pub struct GeneratedKey {
    pub id: String,
    pub hashed_secret: Vec<u8>,
    pub token: String,
}

impl std::fmt::Debug for GeneratedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

pub fn generate_key() -> GeneratedKey {
    let mut rng = rand::rng();
    let id = Alphanumeric.sample_string(&mut rng, ID_LEN);
    let secret = Alphanumeric.sample_string(&mut rng, SECRET_LEN);
    GeneratedKey {
        hashed_secret: hash_secret(&secret),
        token: format!("{id}-{secret}"),
        id,
    }
}

pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Splits `<id>-<secret>`, rejecting anything not shaped like one of our tokens.
pub fn split_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('-')?;
    let alnum = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric());
    (id.len() == ID_LEN && secret.len() == SECRET_LEN && alnum(id) && alnum(secret))
        .then_some((id, secret))
}

pub fn secret_matches(secret: &str, hashed: &[u8]) -> bool {
    hash_secret(secret).ct_eq(hashed).into()
}

/// argon2id in a blocking thread: it is deliberately slow.
pub async fn hash_password(password: String) -> Result<String, Error> {
    let permit = argon2_slot().await;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        let mut salt_bytes = [0u8; 64];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(hash_error)?;
        let params = Params::default();
        let mut out = vec![0u8; Params::DEFAULT_OUTPUT_LEN];
        argon2id(
            Version::V0x13,
            &params,
            password.as_bytes(),
            salt_bytes,
            &mut out,
        )
        .map_err(hash_error)?;
        let hash = PasswordHash {
            algorithm: Algorithm::Argon2id.ident(),
            version: Some(Version::V0x13.into()),
            params: ParamsString::try_from(&params).map_err(hash_error)?,
            salt: Some(salt.as_salt()),
            hash: Some(Output::new(&out).map_err(hash_error)?),
        };
        Ok(hash.to_string())
    })
    .await?
}

fn hash_error(e: impl std::fmt::Display) -> Error {
    Error::Hash(e.to_string())
}

/// Checks a password against a stored hash. With no hash (unknown user) it still spends the
/// same work on a fixed hash, so response time does not reveal whether the account exists.
pub async fn verify_password(hashed: Option<String>, password: String) -> Result<bool, Error> {
    let permit = argon2_slot().await;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let stored = hashed.as_deref().unwrap_or(DUMMY_HASH);
        let ok = verify_argon2id(stored, password.as_bytes()).unwrap_or(false);
        ok && hashed.is_some()
    })
    .await
    .map_err(Error::from)
}

/// `None` when `stored` is not an argon2id hash we can check.
fn verify_argon2id(stored: &str, password: &[u8]) -> Option<bool> {
    let parsed = PasswordHash::new(stored).ok()?;
    if parsed.algorithm != Algorithm::Argon2id.ident() {
        return None;
    }
    let version = match parsed.version {
        Some(v) => Version::try_from(v).ok()?,
        None => Version::default(),
    };
    let params = Params::try_from(&parsed).ok()?;
    let mut salt_bytes = [0u8; 64];
    let salt_bytes = parsed.salt?.decode_b64(&mut salt_bytes).ok()?;
    let expected = parsed.hash?;
    let mut out = vec![0u8; expected.len()];
    argon2id(version, &params, password, salt_bytes, &mut out).ok()?;
    Some(expected.as_bytes().ct_eq(&out).into())
}

/// One argon2id computation on memory of our own (see [`work_memory`]).
fn argon2id(
    version: Version,
    params: &Params,
    password: &[u8],
    salt: &[u8],
    out: &mut [u8],
) -> Result<(), argon2::Error> {
    Argon2::new(Algorithm::Argon2id, version, params.clone()).hash_password_into_with_memory(
        password,
        salt,
        out,
        work_memory(params.block_count()),
    )
}

/// argon2's work area (19 MiB with the default parameters), reserved so that it goes back to
/// the OS when the hash is done. glibc serves a request below its dynamic mmap threshold from
/// an arena and keeps the pages after free, and that threshold rises to the size of the last
/// mapping freed, up to 32 MiB: after one login, every later one would be served from, and
/// leave behind, 19 MiB of the server's resident memory for good. Reserving more than that
/// ceiling always gets a private mapping, unmapped on drop; only the blocks argon2 writes ever
/// become resident.
fn work_memory(blocks: usize) -> Vec<Block> {
    const ALWAYS_MAPPED_BLOCKS: usize = 33 * 1024;
    let mut memory = Vec::with_capacity(blocks.max(ALWAYS_MAPPED_BLOCKS));
    memory.resize(blocks, Block::default());
    memory
}

/// Bounds the argon2 computations running at once to the CPUs there are: more would not finish
/// sooner, and each holds its work area, so a burst of logins must queue rather than take
/// 19 MiB per request.
async fn argon2_slot() -> Option<OwnedSemaphorePermit> {
    static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Arc::new(Semaphore::new(cpus))
    });
    // Only a closed semaphore fails to give a permit, and this one is never closed.
    Arc::clone(&SLOTS).acquire_owned().await.ok()
}

/// argon2id of a random string nobody knows, with our default parameters.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$Y29kZXItcnMtZHVtbXk$1G4W0GRXDFnz0lCkyEVBIH3tNWOdQJ6mRgJWKHk4Jr8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_malformed_ones_are_rejected() {
        let key = generate_key();
        let (id, secret) = split_token(&key.token).expect("well formed");
        assert_eq!(id, key.id);
        assert!(secret_matches(secret, &key.hashed_secret));
        assert!(!secret_matches("x".repeat(22).as_str(), &key.hashed_secret));
        for bad in [
            "",
            "abc",
            "abcdefghij-short",
            "abcdefghi!-aaaaaaaaaaaaaaaaaaaaaa",
            &key.id,
        ] {
            assert!(split_token(bad).is_none(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn passwords_verify_only_against_their_hash() {
        let hash = hash_password("correct horse".into()).await.expect("hash");
        assert!(
            verify_password(Some(hash.clone()), "correct horse".into())
                .await
                .expect("verify")
        );
        assert!(
            !verify_password(Some(hash), "battery staple".into())
                .await
                .expect("verify")
        );
        assert!(
            !verify_password(None, "anything".into())
                .await
                .expect("verify")
        );
        assert!(
            PasswordHash::new(DUMMY_HASH).is_ok(),
            "dummy hash must parse to cost the same"
        );
    }

    #[tokio::test]
    async fn hashes_are_standard_phc_argon2id_strings() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};

        // Ours must check hashes written by the reference implementation (older databases)...
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        let theirs = Argon2::default()
            .hash_password(b"hunter2", &salt)
            .expect("hash")
            .to_string();
        assert!(
            verify_password(Some(theirs), "hunter2".into())
                .await
                .expect("verify")
        );
        // ...and what we write must check with it, at the default cost.
        let ours = hash_password("hunter2".into()).await.expect("hash");
        let parsed = PasswordHash::new(&ours).expect("PHC string");
        assert!(
            Argon2::default()
                .verify_password(b"hunter2", &parsed)
                .is_ok()
        );
        assert!(
            Argon2::default()
                .verify_password(b"hunter3", &parsed)
                .is_err()
        );
        assert_eq!(
            Params::try_from(&parsed).expect("params"),
            Params::try_from(&PasswordHash::new(DUMMY_HASH).expect("dummy")).expect("params"),
            "the dummy hash must cost what a real one does"
        );
        assert!(
            !verify_password(
                Some("$argon2i$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA".into()),
                "x".into()
            )
            .await
            .expect("verify")
        );
    }
}
