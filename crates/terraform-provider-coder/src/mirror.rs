//! Making Terraform find this provider offline: a filesystem mirror entry pointing at our
//! executable and a CLI config that installs `coder/coder` from it.

use std::io;
use std::path::{Path, PathBuf};

use crate::PROVIDER_VERSION;
use crate::platform::{go_arch, go_os};

const SOURCE: &str = "registry.terraform.io/coder/coder";

/// The mirror entry for this host's platform (see [`crate::install_into_mirror`]).
pub(crate) fn install(mirror_root: &Path, executable: &Path) -> io::Result<PathBuf> {
    let dir = mirror_root
        .join(SOURCE)
        .join(PROVIDER_VERSION)
        .join(format!("{}_{}", go_os(), go_arch()));
    std::fs::create_dir_all(&dir)?;
    let link = dir.join(format!("terraform-provider-coder_v{PROVIDER_VERSION}"));
    let target = std::path::absolute(executable)?;
    if std::fs::read_link(&link).is_ok_and(|current| current == target) {
        return Ok(link);
    }
    // Link under a unique name, then rename over the entry: concurrent installers (several
    // provisioner daemons sharing a mirror) never observe a missing or half-made entry.
    let staging = dir.join(format!(
        ".terraform-provider-coder.{}.{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    link_or_copy(&target, &staging)?;
    if let Err(err) = std::fs::rename(&staging, &link) {
        let _ = std::fs::remove_file(&staging);
        return Err(err);
    }
    Ok(link)
}

#[cfg(unix)]
fn link_or_copy(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn link_or_copy(target: &Path, link: &Path) -> io::Result<()> {
    std::fs::copy(target, link).map(drop)
}

/// A Terraform CLI config (see [`crate::cli_config`]).
pub(crate) fn cli_config(mirror_root: &Path, plugin_cache: Option<&Path>) -> String {
    let mut config = format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = {}\n    include = [\"{SOURCE}\"]\n  }}\n  direct {{\n    exclude = [\"{SOURCE}\"]\n  }}\n}}\n",
        hcl_string(&mirror_root.to_string_lossy())
    );
    if let Some(cache) = plugin_cache {
        config.push_str(&format!(
            "plugin_cache_dir = {}\n",
            hcl_string(&cache.to_string_lossy())
        ));
    }
    config
}

/// A quoted HCL string literal; `${` and `%{` would start template sequences otherwise.
fn hcl_string(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 2);
    out.push('"');
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hcl_strings_escape_quotes_backslashes_and_templates() {
        assert_eq!(hcl_string(r#"/a "b"\c"#), r#""/a \"b\"\\c""#);
        assert_eq!(
            hcl_string("/x/${HOME}/%{y}/$z"),
            r#""/x/$${HOME}/%%{y}/$z""#
        );
    }

    #[test]
    fn cli_config_mirrors_only_coder() {
        let config = cli_config(Path::new("/m"), Some(Path::new("/cache")));
        assert!(config.contains(r#"path    = "/m""#));
        assert!(config.contains(r#"include = ["registry.terraform.io/coder/coder"]"#));
        assert!(config.contains(r#"exclude = ["registry.terraform.io/coder/coder"]"#));
        assert!(config.ends_with("plugin_cache_dir = \"/cache\"\n"));
        assert!(!cli_config(Path::new("/m"), None).contains("plugin_cache_dir"));
    }

    #[test]
    fn install_is_idempotent_and_replaces_stale_links() -> io::Result<()> {
        let root = tempfile::tempdir()?;
        let exe = root.path().join("coder");
        std::fs::write(&exe, "")?;
        let link = install(root.path(), &exe)?;
        let expected_dir = format!("{SOURCE}/{PROVIDER_VERSION}/{}_{}", go_os(), go_arch());
        assert!(link.starts_with(root.path().join(expected_dir)));
        assert_eq!(std::fs::read_link(&link)?, exe);
        assert_eq!(install(root.path(), &exe)?, link);

        let other = root.path().join("coder-new");
        std::fs::write(&other, "")?;
        install(root.path(), &other)?;
        assert_eq!(std::fs::read_link(&link)?, other);
        let leftovers = std::fs::read_dir(link.parent().unwrap_or(root.path()))?.count();
        assert_eq!(leftovers, 1);
        Ok(())
    }
}
