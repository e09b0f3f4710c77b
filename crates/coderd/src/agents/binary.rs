//! The agent binary coderd hands out at `/bin/coder-<os>-<arch>`: its own executable, identified
//! by the SHA-256 of its bytes so a workspace that already holds the same binary skips the
//! download (the bootstrap script sends the hash of its cached copy as `If-None-Match`).

use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};

/// This process's executable as served to agents.
#[derive(Debug, Clone)]
pub struct OwnBinary {
    pub path: PathBuf,
    pub len: u64,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub sha256: String,
}

impl OwnBinary {
    /// The binary's entity tag. Weak, because the same tag names the identity and every
    /// compressed representation; the bootstrap script compares by hash, which weak matching
    /// allows.
    pub fn etag(&self) -> String {
        format!("W/\"{}\"", self.sha256)
    }

    /// Whether an `If-None-Match` header value names this binary (weak comparison, `*`
    /// included).
    pub fn matches(&self, if_none_match: &str) -> bool {
        if_none_match.split(',').any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/").trim_matches('"') == self.sha256
        })
    }
}

/// The last hash computed, with the file's size and modification time it was computed for: an
/// executable replaced in place (an upgrade without a restart) is hashed again, a running one
/// only once.
static HASHED: Mutex<Option<(u64, Option<SystemTime>, String)>> = Mutex::new(None);

/// This process's executable, hashed (once per version of the file on disk).
pub async fn own() -> std::io::Result<OwnBinary> {
    let path = std::env::current_exe()?;
    let meta = tokio::fs::metadata(&path).await?;
    let (len, modified) = (meta.len(), meta.modified().ok());
    let cached = HASHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|(l, m, _)| *l == len && *m == modified)
        .map(|(_, _, digest)| digest.clone());
    let sha256 = match cached {
        Some(digest) => digest,
        None => {
            let file = path.clone();
            let digest = tokio::task::spawn_blocking(move || hash_file(&file))
                .await
                .map_err(std::io::Error::other)??;
            *HASHED.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((len, modified, digest.clone()));
            digest
        }
    };
    Ok(OwnBinary { path, len, sha256 })
}

fn hash_file(path: &std::path::Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary() -> OwnBinary {
        OwnBinary {
            path: PathBuf::from("/opt/coder"),
            len: 1,
            sha256: "ab12".into(),
        }
    }

    #[test]
    fn if_none_match_compares_weakly_and_in_lists() {
        let b = binary();
        assert_eq!(b.etag(), "W/\"ab12\"");
        for header in ["\"ab12\"", "W/\"ab12\"", "\"x\", W/\"ab12\"", "*"] {
            assert!(b.matches(header), "{header}");
        }
        for header in ["\"ab1\"", "", "\"AB12x\""] {
            assert!(!b.matches(header), "{header}");
        }
    }

    #[tokio::test]
    async fn own_hashes_the_running_executable() -> std::io::Result<()> {
        let first = own().await?;
        assert_eq!(first.sha256, hash_file(&first.path)?);
        assert_eq!(first.sha256.len(), 64);
        // The second call is served from the cache and agrees.
        assert_eq!(own().await?.sha256, first.sha256);
        Ok(())
    }
}
