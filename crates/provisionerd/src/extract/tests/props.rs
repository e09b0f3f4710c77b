//! Properties of extraction over generated archives: whatever the entries (paths with `..`,
//! `.` and absolute prefixes, files, directories, symbolic and hard links with hostile targets,
//! devices), random bytes, or valid archives with flipped bits, extraction returns (never
//! panics), writes nothing outside its directory, and leaves no link inside it that leads out —
//! checked by following every link the way the kernel would, independently of `extract`'s own
//! checks.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;

use proptest::prelude::*;

use super::*;

/// The sandbox: `dest`, extracted into, sits [`DEPTH`] directories below the sandbox's root,
/// so even a broken extraction's `..` lands inside the sandbox, where it is seen; `outside`,
/// directly under the root, holds a file an escape could reach. Archives name `outside` through
/// the placeholder [`OUTSIDE`] (an absolute path short enough for a tar header).
struct Sandbox {
    root: tempfile::TempDir,
}

const OUTSIDE: &str = "@OUTSIDE@";
const SECRET: &[u8] = b"do not touch";
const DEPTH: usize = 16;

impl Sandbox {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let sandbox = Self { root };
        fs::create_dir_all(sandbox.dest()).expect("dest");
        fs::create_dir(sandbox.outside()).expect("outside");
        fs::write(sandbox.outside().join("secret"), SECRET).expect("secret");
        sandbox
    }

    fn dest(&self) -> PathBuf {
        let mut dest = self.root.path().to_path_buf();
        for _ in 0..DEPTH {
            dest.push("d");
        }
        dest.join("dest")
    }

    fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    fn names(dir: &Path) -> Vec<OsString> {
        let mut names: Vec<OsString> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        names
    }

    /// Extraction left everything but `dest` as it was.
    fn untouched_outside(&self) -> Result<(), TestCaseError> {
        let mut dir = self.root.path().to_path_buf();
        prop_assert_eq!(
            Self::names(&dir),
            vec![OsString::from("d"), OsString::from("outside")]
        );
        for level in 0..DEPTH {
            dir.push("d");
            let next = if level + 1 == DEPTH { "dest" } else { "d" };
            prop_assert_eq!(
                Self::names(&dir),
                vec![OsString::from(next)],
                "{}",
                dir.display()
            );
        }
        prop_assert_eq!(Self::names(&self.outside()), vec![OsString::from("secret")]);
        let secret = fs::symlink_metadata(self.outside().join("secret")).expect("secret");
        prop_assert!(secret.is_file());
        prop_assert_eq!(secret.nlink(), 1, "a hard link to the secret was made");
        prop_assert_eq!(
            fs::read(self.outside().join("secret")).expect("read"),
            SECRET
        );
        Ok(())
    }

    /// Every link in `dest` resolves inside it.
    fn links_stay_inside(&self) -> Result<(), TestCaseError> {
        let dest = self.dest();
        let mut dirs = vec![PathBuf::new()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = fs::read_dir(dest.join(&dir)) else {
                continue;
            };
            for entry in entries {
                let rel = dir.join(entry.expect("entry").file_name());
                let meta = fs::symlink_metadata(dest.join(&rel)).expect("metadata");
                if meta.is_symlink() {
                    prop_assert!(
                        resolves_inside(&dest, &rel),
                        "{} leads outside (-> {:?})",
                        rel.display(),
                        fs::read_link(dest.join(&rel))
                    );
                } else if meta.is_dir() {
                    dirs.push(rel);
                }
            }
        }
        Ok(())
    }
}

/// Whether `rel` (inside `dest`) resolves, following symbolic links at every step as the
/// kernel does, to a place inside `dest`. Links that loop are harmless (opening them fails).
fn resolves_inside(dest: &Path, rel: &Path) -> bool {
    let mut pending: Vec<OsString> = rel
        .components()
        .rev()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    let mut at: Vec<OsString> = Vec::new();
    let mut follows = 0;
    while let Some(part) = pending.pop() {
        match part.to_str() {
            Some(".") => continue,
            Some("..") => {
                if at.pop().is_none() {
                    return false;
                }
                continue;
            }
            _ => {}
        }
        at.push(part);
        let here: PathBuf = at.iter().collect();
        let Ok(target) = fs::read_link(dest.join(&here)) else {
            continue;
        };
        follows += 1;
        if follows > 40 {
            return true;
        }
        at.pop();
        if target.is_absolute() {
            return false;
        }
        pending.extend(
            target
                .components()
                .rev()
                .map(|c| c.as_os_str().to_os_string()),
        );
    }
    true
}

