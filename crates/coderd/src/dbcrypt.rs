//! `coder server dbcrypt rotate`: re-seals every stored external auth token with a new key, so
//! an operator can retire an old one. Run with the new key first in
//! `CODER_EXTERNAL_TOKEN_ENCRYPTION_KEYS` afterwards (and the old ones after it until this has
//! run); replicas keep working throughout, as every key opens what it sealed.

use oauth_client::KeyRing;

use crate::server::Error;
use coderd_store::postgres;

/// Re-seals with `new_key` what `old_keys` (or `new_key`) sealed; how many links changed.
pub async fn rotate(
    postgres_url: &str,
    new_key: &str,
    old_keys: &[String],
) -> Result<usize, Error> {
    let mut all = vec![new_key.to_string()];
    all.extend(old_keys.iter().filter(|k| !k.trim().is_empty()).cloned());
    let keys = KeyRing::from_base64(&all)
        .map_err(|e| Error::Config(format!("the encryption keys: {e}")))?;
    let pool = postgres::connect_and_migrate(postgres::parse_url(postgres_url)?, 2).await?;
    let store = coderd_store::Store::new(pool.clone());
    let done = coderd_core::external_auth::links::reseal_all(&store, &keys)
        .await
        .map_err(|e| Error::Config(format!("re-sealing external auth tokens: {e}")));
    pool.close().await;
    done
}
