//! Unpacking a template's tar archive into a job's work directory, refusing anything that could
//! reach outside it or exhaust the host: absolute paths, `..`, links resolving outside (also
//! through chains of links), writes through links, device and FIFO entries, sparse files, and
//! archives, files or entry counts over the limits.
//!
//! Ownership and modes are not restored: files are `0644`, or `0755` when any execute bit is
//! set, and directories `0755`.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    pub max_archive_bytes: u64,
    pub max_file_bytes: u64,
    pub max_entries: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_archive_bytes: 100 << 20,
            max_file_bytes: 100 << 20,
            max_entries: 100_000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("the template archive is {size} bytes, over the limit of {limit}")]
    ArchiveTooLarge { size: u64, limit: u64 },
    #[error("{path} is {size} bytes, over the limit of {limit} per file")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("the template archive has more than {0} entries")]
    TooManyEntries(usize),
    #[error("{0}: absolute paths are not allowed in a template archive")]
    AbsolutePath(String),
    #[error("{0}: `..` is not allowed in a template archive path")]
    ParentDir(String),
    #[error("{path}: the link target {target} is outside the template")]
    LinkEscapes { path: String, target: String },
    #[error("{path}: the hard link target {target} is not a file extracted before it")]
    MissingLinkTarget { path: String, target: String },
    #[error("{path}: too many levels of symbolic links")]
    LinkLoop { path: String },
    #[error("{0}: the path goes through a symbolic link")]
    ThroughLink(String),
    #[error("{path}: {kind} entries are not allowed in a template archive")]
    Unsupported { path: String, kind: &'static str },
    #[error(
        "{0} must be a regular file: the engine reads it from the archive, without following links"
    )]
    NotAFile(String),
    #[error("{path} conflicts with an earlier entry")]
    Conflict { path: String },
    #[error("the template archive is not a valid tar file: {0}")]
    Corrupt(io::Error),
    #[error("extracting {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// What was extracted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extracted {
    pub entries: usize,
    pub bytes: u64,
}

/// Symbolic links may be followed this many times while resolving one path (Linux's limit).
const MAX_LINK_FOLLOWS: usize = 40;

/// Extracts `archive` into `dest`, which must exist.
pub fn extract(
    archive: &[u8],
    dest: &Path,
    limits: &ArchiveLimits,
) -> Result<Extracted, ExtractError> {
    let size = archive.len() as u64;
    if size > limits.max_archive_bytes {
        return Err(ExtractError::ArchiveTooLarge {
            size,
            limit: limits.max_archive_bytes,
        });
    }
    let mut tar = tar::Archive::new(archive);
    let mut done = Extracted::default();
    let mut links = Vec::new();
    for entry in tar.entries().map_err(ExtractError::Corrupt)? {
        let mut entry = entry.map_err(ExtractError::Corrupt)?;
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            continue;
        }
        done.entries += 1;
        if done.entries > limits.max_entries {
            return Err(ExtractError::TooManyEntries(limits.max_entries));
        }
        let raw = entry.path().map_err(ExtractError::Corrupt)?.into_owned();
        let shown = raw.display().to_string();
        let Some(rel) = relative(&raw, &shown)? else {
            continue; // the archive root itself
        };
        match kind {
            EntryType::Directory => make_dirs(dest, &rel, &shown)?,
            EntryType::Regular | EntryType::Continuous => {
                let size = entry.size();
                if size > limits.max_file_bytes {
                    return Err(ExtractError::FileTooLarge {
                        path: shown,
                        size,
                        limit: limits.max_file_bytes,
                    });
                }
                let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                let target = prepare_file(dest, &rel, &shown)?;
                let mode = if executable { 0o755 } else { 0o644 };
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&target)
                    .map_err(|e| io_error(&shown, e))?;
                let written = io::copy(&mut (&mut entry).take(limits.max_file_bytes), &mut file)
                    .map_err(|e| io_error(&shown, e))?;
                done.bytes += written;
            }
            EntryType::Symlink => {
                let target = link_target(&entry, &shown)?;
                check_link(dest, &rel, &target, &shown)?;
                let at = prepare_file(dest, &rel, &shown)?;
                std::os::unix::fs::symlink(&target, &at).map_err(|e| io_error(&shown, e))?;
                links.push((rel, shown));
            }
            EntryType::Link => {
                let target = link_target(&entry, &shown)?;
                let target_shown = target.display().to_string();
                let Some(target_rel) = relative(&target, &target_shown)? else {
                    return Err(ExtractError::Conflict { path: shown });
                };
                let source = dest.join(&target_rel);
                let is_file = through_no_link(dest, &target_rel, &target_shown)?
                    && fs::symlink_metadata(&source).is_ok_and(|m| m.is_file());
                if !is_file {
                    return Err(ExtractError::MissingLinkTarget {
                        path: shown,
                        target: target_shown,
                    });
                }
                let at = prepare_file(dest, &rel, &shown)?;
                fs::hard_link(&source, &at).map_err(|e| io_error(&shown, e))?;
            }
            other => {
                return Err(ExtractError::Unsupported {
                    path: shown,
                    kind: kind_name(other),
                });
            }
        }
    }
    // A later link can change where an earlier one leads, so check them all again at the end.
    for (rel, shown) in &links {
        // A link a later entry replaced is no longer one.
        if let Ok(target) = fs::read_link(dest.join(rel)) {
            check_link(dest, rel, &target, shown)?;
        }
    }
    Ok(done)
}

