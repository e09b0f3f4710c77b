#![doc = include_str!("../README.md")]

mod config;
mod data_sources;
mod diag;
mod env;
mod error;
mod grpc;
mod handshake;
mod mirror;
mod plan;
mod platform;
mod proto;
mod provider;
mod resources;
mod schema;
mod server;
mod tls;
mod url_check;
mod value;

use std::io::Write as _;
use std::path::{Path, PathBuf};

pub use error::Error;

/// The version this provider reports itself as: a Coder provider 2.x, so templates'
/// `version = "~> 2.0"` or `">= 2.0.0"` constraints accept it.
pub const PROVIDER_VERSION: &str = "2.17.0";

/// True when Terraform started this process as the `coder/coder` provider plugin: the
/// go-plugin magic cookie is set and the executable is named `terraform-provider-coder*`.
#[must_use]
pub fn is_plugin_invocation() -> bool {
    let cookie = std::env::var(handshake::MAGIC_COOKIE_KEY)
        .is_ok_and(|v| v == handshake::MAGIC_COOKIE_VALUE);
    let named = std::env::args_os().next().is_some_and(|argv0| {
        Path::new(&argv0).file_name().is_some_and(|name| {
            name.to_string_lossy()
                .starts_with("terraform-provider-coder")
        })
    });
    cookie && named
}

/// Serves the provider to the Terraform process that started us, until it shuts us down.
/// Blocks; builds its own Tokio runtime.
///
/// # Errors
/// When not started by Terraform (no handshake environment) or the server cannot run.
pub fn serve() -> Result<(), Error> {
    init_logging();
    let handshake = handshake::Handshake::from_env(|name| std::env::var(name).ok())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(server::run(handshake, |line| {
        // Terraform waits for exactly this one line on stdout.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }))
}

/// Installs `executable` as this provider into a Terraform filesystem mirror rooted at
/// `mirror_root`: the entry
/// `<mirror_root>/registry.terraform.io/coder/coder/<PROVIDER_VERSION>/<os>_<arch>/terraform-provider-coder_v<PROVIDER_VERSION>`
/// is, on Unix, a `/bin/sh` script running `executable` through a link of the same name in
/// `<mirror_root>-executable/` (elsewhere a copy of `executable`). Idempotent; replaces an
/// entry for another executable. Returns the entry's path.
///
/// # Errors
/// When the directories or the link cannot be created.
pub fn install_into_mirror(mirror_root: &Path, executable: &Path) -> std::io::Result<PathBuf> {
    mirror::install(mirror_root, executable)
}

/// A Terraform CLI configuration that installs `coder/coder` from the mirror at
/// `mirror_root` and every other provider directly, with an optional plugin cache.
#[must_use]
pub fn cli_config(mirror_root: &Path, plugin_cache: Option<&Path>) -> String {
    mirror::cli_config(mirror_root, plugin_cache)
}

/// Logs go to stderr, which go-plugin relays into Terraform's own log (`TF_LOG`).
fn init_logging() {
    let level = std::env::var("TF_LOG_PROVIDER")
        .or_else(|_| std::env::var("TF_LOG"))
        .map(|l| l.to_ascii_lowercase())
        .unwrap_or_default();
    let filter = match level.as_str() {
        "trace" | "json" => "trace",
        "debug" => "debug",
        "info" => "info",
        "error" => "error",
        _ => "warn",
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
}
