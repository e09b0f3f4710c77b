use std::os::unix::fs::PermissionsExt;

use super::*;

/// Builds archives byte by byte, so that tests can write what `tar::Builder` refuses to.
struct Tar(Vec<u8>);

impl Tar {
    fn new() -> Self {
        Self(Vec::new())
    }

    fn entry(mut self, path: &str, kind: EntryType, link: &str, data: &[u8], mode: u32) -> Self {
        let mut header = tar::Header::new_gnu();
        {
            let old = header.as_old_mut();
            old.name[..path.len()].copy_from_slice(path.as_bytes());
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_entry_type(kind);
        if let Some(gnu) = header.as_gnu_mut() {
            gnu.set_real_size(data.len() as u64);
        }
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        self.0.extend_from_slice(header.as_bytes());
        self.0.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.0.extend(std::iter::repeat_n(0, pad));
        self
    }

    fn file(self, path: &str, data: &[u8]) -> Self {
        self.entry(path, EntryType::Regular, "", data, 0o644)
    }

    fn symlink(self, path: &str, target: &str) -> Self {
        self.entry(path, EntryType::Symlink, target, b"", 0o777)
    }

    fn finish(mut self) -> Vec<u8> {
        self.0.extend(std::iter::repeat_n(0, 1024));
        self.0
    }
}

fn unpack(archive: &[u8]) -> (tempfile::TempDir, Result<Extracted, ExtractError>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let result = extract(archive, dir.path(), &ArchiveLimits::default());
    (dir, result)
}

#[test]
fn extracts_files_directories_links_and_modes() {
    let archive = Tar::new()
        .entry("./", EntryType::Directory, "", b"", 0o755)
        .file("main.tf", b"terraform {}")
        .entry("modules/", EntryType::Directory, "", b"", 0o700)
        .entry(
            "modules/run.sh",
            EntryType::Regular,
            "",
            b"#!/bin/sh",
            0o700,
        )
        .symlink("link.tf", "modules/run.sh")
        .symlink("modules/up", "../main.tf")
        .entry("hard.tf", EntryType::Link, "main.tf", b"", 0o644)
        .finish();
    let (dir, result) = unpack(&archive);
    let done = result.expect("extracts");
    assert_eq!(done.entries, 7);
    assert_eq!(done.bytes, 12 + 9);
    let root = dir.path();
    assert_eq!(
        fs::read(root.join("main.tf")).expect("file"),
        b"terraform {}"
    );
    assert_eq!(fs::read(root.join("link.tf")).expect("link"), b"#!/bin/sh");
    assert_eq!(
        fs::read(root.join("modules/up")).expect("link"),
        b"terraform {}"
    );
    assert_eq!(
        fs::read(root.join("hard.tf")).expect("hard link"),
        b"terraform {}"
    );
    let mode = |p: &str| {
        fs::metadata(root.join(p))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(
        mode("modules/run.sh") & 0o111,
        0o111,
        "executables stay executable"
    );
    assert_eq!(
        mode("main.tf") & 0o111,
        0,
        "others do not become executable"
    );
}

#[test]
fn real_archives_from_the_builder_extract() {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o644);
    let long = format!("{}/file.txt", "d".repeat(150));
    builder
        .append_data(&mut header, &long, &b"abc"[..])
        .expect("append");
    let archive = builder.into_inner().expect("finish");
    let (dir, result) = unpack(&archive);
    result.expect("extracts");
    assert_eq!(fs::read(dir.path().join(long)).expect("file"), b"abc");
}

#[test]
fn refuses_traversal() {
    let (dir, result) = unpack(&Tar::new().file("a/../../evil", b"x").finish());
    assert!(matches!(result, Err(ExtractError::ParentDir(p)) if p == "a/../../evil"));
    assert!(!dir.path().parent().expect("parent").join("evil").exists());
}

#[test]
fn refuses_absolute_paths() {
    let (_dir, result) = unpack(&Tar::new().file("/tmp/evil", b"x").finish());
    assert!(matches!(result, Err(ExtractError::AbsolutePath(p)) if p == "/tmp/evil"));
}

#[test]
fn refuses_symlinks_pointing_outside() {
    for target in ["/etc/passwd", "../outside", "a/../../outside"] {
        let (_dir, result) = unpack(&Tar::new().symlink("link", target).finish());
        assert!(
            matches!(&result, Err(ExtractError::LinkEscapes { target: t, .. }) if t == target),
            "{target}: {result:?}"
        );
    }
}

#[test]
fn refuses_chains_of_links_escaping() {
    // `b` is the root; `b/..` is lexically inside but physically the root's parent.
    let archive = Tar::new().symlink("b", ".").symlink("a", "b/..").finish();
    let (_dir, result) = unpack(&archive);
    assert!(
        matches!(&result, Err(ExtractError::LinkEscapes { path, .. }) if path == "a"),
        "{result:?}"
    );

    // The first link is fine when written, and only escapes once the second one exists.
    let archive = Tar::new()
        .entry("d/", EntryType::Directory, "", b"", 0o755)
        .symlink("a", "d/x/..")
        .symlink("d/x", "..")
        .finish();
    let (_dir, result) = unpack(&archive);
    assert!(
        matches!(&result, Err(ExtractError::LinkEscapes { .. })),
        "{result:?}"
    );
}

#[test]
fn refuses_link_loops() {
    let archive = Tar::new().symlink("a", "b").symlink("b", "a").finish();
    let (_dir, result) = unpack(&archive);
    assert!(
        matches!(result, Err(ExtractError::LinkLoop { .. })),
        "{result:?}"
    );
}

#[test]
fn refuses_writing_through_a_link() {
    let archive = Tar::new()
        .entry("sub/", EntryType::Directory, "", b"", 0o755)
        .symlink("inside", "sub")
        .file("inside/file", b"x")
        .finish();
    let (dir, result) = unpack(&archive);
    assert!(
        matches!(&result, Err(ExtractError::ThroughLink(p)) if p == "inside/file"),
        "{result:?}"
    );
    assert!(!dir.path().join("sub/file").exists());
}

#[test]
fn replacing_a_link_with_a_file_does_not_follow_it() {
    let archive = Tar::new().symlink("f", "g").file("f", b"new").finish();
    let (dir, result) = unpack(&archive);
    result.expect("extracts");
    assert_eq!(fs::read(dir.path().join("f")).expect("file"), b"new");
    assert!(
        !fs::symlink_metadata(dir.path().join("f"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    assert!(
        !dir.path().join("g").exists(),
        "the old link's target is not written"
    );
}

#[test]
fn refuses_hard_links_to_missing_or_outside_files() {
    let (_dir, result) = unpack(
        &Tar::new()
            .entry("h", EntryType::Link, "nope", b"", 0o644)
            .finish(),
    );
    assert!(
        matches!(result, Err(ExtractError::MissingLinkTarget { .. })),
        "{result:?}"
    );
    let (_dir, result) = unpack(
        &Tar::new()
            .entry("h", EntryType::Link, "/etc/passwd", b"", 0o644)
            .finish(),
    );
    assert!(
        matches!(result, Err(ExtractError::AbsolutePath(_))),
        "{result:?}"
    );
    let (_dir, result) = unpack(
        &Tar::new()
            .entry("h", EntryType::Link, "../x", b"", 0o644)
            .finish(),
    );
    assert!(
        matches!(result, Err(ExtractError::ParentDir(_))),
        "{result:?}"
    );
}

#[test]
fn refuses_devices_fifos_and_sparse_files() {
    for (kind, name) in [
        (EntryType::Char, "character device"),
        (EntryType::Block, "block device"),
        (EntryType::Fifo, "FIFO"),
        (EntryType::GNUSparse, "sparse file"),
    ] {
        let (_dir, result) = unpack(&Tar::new().entry("dev", kind, "", b"", 0o644).finish());
        assert!(
            matches!(&result, Err(ExtractError::Unsupported { kind, .. }) if *kind == name),
            "{name}: {result:?}"
        );
    }
}

#[test]
fn refuses_oversized_archives_files_and_entry_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Tar::new()
        .file("big", &[7; 2000])
        .file("small", b"x")
        .finish();
    let limits = |archive, file, entries| ArchiveLimits {
        max_archive_bytes: archive,
        max_file_bytes: file,
        max_entries: entries,
    };
    let result = extract(&archive, dir.path(), &limits(1024, 1 << 20, 10));
    assert!(
        matches!(
            result,
            Err(ExtractError::ArchiveTooLarge { limit: 1024, .. })
        ),
        "{result:?}"
    );
    let result = extract(&archive, dir.path(), &limits(1 << 20, 1000, 10));
    assert!(
        matches!(&result, Err(ExtractError::FileTooLarge { path, size: 2000, limit: 1000 }) if path == "big"),
        "{result:?}"
    );
    assert!(
        !dir.path().join("big").exists(),
        "nothing is written for a refused file"
    );
    let result = extract(
        &archive,
        tempfile::tempdir().expect("tempdir").path(),
        &limits(1 << 20, 1 << 20, 1),
    );
    assert!(
        matches!(result, Err(ExtractError::TooManyEntries(1))),
        "{result:?}"
    );
}

#[test]
fn garbage_is_a_corrupt_archive() {
    let (_dir, result) = unpack(&[0xAB; 600]);
    assert!(
        matches!(result, Err(ExtractError::Corrupt(_))),
        "{result:?}"
    );
    let (_dir, result) = unpack(&[]);
    assert_eq!(
        result.expect("an empty archive is empty"),
        Extracted::default()
    );
}

#[test]
fn errors_name_the_entry() {
    let (_dir, result) = unpack(&Tar::new().symlink("x", "../y").finish());
    let message = result.expect_err("refused").to_string();
    assert_eq!(message, "x: the link target ../y is outside the template");
}

mod props;

#[test]
fn reads_named_files_in_memory_as_extracting_would_leave_them() {
    let archive = Tar::new()
        .entry("./", EntryType::Directory, "", b"", 0o755)
        .file("./echo.json", b"{}")
        .file("sub/README.md", b"not the root one")
        .file("README.md", b"# first")
        .file("README.md", b"# last")
        .finish();
    let [json, readme, missing] =
        read_files(&archive, ["echo.json", "README.md", "main.tf"]).expect("readable");
    assert_eq!(json.as_deref(), Some(&b"{}"[..]));
    assert_eq!(readme.as_deref(), Some(&b"# last"[..]));
    assert_eq!(missing, None);

    let linked = Tar::new()
        .file("other.json", b"{}")
        .symlink("echo.json", "other.json")
        .finish();
    assert!(matches!(
        read_files(&linked, ["echo.json"]),
        Err(ExtractError::NotAFile(path)) if path == "echo.json"
    ));
    let escaping = Tar::new().file("../echo.json", b"{}").finish();
    assert!(matches!(
        read_files(&escaping, ["echo.json"]),
        Err(ExtractError::ParentDir(_))
    ));
    assert!(matches!(
        read_files(&[1; 700], ["echo.json"]),
        Err(ExtractError::Corrupt(_))
    ));
}
