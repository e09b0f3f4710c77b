//! The agent bootstrap scripts handed to terraform as `CODER_AGENT_SCRIPT_<os>_<arch>`. The
//! `coder/coder` provider turns the one matching a `coder_agent`'s `os` and `arch` into its
//! `init_script`, replacing `${ACCESS_URL}` (the deployment's URL, with a trailing `/`) and
//! `${AUTH_TYPE}`; a template runs that script where the agent should live.
//!
//! Each script downloads `<access url>bin/coder-<os>-<arch>` (`.exe` on Windows), retrying with
//! a growing delay until the deployment answers, and runs `coder agent` with `CODER_AGENT_AUTH`
//! and `CODER_AGENT_URL` set.

const SH: &str = include_str!("bootstrap.sh");
const POWERSHELL: &str = include_str!("bootstrap.ps1");

/// Platforms whose agents start from a POSIX shell script.
const UNIX: [(&str, &str); 6] = [
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("linux", "armv7"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("darwin", "armv7"),
];
/// Platforms whose agents start from a PowerShell script.
const WINDOWS: [(&str, &str); 2] = [("windows", "amd64"), ("windows", "arm64")];

/// The bootstrap script for an agent on `os`/`arch` (the provider's names: `linux`, `darwin`,
/// `windows`; `amd64`, `arm64`, `armv7`), with the provider's placeholders still in it.
pub fn script(os: &str, arch: &str) -> Option<String> {
    if UNIX.contains(&(os, arch)) {
        Some(SH.replace("@BINARY@", &format!("coder-{os}-{arch}")))
    } else if WINDOWS.contains(&(os, arch)) {
        Some(POWERSHELL.replace("@BINARY@", &format!("coder-{os}-{arch}.exe")))
    } else {
        None
    }
}

/// Every script as the environment variable terraform gets it in:
/// `(CODER_AGENT_SCRIPT_<os>_<arch>, script)`.
pub fn environment() -> Vec<(String, String)> {
    UNIX.iter()
        .chain(WINDOWS.iter())
        .filter_map(|(os, arch)| {
            script(os, arch).map(|s| (format!("CODER_AGENT_SCRIPT_{os}_{arch}"), s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_has_a_script_for_its_own_binary() {
        let all = environment();
        assert_eq!(all.len(), 8);
        for (name, script) in &all {
            assert!(name.starts_with("CODER_AGENT_SCRIPT_"), "{name}");
            assert!(script.contains("${ACCESS_URL}bin/coder-"), "{name}");
            assert!(script.contains("${AUTH_TYPE}"), "{name}");
            assert!(!script.contains("@BINARY@"), "{name}");
        }
        let linux = script("linux", "armv7").unwrap_or_default();
        assert!(linux.starts_with("#!/usr/bin/env sh"));
        assert!(linux.contains("bin/coder-linux-armv7\""));
        let windows = script("windows", "arm64").unwrap_or_default();
        assert!(windows.contains("bin/coder-windows-arm64.exe\""));
        assert!(windows.contains("Invoke-WebRequest"));
        assert_eq!(script("plan9", "amd64"), None);
        assert_eq!(script("windows", "armv7"), None);
    }
}
