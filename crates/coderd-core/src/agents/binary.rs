//! The binary coderd hands out at `/bin/coder-<os>-<arch>`: its own executable, to agents and
//! to Coder's IDE clients, identified by the hash of its bytes so a client that already holds
//! the same binary skips the download. The entity tag is the SHA-1 in quotes, as Coder's: its
//! VS Code extension and JetBrains plugin send `If-None-Match: "<sha1 of their copy>"`. The
//! bootstrap scripts of workspaces send the SHA-256 of theirs (`sha256sum` is everywhere, and
//! builds made before this server still carry such scripts), so that matches too.
//!
//! A release ships `coder.zst` next to `coder`: the same bytes compressed once, at build time, at
//! a level far too slow to run per download (zstd 19 with a 128 MiB window makes a 66 MB binary
//! about 15 MB, where the level 3 affordable per request leaves 20 MB). It is served as is to
//! clients that accept zstd, once it is known to decompress to exactly this executable; a
//! missing, stale or damaged one is ignored and the download is compressed on the fly instead.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// This process's executable as served to agents.
#[derive(Debug, Clone)]
pub struct OwnBinary {
    pub path: PathBuf,
    pub len: u64,
    pub hashes: Hashes,
}

/// Lower-case hex digests of a file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashes {
    pub sha1: String,
    pub sha256: String,
}

impl OwnBinary {
    /// The binary's entity tag: its SHA-1, strong, whatever the encoding it travels in (as
    /// Coder's server does; its clients compare the tag with the SHA-1 of the file they hold).
    pub fn etag(&self) -> String {
        format!("\"{}\"", self.hashes.sha1)
    }

    /// Whether an `If-None-Match` header value names this binary: its SHA-1 or SHA-256, weak
    /// or strong, in a list, or `*`.
    pub fn matches(&self, if_none_match: &str) -> bool {
        if_none_match.split(',').any(|tag| {
            let tag = tag.trim();
            let hash = tag.trim_start_matches("W/").trim_matches('"');
            tag == "*" || hash == self.hashes.sha1 || hash == self.hashes.sha256
        })
    }
}

/// The last hash computed, with the file's size and modification time it was computed for: an
/// executable replaced in place (an upgrade without a restart) is hashed again, a running one
/// only once.
static HASHED: Mutex<Option<(u64, Option<SystemTime>, Hashes)>> = Mutex::new(None);

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
        .map(|(_, _, hashes)| hashes.clone());
    let hashes = match cached {
        Some(hashes) => hashes,
        None => {
            let file = path.clone();
            let hashes = tokio::task::spawn_blocking(move || hash_file(&file))
                .await
                .map_err(std::io::Error::other)??;
            *HASHED.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((len, modified, hashes.clone()));
            hashes
        }
    };
    Ok(OwnBinary { path, len, hashes })
}

/// The executable, zstd-compressed ahead of time: a file to send with `Content-Encoding: zstd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precompressed {
    pub path: PathBuf,
    pub len: u64,
}

/// The largest window the sidecar may use: 2^27 bytes is what zstd decoders (curl's included)
/// accept without being told to allow more.
const MAX_WINDOW_LOG: u32 = 27;

/// The verdict on the last sidecar looked at, for the file's size and modification time and the
/// executable's hash it was checked against: checking means decompressing all of it, so it
/// happens once per version of either file.
type Verdict = (u64, Option<SystemTime>, String, bool);
static CHECKED: Mutex<Option<Verdict>> = Mutex::new(None);

/// `<executable>.zst`, when it holds exactly `binary`'s bytes.
pub async fn precompressed(binary: &OwnBinary) -> Option<Precompressed> {
    let mut name = binary.path.file_name()?.to_os_string();
    name.push(".zst");
    let path = binary.path.with_file_name(name);
    let meta = tokio::fs::metadata(&path).await.ok()?;
    let (len, modified) = (meta.len(), meta.modified().ok());
    let known = CHECKED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|(l, m, sha, _)| *l == len && *m == modified && *sha == binary.hashes.sha256)
        .map(|verdict| verdict.3);
    let valid = match known {
        Some(valid) => valid,
        None => {
            let (file, expected) = (path.clone(), binary.clone());
            let valid = match tokio::task::spawn_blocking(move || decompresses_to(&file, &expected))
                .await
            {
                Ok(Ok(true)) => true,
                Ok(Ok(false)) => {
                    tracing::warn!(path = %path.display(), "ignoring a compressed agent binary \
                        that is not this executable (left over from another build?); \
                        compressing downloads on the fly");
                    false
                }
                Ok(Err(error)) => {
                    tracing::warn!(path = %path.display(), %error, "ignoring an unreadable \
                        compressed agent binary; compressing downloads on the fly");
                    false
                }
                Err(_) => false,
            };
            *CHECKED.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((len, modified, binary.hashes.sha256.clone(), valid));
            valid
        }
    };
    valid.then_some(Precompressed { path, len })
}

/// Whether the zstd file at `path` decompresses to `binary`'s length and hash.
fn decompresses_to(path: &std::path::Path, binary: &OwnBinary) -> std::io::Result<bool> {
    let mut decoder = zstd::stream::read::Decoder::new(std::fs::File::open(path)?)?;
    decoder.window_log_max(MAX_WINDOW_LOG)?;
    let (len, hashes) = hash_reader(decoder)?;
    Ok(len == binary.len && hashes == binary.hashes)
}

fn hash_file(path: &std::path::Path) -> std::io::Result<Hashes> {
    Ok(hash_reader(std::fs::File::open(path)?)?.1)
}

/// The byte count and digests of everything `reader` yields.
fn hash_reader(mut reader: impl Read) -> std::io::Result<(u64, Hashes)> {
    let (mut sha1, mut sha256) = (Sha1::new(), Sha256::new());
    let mut total = 0u64;
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = reader.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        sha1.update(&buffer[..read]);
        sha256.update(&buffer[..read]);
        total += read as u64;
    }
    let hashes = Hashes {
        sha1: hex::encode(sha1.finalize()),
        sha256: hex::encode(sha256.finalize()),
    };
    Ok((total, hashes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary() -> OwnBinary {
        OwnBinary {
            path: PathBuf::from("/opt/coder"),
            len: 1,
            hashes: Hashes {
                sha1: "cd34".into(),
                sha256: "ab12".into(),
            },
        }
    }

    #[test]
    fn the_tag_is_the_sha1_and_either_hash_matches() {
        let b = binary();
        assert_eq!(b.etag(), "\"cd34\"");
        for header in [
            "\"cd34\"",
            "\"ab12\"",
            "W/\"ab12\"",
            "\"x\", W/\"cd34\"",
            "*",
        ] {
            assert!(b.matches(header), "{header}");
        }
        for header in ["\"ab1\"", "", "\"AB12x\"", "\"cd34ab12\""] {
            assert!(!b.matches(header), "{header}");
        }
    }

    #[tokio::test]
    async fn own_hashes_the_running_executable() -> std::io::Result<()> {
        let first = own().await?;
        assert_eq!(first.hashes, hash_file(&first.path)?);
        assert_eq!(
            (first.hashes.sha1.len(), first.hashes.sha256.len()),
            (40, 64)
        );
        // The second call is served from the cache and agrees.
        assert_eq!(own().await?.hashes, first.hashes);
        Ok(())
    }
}
