//! A template's `.terraform.lock.hcl` pins the `coder/coder` provider to the checksums of
//! Coder's registry packages. Ours comes from the daemon's filesystem mirror (a small script
//! that runs the `coder` binary) and has other checksums, so `terraform init` would refuse it:
//! the executor replaces that provider's entry with our package's version and checksum before
//! init, and keeps every other pin.
//!
//! Why pin rather than drop the entry: with no checksum for a provider in the lock file,
//! terraform (1.4 and later) does not trust the shared plugin cache and installs the package
//! into it again, replacing the cache's directory. Another job's terraform, run by a daemon
//! sharing the cache, can then find the provider gone mid-command (`fork/exec ...: no such file
//! or directory`). With our checksum pinned, init uses the cached package and leaves it alone.

use std::io::Read as _;
use std::path::Path;

use base64::Engine as _;
use hcl::edit::structure::Structure;
use sha2::{Digest as _, Sha256};

/// The lock file terraform reads in a working directory.
pub(crate) const FILE_NAME: &str = ".terraform.lock.hcl";
/// The provider address our mirror serves.
const CODER_PROVIDER: &str = "registry.terraform.io/coder/coder";

/// What [`pin_coder_provider`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The file names our package; `replaced` says whether it pinned another one before.
    Pinned { replaced: bool },
    /// The file is not valid HCL; it is left for terraform to report.
    Unparsable(String),
}

/// Makes the lock file in `dir` (created if missing) pin `coder/coder` to `version` and `hash`
/// (see [`package_hash`]), keeping every other entry, comments and formatting as they were.
pub(crate) fn pin_coder_provider(
    dir: &Path,
    version: &str,
    hash: &str,
) -> std::io::Result<Outcome> {
    let path = dir.join(FILE_NAME);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let (kept, replaced) = match without_coder_provider(&text) {
        Ok(Some(kept)) => (kept, true),
        Ok(None) => (text, false),
        Err(e) => return Ok(Outcome::Unparsable(e)),
    };
    let mut pinned = kept.trim_end().to_owned();
    if !pinned.is_empty() {
        pinned.push_str("\n\n");
    }
    pinned.push_str(&format!(
        "provider \"{CODER_PROVIDER}\" {{\n  version = \"{version}\"\n  hashes = [\n    \"{hash}\",\n  ]\n}}\n"
    ));
    std::fs::write(&path, pinned)?;
    Ok(Outcome::Pinned { replaced })
}

/// Terraform's `h1:` checksum of an unpacked provider package: SHA-256 over the sorted lines
/// `<hex SHA-256 of the file>  <path relative to the package>` of every file under `package`.
pub(crate) fn package_hash(package: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect_files(package, package, &mut files)?;
    files.sort();
    let mut summary = Sha256::new();
    for name in files {
        let mut file = std::fs::File::open(package.join(&name))?;
        let mut hasher = Sha256::new();
        let mut buffer = [0u8; 64 << 10];
        loop {
            let read = file.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        summary.update(format!("{}  {name}\n", hex::encode(hasher.finalize())));
    }
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    ))
}

/// Paths of the files under `dir`, relative to `root` with `/` separators (as terraform names
/// them), following links as terraform does.
fn collect_files(root: &Path, dir: &Path, files: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if std::fs::metadata(&path)?.is_dir() {
            collect_files(root, &path, files)?;
        } else if let Ok(relative) = path.strip_prefix(root) {
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push(parts.join("/"));
        }
    }
    Ok(())
}

/// The lock file without the `coder/coder` entries, or `None` when it has none.
fn without_coder_provider(text: &str) -> Result<Option<String>, String> {
    let mut body = hcl::edit::parser::parse_body(text).map_err(|e| e.to_string())?;
    let is_coder = |structure: &Structure| {
        structure.as_block().is_some_and(|block| {
            block.ident.as_str() == "provider"
                && block
                    .labels
                    .first()
                    .is_some_and(|label| label.as_str() == CODER_PROVIDER)
        })
    };
    let doomed: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, s)| is_coder(s))
        .map(|(i, _)| i)
        .collect();
    if doomed.is_empty() {
        return Ok(None);
    }
    for index in doomed.into_iter().rev() {
        body.remove(index);
    }
    Ok(Some(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/coder/coder" {
  version     = "2.4.1"
  constraints = "~> 2.0"
  hashes = [
    "h1:aaaa=",
    "zh:bbbb",
  ]
}

provider "registry.terraform.io/kreuzwerker/docker" {
  version     = "3.0.2"
  constraints = "~> 3.0"
  hashes = [
    "h1:cccc=",
  ]
}
"#;

    #[test]
    fn drops_only_the_coder_provider() -> Result<(), String> {
        let kept = without_coder_provider(LOCK)?.ok_or("the entry is there")?;
        assert!(!kept.contains("coder/coder"), "{kept}");
        assert!(kept.contains(
            "provider \"registry.terraform.io/kreuzwerker/docker\" {\n  version     = \"3.0.2\""
        ));
        assert!(kept.contains("\"h1:cccc=\""));
        assert_eq!(without_coder_provider(&kept)?, None);
        Ok(())
    }

    #[test]
    fn the_coder_entry_is_replaced_or_added_and_the_rest_kept() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(FILE_NAME);
        let ours = "provider \"registry.terraform.io/coder/coder\" {\n  version = \"2.17.0\"\n  \
                    hashes = [\n    \"h1:ours=\",\n  ]\n}\n";
        // No lock file: one is written with our entry alone.
        assert_eq!(
            pin_coder_provider(dir.path(), "2.17.0", "h1:ours=")?,
            Outcome::Pinned { replaced: false }
        );
        assert_eq!(std::fs::read_to_string(&path)?, ours);
        // Coder's registry pin: replaced, the docker pin kept as it was.
        std::fs::write(&path, LOCK)?;
        assert_eq!(
            pin_coder_provider(dir.path(), "2.17.0", "h1:ours=")?,
            Outcome::Pinned { replaced: true }
        );
        let pinned = std::fs::read_to_string(&path)?;
        assert!(!pinned.contains("h1:aaaa="), "{pinned}");
        assert!(pinned.contains("\"h1:cccc=\""), "{pinned}");
        assert!(pinned.ends_with(ours), "{pinned}");
        assert_eq!(pinned.matches("coder/coder").count(), 1, "{pinned}");
        std::fs::write(&path, "provider \"x\" {")?;
        assert!(matches!(
            pin_coder_provider(dir.path(), "2.17.0", "h1:ours=")?,
            Outcome::Unparsable(_)
        ));
        Ok(())
    }

    /// A package terraform 1.11 installed from a daemon's mirror, and the checksum `terraform
    /// init` wrote for it into the lock file.
    #[test]
    fn package_hash_is_the_checksum_terraform_writes() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("terraform-provider-coder_v2.17.0"),
            "#!/bin/sh\n# The coder/coder provider, served by the executable the link points \
             at.\nexec '/tmp/coder-bench-cdCpCZ/startup/cache/terraform/mirror-executable/\
             terraform-provider-coder_v2.17.0' \"$@\"\n",
        )?;
        assert_eq!(
            package_hash(dir.path())?,
            "h1:X6KCC3tSkKzNfVUAjibz34GNBzBxlwwIJusTZQTX3Qo="
        );
        Ok(())
    }
}
