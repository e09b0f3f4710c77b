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
    let entry = dir.join(format!("terraform-provider-coder_v{PROVIDER_VERSION}"));
    let target = std::path::absolute(executable)?;
    install_entry(mirror_root, &entry, &target)?;
    Ok(entry)
}

/// Where the link to the executable lives: next to the mirror, outside every package directory.
#[cfg(unix)]
pub(crate) fn link_path(mirror_root: &Path) -> PathBuf {
    let name = mirror_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mirror".into());
    mirror_root
        .with_file_name(format!("{name}-executable"))
        .join(format!("terraform-provider-coder_v{PROVIDER_VERSION}"))
}

/// On Unix the entry is a small script that runs the executable through a link named like a
/// provider (so the `coder` binary knows to serve the plugin). Terraform hashes every file of
/// a provider's package before each command to check it against the lock file: with the
/// executable itself in the package that is the whole binary (160 MB in a debug build, ~0.2 s
/// each time, twice per command); the script is a few hundred bytes.
#[cfg(unix)]
fn install_entry(mirror_root: &Path, entry: &Path, target: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;

    let link = link_path(mirror_root);
    let link_dir = link.parent().unwrap_or(mirror_root);
    std::fs::create_dir_all(link_dir)?;
    if std::fs::read_link(&link).is_ok_and(|current| current == target) {
        // Already pointing there.
    } else {
        replace(&link, |staging| std::os::unix::fs::symlink(target, staging))?;
    }
    let script = entry_script(&link);
    if std::fs::read_to_string(entry).is_ok_and(|current| current == script) {
        return Ok(());
    }
    replace(entry, |staging| {
        std::fs::write(staging, &script)?;
        std::fs::set_permissions(staging, std::fs::Permissions::from_mode(0o755))
    })
}

#[cfg(not(unix))]
fn install_entry(_mirror_root: &Path, entry: &Path, target: &Path) -> io::Result<()> {
    replace(entry, |staging| std::fs::copy(target, staging).map(drop))
}

/// Makes `path` with `make` under a unique name, then renames it over `path`: concurrent
/// installers (several provisioner daemons sharing a mirror) never observe a missing or
/// half-made file.
fn replace(path: &Path, make: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let staging = dir.join(format!(
        ".terraform-provider-coder.{}.{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    let made = make(&staging).and_then(|()| std::fs::rename(&staging, path));
    if made.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    made
}

/// `#!/bin/sh` running `link` with the script's arguments (Terraform passes none today).
#[cfg(unix)]
fn entry_script(link: &Path) -> String {
    // Single-quoted for the shell: a quote ends the quoting, is escaped, and quoting resumes.
    let quoted = link.to_string_lossy().replace('\'', r"'\''");
    format!(
        "#!/bin/sh\n# The coder/coder provider, served by the executable the link points at.\nexec '{quoted}' \"$@\"\n"
    )
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

    #[cfg(unix)]
    #[test]
    fn the_entry_runs_the_executable_through_a_provider_named_link() -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;

        let root = tempfile::tempdir()?;
        // A quote in the path must survive the script's quoting.
        let mirror = root.path().join("it's a mirror");
        let exe = root.path().join("coder");
        std::fs::write(&exe, "#!/bin/sh\necho \"$0|$*\"\n")?;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))?;
        let entry = install(&mirror, &exe)?;
        let expected_dir = format!("{SOURCE}/{PROVIDER_VERSION}/{}_{}", go_os(), go_arch());
        assert!(entry.starts_with(mirror.join(expected_dir)));
        let link = link_path(&mirror);
        assert!(
            !link.starts_with(&mirror),
            "the link is outside the mirror's packages"
        );
        assert_eq!(std::fs::read_link(&link)?, exe);
        assert!(
            std::fs::metadata(&entry)?.len() < 512,
            "the package terraform hashes stays small"
        );

        let output = std::process::Command::new(&entry)
            .args(["a", "b c"])
            .output()?;
        assert!(output.status.success(), "{output:?}");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(printed.trim_end(), format!("{}|a b c", link.display()));
        let argv0 = link.file_name().map(|n| n.to_string_lossy().into_owned());
        assert!(argv0.is_some_and(|n| n.starts_with("terraform-provider-coder")));
        Ok(())
    }

    #[test]
    fn install_is_idempotent_and_replaces_stale_links() -> io::Result<()> {
        let root = tempfile::tempdir()?;
        let mirror = root.path().join("mirror");
        let exe = root.path().join("coder");
        std::fs::write(&exe, "")?;
        let entry = install(&mirror, &exe)?;
        let first = std::fs::read(&entry)?;
        assert_eq!(install(&mirror, &exe)?, entry);
        assert_eq!(std::fs::read(&entry)?, first);

        let other = root.path().join("coder-new");
        std::fs::write(&other, "")?;
        install(&mirror, &other)?;
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(link_path(&mirror))?, other);
        let leftovers = std::fs::read_dir(entry.parent().unwrap_or(root.path()))?.count();
        assert_eq!(leftovers, 1);
        Ok(())
    }
}
