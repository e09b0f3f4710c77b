//! The agent binary a release compressed ahead of time (`coder.zst` next to `coder`): served as
//! is to clients that accept zstd, and only while it holds exactly the running executable.

use std::path::{Path, PathBuf};

use sha2::Digest as _;
use testutil::TestDb;

use crate::harness::{CODER, start_binary};

/// `coder` at a path of its own (hard-linked when the file system allows), so the sidecar this
/// test writes is seen by its server alone.
fn own_copy(dir: &Path) -> anyhow::Result<PathBuf> {
    let binary = dir.join("coder");
    if std::fs::hard_link(CODER, &binary).is_err() {
        std::fs::copy(CODER, &binary)?;
    }
    Ok(binary)
}

fn download_path() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("bin/coder-{}-{arch}", std::env::consts::OS)
}

#[tokio::test]
async fn a_precompressed_binary_is_served_as_is_while_it_matches_the_executable()
-> anyhow::Result<()> {
    let db = TestDb::new().await?;
    let dir = tempfile::Builder::new()
        .prefix("agent-binary-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let binary = own_copy(dir.path())?;
    let executable = std::fs::read(&binary)?;
    let etag = format!("\"{}\"", hex::encode(sha1::Sha1::digest(&executable)));
    let sidecar = dir.path().join("coder.zst");

    // A sidecar from another build: ignored, the download is compressed on the fly.
    std::fs::write(&sidecar, zstd::encode_all(&b"another build"[..], 1)?)?;
    let config = dir.path().join("config");
    std::fs::create_dir(&config)?;
    let server = start_binary(&binary, &config, &["--postgres-url", db.url().as_str()]).await?;
    let url = server.url.join(&download_path())?;
    let http = reqwest::Client::new();
    let get = |accept: &'static str| http.get(url.clone()).header("accept-encoding", accept);

    let on_the_fly = get("gzip, zstd").send().await?.error_for_status()?;
    assert_eq!(on_the_fly.headers()["content-encoding"], "zstd");
    assert_eq!(on_the_fly.headers()["etag"], etag.as_str());
    let body = on_the_fly.bytes().await?;
    assert!(zstd::decode_all(&body[..])? == executable);

    // The release's sidecar (any level decodes the same; 1 keeps the test quick), written next
    // to the running executable: from now on it is what zstd clients get, byte for byte.
    let precompressed = zstd::encode_all(&executable[..], 1)?;
    assert!(body[..] != precompressed[..], "level 3 and level 1 differ");
    std::fs::write(&sidecar, &precompressed)?;
    let served = get("gzip, zstd").send().await?.error_for_status()?;
    assert_eq!(served.headers()["content-encoding"], "zstd");
    assert_eq!(served.headers()["vary"], "accept-encoding");
    assert_eq!(served.headers()["etag"], etag.as_str());
    assert_eq!(
        served.headers()["content-length"],
        precompressed.len().to_string().as_str()
    );
    assert!(served.bytes().await?[..] == precompressed[..]);

    // Clients that don't take zstd still get the binary, compressed their way or not at all.
    let gzip = get("gzip").send().await?.error_for_status()?;
    assert_eq!(gzip.headers()["content-encoding"], "gzip");
    assert!(!gzip.bytes().await?.is_empty());
    let identity = get("zstd;q=0").send().await?.error_for_status()?;
    assert!(identity.headers().get("content-encoding").is_none());
    assert!(identity.bytes().await?[..] == executable[..]);

    // A bootstrap script holding the binary gets nothing, sidecar or not.
    let cached = get("zstd")
        .header("if-none-match", etag.as_str())
        .send()
        .await?;
    assert_eq!(cached.status(), 304);
    server.stop()
}
