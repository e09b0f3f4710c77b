//! Secrets: API key generation and hashing, password hashing.
//!
//! A token is `<id>-<secret>`: the id (10 characters) finds the row, the secret (22 characters)
//! proves possession. Only SHA-256 of the secret is stored — tokens are long random strings, so a
//! fast hash suffices. Passwords are people's choices and get argon2id.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| Error::Hash(e.to_string()))
    })
    .await?
}

/// Checks a password against a stored hash. With no hash (unknown user) it still spends the
/// same work on a fixed hash, so response time does not reveal whether the account exists.
pub async fn verify_password(hashed: Option<String>, password: String) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || {
        let stored = hashed.as_deref().unwrap_or(DUMMY_HASH);
        let Ok(parsed) = PasswordHash::new(stored) else {
            return false;
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        ok && hashed.is_some()
    })
    .await
    .map_err(Error::from)
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
}