fn component() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "c"]),
        2 => Just(".."),
        1 => Just("."),
        1 => Just("c/"),
        1 => Just(OUTSIDE),
    ]
}

/// Relative paths, or absolute ones when they start with [`OUTSIDE`] (never elsewhere: a broken
/// extraction must not write to the real file system).
fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..4).prop_map(|parts| parts.join("/"))
}

#[derive(Debug, Clone)]
enum Kind {
    File,
    Executable,
    Dir,
    Symlink(String),
    HardLink(String),
    Fifo,
    Char,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::File),
        1 => Just(Kind::Executable),
        2 => Just(Kind::Dir),
        3 => path().prop_map(Kind::Symlink),
        1 => path().prop_map(Kind::HardLink),
        1 => Just(Kind::Fifo),
        1 => Just(Kind::Char),
    ]
}

/// Writes `entries`, with [`OUTSIDE`] standing for the sandbox's `outside` directory (so an
/// absolute or `..` path can name it exactly).
fn archive(sandbox: &Sandbox, entries: &[(String, Kind)]) -> Vec<u8> {
    let outside = sandbox.outside().display().to_string();
    let real = |s: &str| s.replace(OUTSIDE, &outside);
    let mut tar = Tar::new();
    for (path, kind) in entries {
        let path = real(path);
        tar = match kind {
            Kind::File => tar.file(&path, b"data"),
            Kind::Executable => tar.entry(&path, EntryType::Regular, "", b"#!/bin/sh\n", 0o755),
            Kind::Dir => tar.entry(&path, EntryType::Directory, "", b"", 0o755),
            Kind::Symlink(target) => tar.symlink(&path, &real(target)),
            Kind::HardLink(target) => tar.entry(&path, EntryType::Link, &real(target), b"", 0o644),
            Kind::Fifo => tar.entry(&path, EntryType::Fifo, "", b"", 0o644),
            Kind::Char => tar.entry(&path, EntryType::Char, "", b"", 0o644),
        };
    }
    tar.finish()
}

fn check(sandbox: &Sandbox, archive: &[u8]) -> Result<(), TestCaseError> {
    let result = extract(archive, &sandbox.dest(), &ArchiveLimits::default());
    sandbox.untouched_outside()?;
    sandbox.links_stay_inside()?;
    if let Ok(done) = result {
        prop_assert!(done.bytes <= archive.len() as u64);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_archives_stay_inside(entries in prop::collection::vec((path(), kind()), 1..12)) {
        let sandbox = Sandbox::new();
        let bytes = archive(&sandbox, &entries);
        check(&sandbox, &bytes)?;
    }

    #[test]
    fn random_bytes_are_refused_or_contained(bytes in prop::collection::vec(any::<u8>(), 0..3000)) {
        check(&Sandbox::new(), &bytes)?;
    }

    #[test]
    fn corrupted_archives_are_refused_or_contained(
        entries in prop::collection::vec((path(), kind()), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let sandbox = Sandbox::new();
        let mut bytes = archive(&sandbox, &entries);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value;
        }
        check(&sandbox, &bytes)?;
    }
}

#[test]
fn the_resolver_sees_escapes_extract_must_refuse() {
    // The checker itself must catch what it exists to catch.
    let sandbox = Sandbox::new();
    let dest = sandbox.dest();
    std::os::unix::fs::symlink("../outside", dest.join("out")).expect("link");
    assert!(!resolves_inside(&dest, Path::new("out")));
    std::os::unix::fs::symlink(".", dest.join("self")).expect("link");
    std::os::unix::fs::symlink("self/..", dest.join("up")).expect("link");
    assert!(!resolves_inside(&dest, Path::new("up")));
    fs::create_dir(dest.join("d")).expect("dir");
    std::os::unix::fs::symlink("d/..", dest.join("ok")).expect("link");
    assert!(resolves_inside(&dest, Path::new("ok")));
}
