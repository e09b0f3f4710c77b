//! Sealing secrets at rest: AES-256-GCM (aws-lc-rs) under a key ring. The first key seals; any
//! key opens, so an operator rotates by putting a new key first and re-sealing at leisure. A
//! sealed value is `<key id>:<base64(nonce ‖ ciphertext ‖ tag)>`, the key id being the first 8
//! hex digits of SHA-256 of the key, so the key that opens a value is found without trying all.
//! The associated data binds a value to its purpose (a refresh token cannot be replayed as a
//! state cookie).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

const KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("an encryption key must be 32 bytes, base64-encoded: {0}")]
    BadKey(String),
    #[error("at least one encryption key is needed")]
    NoKeys,
    #[error("the value was sealed with a key this deployment does not have ({0})")]
    UnknownKey(String),
    #[error("the sealed value is damaged or was sealed for another purpose")]
    Damaged,
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// The deployment's encryption keys, newest first.
pub struct KeyRing {
    keys: Vec<Key>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field(
                "key_ids",
                &self.keys.iter().map(|k| &k.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl KeyRing {
    /// From raw 32-byte keys, the sealing key first.
    pub fn new(keys: &[[u8; KEY_LEN]]) -> Result<Self, SealError> {
        if keys.is_empty() {
            return Err(SealError::NoKeys);
        }
        let keys = keys
            .iter()
            .map(|raw| {
                let unbound = UnboundKey::new(&AES_256_GCM, raw)
                    .map_err(|_| SealError::BadKey("rejected by AES-256-GCM".into()))?;
                Ok(Key {
                    id: hex8(raw),
                    key: LessSafeKey::new(unbound),
                })
            })
            .collect::<Result<_, SealError>>()?;
        Ok(Self { keys })
    }

    /// From Coder's `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` form: base64 keys of 32 bytes each.
    pub fn from_base64(keys: &[String]) -> Result<Self, SealError> {
        let raw = keys
            .iter()
            .map(|k| {
                let bytes = STANDARD
                    .decode(k.trim())
                    .map_err(|e| SealError::BadKey(e.to_string()))?;
                <[u8; KEY_LEN]>::try_from(bytes.as_slice())
                    .map_err(|_| SealError::BadKey(format!("{} bytes", bytes.len())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(&raw)
    }

    /// A fresh random key, base64-encoded (what an operator would put in the setting).
    pub fn generate_key() -> String {
        let mut raw = [0u8; KEY_LEN];
        // The system RNG only fails if the OS has none; a key of zeros must never be made.
        SystemRandom::new()
            .fill(&mut raw)
            .expect("the operating system's random number generator failed");
        STANDARD.encode(raw)
    }

    /// A ring of one fresh random key, for values that need not outlive the process.
    pub fn ephemeral() -> Self {
        Self::from_base64(&[Self::generate_key()])
            .expect("a generated key is always a valid AES-256-GCM key")
    }

    /// Seals `plaintext` for `purpose`.
    pub fn seal(&self, purpose: &str, plaintext: &[u8]) -> String {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the operating system's random number generator failed");
        let mut buf = plaintext.to_vec();
        // Sealing only fails for inputs beyond GCM's 64 GiB limit.
        key.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.as_bytes()),
                &mut buf,
            )
            .expect("AES-GCM sealing failed");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        format!("{}:{}", key.id, URL_SAFE_NO_PAD.encode(out))
    }

    /// Opens a value sealed for `purpose` by any key of the ring.
    pub fn open(&self, purpose: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let (id, body) = sealed.split_once(':').ok_or(SealError::Damaged)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_string()))?;
        let mut bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Damaged)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Damaged);
        }
        let mut ciphertext = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| SealError::Damaged)?;
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut ciphertext)
            .map_err(|_| SealError::Damaged)?;
        Ok(plain.to_vec())
    }

    /// The id of the key that seals (the first), as sealed values name it.
    pub fn sealing_key_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Whether `sealed` was sealed by the current sealing key (else it should be re-sealed).
    pub fn is_current(&self, sealed: &str) -> bool {
        sealed
            .split_once(':')
            .is_some_and(|(id, _)| id == self.keys[0].id)
    }
}

fn hex8(raw: &[u8]) -> String {
    Sha256::digest(raw)
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(keys: &[&str]) -> KeyRing {
        KeyRing::from_base64(&keys.iter().map(|k| k.to_string()).collect::<Vec<_>>()).expect("keys")
    }

    #[test]
    fn sealed_values_open_only_with_their_purpose_and_a_ring_key() {
        let (a, b) = (KeyRing::generate_key(), KeyRing::generate_key());
        let old = ring(&[&a]);
        let sealed = old.seal("refresh_token", b"secret-refresh-token");
        assert!(!sealed.contains("secret"), "{sealed}");
        assert_eq!(
            old.open("refresh_token", &sealed).expect("open"),
            b"secret-refresh-token"
        );
        assert_eq!(old.open("oauth_state", &sealed), Err(SealError::Damaged));
        // Two seals of the same value differ (random nonces).
        assert_ne!(sealed, old.seal("refresh_token", b"secret-refresh-token"));

        // Rotation: a new key first still opens the old values; they are not current.
        let rotated = ring(&[&b, &a]);
        assert_eq!(
            rotated.open("refresh_token", &sealed).expect("open"),
            b"secret-refresh-token"
        );
        assert!(!rotated.is_current(&sealed));
        assert!(rotated.is_current(&rotated.seal("x", b"y")));

        // Without the old key it cannot be opened, and says so.
        assert!(matches!(
            ring(&[&b]).open("refresh_token", &sealed),
            Err(SealError::UnknownKey(_))
        ));
    }

    #[test]
    fn tampering_and_malformed_input_are_refused() {
        let keys = ring(&[&KeyRing::generate_key()]);
        let sealed = keys.seal("p", b"value");
        let (id, body) = sealed.split_once(':').expect("shape");
        let mut bytes = URL_SAFE_NO_PAD.decode(body).expect("b64");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("{id}:{}", URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(keys.open("p", &tampered), Err(SealError::Damaged));
        for bad in ["", "nocolon", &format!("{id}:"), &format!("{id}:!!")] {
            assert!(keys.open("p", bad).is_err(), "{bad:?}");
        }
        assert!(KeyRing::from_base64(&["c2hvcnQ=".into()]).is_err());
        assert!(KeyRing::from_base64(&[]).is_err());
    }
}
