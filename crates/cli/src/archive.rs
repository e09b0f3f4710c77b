//! Packing a template directory into the tar archive coderd stores.

use std::path::Path;

use anyhow::Context;

/// Entries that never belong in a template: terraform's working files and VCS metadata.
fn skipped(name: &str) -> bool {
    matches!(name, ".terraform" | ".git")
        || name.ends_with(".tfstate")
        || name.ends_with(".tfstate.backup")
}

/// Packs `dir` with sorted entries and zeroed timestamps, so the same files always make the same
/// archive (and coderd stores an unchanged template once).
pub fn tar_dir(dir: &Path) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    add(&mut builder, dir, Path::new(""))?;
    builder.into_inner().context("finishing the archive")
}

fn add(builder: &mut tar::Builder<Vec<u8>>, root: &Path, rel: &Path) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
        .with_context(|| format!("reading {}", root.join(rel).display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if skipped(&name.to_string_lossy()) {
            continue;
        }
        let path = rel.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            builder.append_dir(&path, entry.path())?;
            add(builder, root, &path)?;
        } else if kind.is_file() || kind.is_symlink() {
            builder
                .append_path_with_name(entry.path(), &path)
                .with_context(|| format!("adding {}", path.display()))?;
        }
    }
    Ok(())
}

/// Unpacks an archive (a pulled template) into `dest`, refusing entries that would land outside.
pub fn untar_into(data: &[u8], dest: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dest)?;
    let mut archive = tar::Archive::new(data);
    for entry in archive.entries()? {
        let mut entry = entry?;
        // unpack_in refuses paths escaping `dest`.
        entry.unpack_in(dest)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_deterministic_and_skip_terraform_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("main.tf"), "resource {}").expect("write");
        std::fs::create_dir(dir.path().join(".terraform")).expect("mkdir");
        std::fs::write(dir.path().join(".terraform/x"), "cache").expect("write");
        std::fs::write(dir.path().join("terraform.tfstate"), "{}").expect("write");
        let a = tar_dir(dir.path()).expect("tar");
        let b = tar_dir(dir.path()).expect("tar");
        assert_eq!(a, b);
        let out = tempfile::tempdir().expect("tempdir");
        untar_into(&a, out.path()).expect("untar");
        assert!(out.path().join("main.tf").exists());
        assert!(!out.path().join(".terraform").exists());
        assert!(!out.path().join("terraform.tfstate").exists());
    }
}