/// Reads the files at `names` (relative paths) out of `archive` in memory, without extracting
/// anything: for an engine that needs a file or two of its template, not a work directory. A
/// file appearing twice is its last entry, as extracting it would leave it. Paths are checked
/// as [`extract`] checks them; a link at one of `names` is refused (it is not followed).
pub fn read_files<const N: usize>(
    archive: &[u8],
    names: [&str; N],
) -> Result<[Option<Vec<u8>>; N], ExtractError> {
    let mut found = std::array::from_fn(|_| None);
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().map_err(ExtractError::Corrupt)? {
        let mut entry = entry.map_err(ExtractError::Corrupt)?;
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            continue;
        }
        let raw = entry.path().map_err(ExtractError::Corrupt)?.into_owned();
        let shown = raw.display().to_string();
        let Some(rel) = relative(&raw, &shown)? else {
            continue;
        };
        let Some(at) = names.iter().position(|n| rel == Path::new(n)) else {
            continue;
        };
        match kind {
            EntryType::Regular | EntryType::Continuous => {
                let mut data = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
                entry
                    .read_to_end(&mut data)
                    .map_err(|e| io_error(&shown, e))?;
                found[at] = Some(data);
            }
            EntryType::Directory => found[at] = None,
            _ => return Err(ExtractError::NotAFile(shown)),
        }
    }
    Ok(found)
}

fn io_error(path: &str, source: io::Error) -> ExtractError {
    ExtractError::Io {
        path: path.to_string(),
        source,
    }
}

fn kind_name(kind: EntryType) -> &'static str {
    match kind {
        EntryType::Char => "character device",
        EntryType::Block => "block device",
        EntryType::Fifo => "FIFO",
        EntryType::GNUSparse => "sparse file",
        _ => "unknown",
    }
}

fn link_target<R: Read>(entry: &tar::Entry<'_, R>, shown: &str) -> Result<PathBuf, ExtractError> {
    match entry.link_name().map_err(ExtractError::Corrupt)? {
        Some(target) => Ok(target.into_owned()),
        None => Err(ExtractError::Corrupt(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{shown}: a link without a target"),
        ))),
    }
}

