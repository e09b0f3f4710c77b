//! What a workspace downloads to start its agent (issue 15, P11b): the bootstrap script's
//! request against a running `coder server`, counted on the wire — a first start (as
//! `curl --compressed` asks: zstd or gzip) and a next start that holds the binary already
//! (`If-None-Match` with its hash, as the script sends it). And the same binary as Coder's IDE
//! clients fetch it (issue 33): the JetBrains plugin with `Accept-Encoding: gzip`, the VS Code
//! extension uncompressed, and either holding the current binary (`If-None-Match: "<sha1>"`).

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use reqwest::StatusCode;
use url::Url;

pub struct AgentDownload {
    /// The binary's own size (what the download was before compression).
    pub binary_bytes: u64,
    pub first_start_bytes: u64,
    pub encoding: String,
    pub first_start: Duration,
    pub next_start_bytes: u64,
    /// The JetBrains plugin's download (gzip), on the wire.
    pub gzip_bytes: u64,
    /// The VS Code extension's download (identity), on the wire.
    pub identity_bytes: u64,
    /// Either client's request when it holds the current binary: the body's size (a 304).
    pub ide_cached_bytes: u64,
}

/// Go's platform names, which the download path uses.
fn own_binary() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("bin/coder-{}-{arch}", std::env::consts::OS)
}

pub async fn measure(server: &Url) -> anyhow::Result<AgentDownload> {
    let url = server.join(&own_binary())?;
    // No decompression in this client: the bytes read are the bytes sent.
    let http = reqwest::Client::new();
    let identity = http.head(url.clone()).send().await?.error_for_status()?;
    let binary_bytes = identity
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .context("the binary's size")?;

    let started = Instant::now();
    let first = http
        .get(url.clone())
        .header("accept-encoding", "deflate, gzip, br, zstd")
        .send()
        .await?
        .error_for_status()?;
    let encoding = first
        .headers()
        .get(reqwest::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .to_owned();
    let etag = first
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .context("the binary has an entity tag")?
        .to_owned();
    let first_start_bytes = first.bytes().await?.len() as u64;
    let first_start = started.elapsed();

    let next = http
        .get(url.clone())
        .header("accept-encoding", "deflate, gzip, br, zstd")
        .header("if-none-match", &etag)
        .send()
        .await?;
    ensure!(
        next.status() == StatusCode::NOT_MODIFIED,
        "a start holding the current binary got {}",
        next.status()
    );
    let next_start_bytes = next.bytes().await?.len() as u64;

    let on_the_wire = |encoding: &'static str| {
        let request = http.get(url.clone()).header("accept-encoding", encoding);
        async move {
            let response = request.send().await?.error_for_status()?;
            anyhow::Ok(response.bytes().await?.len() as u64)
        }
    };
    let gzip_bytes = on_the_wire("gzip").await?;
    let identity_bytes = on_the_wire("identity").await?;
    ensure!(
        etag.len() == 42 && etag.starts_with('"'),
        "the tag is not a quoted SHA-1: {etag}"
    );
    let cached = http
        .get(url)
        .header("accept-encoding", "identity")
        .header("if-none-match", &etag)
        .send()
        .await?;
    ensure!(
        cached.status() == StatusCode::NOT_MODIFIED,
        "an IDE holding the current binary got {}",
        cached.status()
    );
    let ide_cached_bytes = cached.bytes().await?.len() as u64;
    Ok(AgentDownload {
        binary_bytes,
        first_start_bytes,
        encoding,
        first_start,
        next_start_bytes,
        gzip_bytes,
        identity_bytes,
        ide_cached_bytes,
    })
}
