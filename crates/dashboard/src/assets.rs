//! Static assets (CSS, htmx, live.js) embedded in the binary and served under content-hashed
//! URLs (`/-/assets/{hash}/{file}`) with `immutable` caching: a new build changes the hash, so
//! browsers never run stale script against new markup, and nothing is re-fetched otherwise.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(rust_embed::RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// The short content hash of every embedded file, computed once.
fn hashes() -> &'static HashMap<String, String> {
    static HASHES: OnceLock<HashMap<String, String>> = OnceLock::new();
    HASHES.get_or_init(|| {
        Assets::iter()
            .filter_map(|name| {
                let file = Assets::get(&name)?;
                let hash = hex::encode(&file.metadata.sha256_hash()[..6]);
                Some((name.into_owned(), hash))
            })
            .collect()
    })
}

/// The URL of an embedded asset; a name that is not embedded is a bug caught by the tests.
pub fn url(file: &str) -> String {
    match hashes().get(file) {
        Some(hash) => format!("/-/assets/{hash}/{file}"),
        None => format!("/-/assets/missing/{file}"),
    }
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

pub async fn serve(Path((hash, file)): Path<(String, String)>) -> Response {
    // Only the current hash is served: an old URL must not be cached forever with new bytes.
    let (Some(expected), Some(asset)) = (hashes().get(&file), Assets::get(&file)) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if *expected != hash {
        return StatusCode::NOT_FOUND.into_response();
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(&file)),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        asset.data.into_owned(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_linked_asset_is_embedded() {
        for file in [
            "htmx-2.0.11.min.js",
            "live.js",
            "dashboard.css",
            "terminal.js",
            "xterm-6.0.0.min.js",
            "xterm-6.0.0.css",
            "xterm-addon-fit-0.11.0.min.js",
        ] {
            assert!(
                !super::url(file).contains("/missing/"),
                "{file} is not embedded"
            );
        }
    }
}
