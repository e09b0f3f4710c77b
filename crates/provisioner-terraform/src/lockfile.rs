//! A template's `.terraform.lock.hcl` pins the `coder/coder` provider to the checksums of
//! Coder's registry packages. Ours comes from the daemon's filesystem mirror (a link to the
//! running `coder` binary) and has other checksums, so `terraform init` would refuse it: the
//! executor drops that provider's entry before init and keeps every other pin.

use std::path::Path;

use hcl::edit::structure::Structure;

/// The lock file terraform reads in a working directory.
pub(crate) const FILE_NAME: &str = ".terraform.lock.hcl";
/// The provider address our mirror serves.
const CODER_PROVIDER: &str = "registry.terraform.io/coder/coder";

/// What [`drop_coder_provider`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No lock file, or none with an entry for `coder/coder`.
    Unchanged,
    /// The entry was removed.
    Dropped,
    /// The file is not valid HCL; it is left for terraform to report.
    Unparsable(String),
}

/// Removes `provider "registry.terraform.io/coder/coder"` blocks from the lock file in `dir`,
/// keeping the rest of the file (comments and formatting included) as it was.
pub(crate) fn drop_coder_provider(dir: &Path) -> std::io::Result<Outcome> {
    let path = dir.join(FILE_NAME);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Outcome::Unchanged),
        Err(e) => return Err(e),
    };
    match without_coder_provider(&text) {
        Ok(Some(kept)) => {
            std::fs::write(&path, kept)?;
            Ok(Outcome::Dropped)
        }
        Ok(None) => Ok(Outcome::Unchanged),
        Err(e) => Ok(Outcome::Unparsable(e)),
    }
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
    fn files_are_rewritten_only_when_needed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(drop_coder_provider(dir.path())?, Outcome::Unchanged);
        std::fs::write(dir.path().join(FILE_NAME), LOCK)?;
        assert_eq!(drop_coder_provider(dir.path())?, Outcome::Dropped);
        assert_eq!(drop_coder_provider(dir.path())?, Outcome::Unchanged);
        std::fs::write(dir.path().join(FILE_NAME), "provider \"x\" {")?;
        assert!(matches!(
            drop_coder_provider(dir.path())?,
            Outcome::Unparsable(_)
        ));
        Ok(())
    }
}