/// The entry's path as plain components; `None` for the root itself.
fn relative(path: &Path, shown: &str) -> Result<Option<PathBuf>, ExtractError> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(c) => rel.push(c),
            Component::CurDir => {}
            Component::ParentDir => return Err(ExtractError::ParentDir(shown.to_string())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(ExtractError::AbsolutePath(shown.to_string()));
            }
        }
    }
    Ok((!rel.as_os_str().is_empty()).then_some(rel))
}

/// Creates `rel` and its parents as real directories, refusing to pass through a link.
fn make_dirs(dest: &Path, rel: &Path, shown: &str) -> Result<(), ExtractError> {
    let mut at = dest.to_path_buf();
    for component in rel.components() {
        at.push(component);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ExtractError::ThroughLink(shown.to_string()));
            }
            Ok(_) => {
                return Err(ExtractError::Conflict {
                    path: shown.to_string(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&at).map_err(|e| io_error(shown, e))?;
            }
            Err(e) => return Err(io_error(shown, e)),
        }
    }
    Ok(())
}

/// Makes room for a file, link or hard link at `rel`: its parents become directories, and an
/// earlier file or link of the same name is replaced (as tar does); a directory is not.
fn prepare_file(dest: &Path, rel: &Path, shown: &str) -> Result<PathBuf, ExtractError> {
    if let Some(parent) = rel.parent() {
        make_dirs(dest, parent, shown)?;
    }
    let at = dest.join(rel);
    match fs::symlink_metadata(&at) {
        Ok(meta) if meta.is_dir() => Err(ExtractError::Conflict {
            path: shown.to_string(),
        }),
        Ok(_) => {
            fs::remove_file(&at).map_err(|e| io_error(shown, e))?;
            Ok(at)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(at),
        Err(e) => Err(io_error(shown, e)),
    }
}

/// Whether the existing parents of `rel` are all real directories.
fn through_no_link(dest: &Path, rel: &Path, shown: &str) -> Result<bool, ExtractError> {
    let mut at = dest.to_path_buf();
    let Some(parent) = rel.parent() else {
        return Ok(true);
    };
    for component in parent.components() {
        at.push(component);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(shown, e)),
        }
    }
    Ok(true)
}

/// Resolves the link at `rel` pointing to `target` the way the kernel would, following links
/// already extracted, and fails if any step leaves `dest`. Parts that do not exist yet are
/// resolved lexically.
fn check_link(dest: &Path, rel: &Path, target: &Path, shown: &str) -> Result<(), ExtractError> {
    let escapes = || ExtractError::LinkEscapes {
        path: shown.to_string(),
        target: target.display().to_string(),
    };
    let mut resolved: Vec<OsString> = rel
        .parent()
        .map(|p| p.iter().map(OsString::from).collect())
        .unwrap_or_default();
    let mut pending: Vec<OsString> = Vec::new();
    push_front(&mut pending, target).ok_or_else(escapes)?;
    let mut follows = 0;
    while let Some(component) = pending.pop() {
        if component == ".." {
            resolved.pop().ok_or_else(escapes)?;
            continue;
        }
        let mut at = dest.to_path_buf();
        at.extend(&resolved);
        at.push(&component);
        match fs::read_link(&at) {
            Ok(next) => {
                follows += 1;
                if follows > MAX_LINK_FOLLOWS {
                    return Err(ExtractError::LinkLoop {
                        path: shown.to_string(),
                    });
                }
                push_front(&mut pending, &next).ok_or_else(escapes)?;
            }
            Err(_) => resolved.push(component),
        }
    }
    Ok(())
}

/// Queues `path`'s components to be resolved next (`pending` is a stack: last is next);
/// `None` when the path is absolute.
fn push_front(pending: &mut Vec<OsString>, path: &Path) -> Option<()> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(c) => parts.push(c.to_os_string()),
            Component::ParentDir => parts.push(OsString::from("..")),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    pending.extend(parts.into_iter().rev());
    Some(())
}

#[cfg(test)]
mod tests;
