//! The version every part of the binary reports: the Coder release whose API, CLI and agent
//! protocol this implementation follows, with our own build after the `+`.
//!
//! Coder's clients compare versions to choose what to send: the VS Code extension refuses
//! servers older than 0.25 and switches `vscodessh` for `ssh` at 2.19; the JetBrains plugin
//! gates flags at 2.5, 2.13, 2.19 and 2.25. Reporting our own crate version (0.1.0) would make
//! both treat a current server as an ancient one. Semver ignores build metadata when
//! comparing, so `v2.34.3+coder-rs.0.1.0` orders exactly as Coder's `v2.34.3` does.

/// The Coder release this implements (`coderd/apidoc/swagger.json` at this tag).
pub const CODER_RELEASE: &str = "2.34.3";

/// `v<coder release>+coder-rs.<our version>`, as buildinfo, `coder version` and the agent say.
pub const VERSION: &str = concat!("v2.34.3+coder-rs.", env!("CARGO_PKG_VERSION"));

/// The part of a version before its build metadata: `v2.34.3` of `v2.34.3+coder-rs.0.1.0`.
pub fn without_metadata(version: &str) -> &str {
    version.split_once('+').map_or(version, |(core, _)| core)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_coder_release_with_our_build_as_metadata() {
        assert!(VERSION.starts_with(&format!("v{CODER_RELEASE}+coder-rs.")));
        assert_eq!(without_metadata(VERSION), format!("v{CODER_RELEASE}"));
        assert_eq!(without_metadata("v2.19.0"), "v2.19.0");
    }
}
