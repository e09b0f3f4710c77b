//! The `sftp` subsystem's file system: what russh-sftp's protocol engine asks of it, done on
//! the workspace's files as the agent's user. Relative paths start at the home directory,
//! where sftp and scp (OpenSSH 9 uses sftp for scp) land, as with OpenSSH's sftp-server.
//! Built in rather than running the system's sftp-server so that it works in any image.

use std::collections::HashMap;
use std::io::{self, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use russh_sftp::protocol::{
    Attrs, Data, File, FileAttributes, Handle, Name, OpenFlags, Status, StatusCode, Version,
};
use russh_sftp::server::StatusReply;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// Largest read answered at once (the client asks for 32 KiB; some ask for more).
const MAX_READ: u32 = 256 << 10;

enum Open {
    File(tokio::fs::File),
    /// A directory's entries, handed out on the first read; the next read is the end.
    Dir(Option<Vec<File>>),
}

pub(super) struct Files {
    home: PathBuf,
    handles: HashMap<String, Open>,
    next_handle: u64,
}

impl Files {
    pub(super) fn new(home: PathBuf) -> Self {
        Self {
            home,
            handles: HashMap::new(),
            next_handle: 0,
        }
    }

    fn path(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.home.clone()
        } else {
            self.home.join(path)
        }
    }

    fn add(&mut self, open: Open) -> String {
        self.next_handle += 1;
        let handle = self.next_handle.to_string();
        self.handles.insert(handle.clone(), open);
        handle
    }

    fn file(&mut self, handle: &str) -> Result<&mut tokio::fs::File, StatusReply> {
        match self.handles.get_mut(handle) {
            Some(Open::File(file)) => Ok(file),
            _ => Err(StatusReply::new(StatusCode::Failure).with_message("no such file handle")),
        }
    }
}

fn ok(id: u32) -> Status {
    Status {
        id,
        status_code: StatusCode::Ok,
        error_message: "Ok".into(),
        language_tag: "en-US".into(),
    }
}

fn failure(error: io::Error) -> StatusReply {
    let code = match error.kind() {
        io::ErrorKind::NotFound => StatusCode::NoSuchFile,
        io::ErrorKind::PermissionDenied => StatusCode::PermissionDenied,
        _ => StatusCode::Failure,
    };
    StatusReply::new(code).with_message(error.to_string())
}

/// `path` without `.` and with `..` applied, for paths that do not exist (yet).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Applies what a setstat asks for that a user may change: permissions, size, times.
async fn set_attributes(path: &Path, attrs: &FileAttributes) -> io::Result<()> {
    if let Some(mode) = attrs.permissions {
        tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777)).await?;
    }
    if let Some(size) = attrs.size {
        tokio::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .await?
            .set_len(size)
            .await?;
    }
    if let (Some(atime), Some(mtime)) = (attrs.atime, attrs.mtime) {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let time = |secs: u32| nix::sys::time::TimeSpec::new(i64::from(secs), 0);
            nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &path,
                &time(atime),
                &time(mtime),
                nix::sys::stat::UtimensatFlags::FollowSymlink,
            )
            .map_err(io::Error::from)
        })
        .await
        .map_err(io::Error::other)??;
    }
    Ok(())
}

impl russh_sftp::server::Handler for Files {
    type Error = StatusReply;

    fn unimplemented(&self) -> Self::Error {
        StatusReply::new(StatusCode::OpUnsupported)
    }

    async fn init(
        &mut self,
        _version: u32,
        _extensions: HashMap<String, String>,
    ) -> Result<Version, Self::Error> {
        Ok(Version::new())
    }

    async fn open(
        &mut self,
        id: u32,
        filename: String,
        pflags: OpenFlags,
        attrs: FileAttributes,
    ) -> Result<Handle, Self::Error> {
        let mut options = tokio::fs::OpenOptions::new();
        options
            .read(pflags.contains(OpenFlags::READ))
            .write(pflags.contains(OpenFlags::WRITE) || pflags.contains(OpenFlags::APPEND))
            .append(pflags.contains(OpenFlags::APPEND))
            .truncate(pflags.contains(OpenFlags::TRUNCATE));
        if pflags.contains(OpenFlags::EXCLUDE) {
            options.create_new(true);
        } else if pflags.contains(OpenFlags::CREATE) {
            options.create(true);
        }
        options.mode(attrs.permissions.map_or(0o666, |mode| mode & 0o7777));
        let file = options.open(self.path(&filename)).await.map_err(failure)?;
        Ok(Handle {
            id,
            handle: self.add(Open::File(file)),
        })
    }

    async fn close(&mut self, id: u32, handle: String) -> Result<Status, Self::Error> {
        match self.handles.remove(&handle) {
            Some(Open::File(mut file)) => file.flush().await.map_err(failure)?,
            Some(Open::Dir(_)) => {}
            None => return Err(StatusReply::new(StatusCode::Failure)),
        }
        Ok(ok(id))
    }

    async fn read(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        len: u32,
    ) -> Result<Data, Self::Error> {
        let file = self.file(&handle)?;
        file.seek(SeekFrom::Start(offset)).await.map_err(failure)?;
        let mut data = vec![0u8; len.min(MAX_READ) as usize];
        let mut filled = 0;
        while filled < data.len() {
            let n = file.read(&mut data[filled..]).await.map_err(failure)?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            return Err(StatusReply::new(StatusCode::Eof));
        }
        data.truncate(filled);
        Ok(Data { id, data })
    }

    async fn write(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        file.seek(SeekFrom::Start(offset)).await.map_err(failure)?;
        file.write_all(&data).await.map_err(failure)?;
        Ok(ok(id))
    }

    async fn lstat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let metadata = tokio::fs::symlink_metadata(self.path(&path))
            .await
            .map_err(failure)?;
        Ok(Attrs {
            id,
            attrs: FileAttributes::from(&metadata),
        })
    }

    async fn stat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        let metadata = tokio::fs::metadata(self.path(&path))
            .await
            .map_err(failure)?;
        Ok(Attrs {
            id,
            attrs: FileAttributes::from(&metadata),
        })
    }

    async fn fstat(&mut self, id: u32, handle: String) -> Result<Attrs, Self::Error> {
        let metadata = self.file(&handle)?.metadata().await.map_err(failure)?;
        Ok(Attrs {
            id,
            attrs: FileAttributes::from(&metadata),
        })
    }

    async fn setstat(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        set_attributes(&self.path(&path), &attrs)
            .await
            .map_err(failure)?;
        Ok(ok(id))
    }

    async fn fsetstat(
        &mut self,
        id: u32,
        handle: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let file = self.file(&handle)?;
        if let Some(mode) = attrs.permissions {
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
                .await
                .map_err(failure)?;
        }
        if let Some(size) = attrs.size {
            file.set_len(size).await.map_err(failure)?;
        }
        if let (Some(atime), Some(mtime)) = (attrs.atime, attrs.mtime) {
            let file = file.try_clone().await.map_err(failure)?.into_std().await;
            tokio::task::spawn_blocking(move || {
                let time = |secs: u32| nix::sys::time::TimeSpec::new(i64::from(secs), 0);
                nix::sys::stat::futimens(&file, &time(atime), &time(mtime)).map_err(io::Error::from)
            })
            .await
            .map_err(|e| failure(io::Error::other(e)))?
            .map_err(failure)?;
        }
        Ok(ok(id))
    }

    async fn opendir(&mut self, id: u32, path: String) -> Result<Handle, Self::Error> {
        let dir = self.path(&path);
        let mut entries = tokio::fs::read_dir(&dir).await.map_err(failure)?;
        let mut files = Vec::new();
        for name in [".", ".."] {
            if let Ok(metadata) = tokio::fs::metadata(dir.join(name)).await {
                files.push(File::new(name, FileAttributes::from(&metadata)));
            }
        }
        while let Some(entry) = entries.next_entry().await.map_err(failure)? {
            // An entry removed since the listing started is simply left out.
            if let Ok(metadata) = tokio::fs::symlink_metadata(entry.path()).await {
                let name = entry.file_name().to_string_lossy().into_owned();
                files.push(File::new(name, FileAttributes::from(&metadata)));
            }
        }
        Ok(Handle {
            id,
            handle: self.add(Open::Dir(Some(files))),
        })
    }

    async fn readdir(&mut self, id: u32, handle: String) -> Result<Name, Self::Error> {
        match self.handles.get_mut(&handle) {
            Some(Open::Dir(files)) => match files.take() {
                Some(files) => Ok(Name { id, files }),
                None => Err(StatusReply::new(StatusCode::Eof)),
            },
            _ => Err(StatusReply::new(StatusCode::Failure)),
        }
    }

    async fn remove(&mut self, id: u32, filename: String) -> Result<Status, Self::Error> {
        tokio::fs::remove_file(self.path(&filename))
            .await
            .map_err(failure)?;
        Ok(ok(id))
    }

    async fn mkdir(
        &mut self,
        id: u32,
        path: String,
        attrs: FileAttributes,
    ) -> Result<Status, Self::Error> {
        let mut builder = tokio::fs::DirBuilder::new();
        builder.mode(attrs.permissions.map_or(0o777, |mode| mode & 0o7777));
        builder.create(self.path(&path)).await.map_err(failure)?;
        Ok(ok(id))
    }

    async fn rmdir(&mut self, id: u32, path: String) -> Result<Status, Self::Error> {
        tokio::fs::remove_dir(self.path(&path))
            .await
            .map_err(failure)?;
        Ok(ok(id))
    }

    async fn realpath(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let joined = self.path(&path);
        let real = tokio::fs::canonicalize(&joined)
            .await
            .unwrap_or_else(|_| normalize(&joined));
        Ok(Name {
            id,
            files: vec![File::dummy(real.to_string_lossy())],
        })
    }

    async fn rename(
        &mut self,
        id: u32,
        oldpath: String,
        newpath: String,
    ) -> Result<Status, Self::Error> {
        tokio::fs::rename(self.path(&oldpath), self.path(&newpath))
            .await
            .map_err(failure)?;
        Ok(ok(id))
    }

    async fn readlink(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        let target = tokio::fs::read_link(self.path(&path))
            .await
            .map_err(failure)?;
        Ok(Name {
            id,
            files: vec![File::dummy(target.to_string_lossy())],
        })
    }

    /// OpenSSH's clients send the link's target first and the new link's path second (the
    /// reverse of the draft's order, kept for compatibility by every server): follow them.
    async fn symlink(
        &mut self,
        id: u32,
        linkpath: String,
        targetpath: String,
    ) -> Result<Status, Self::Error> {
        tokio::fs::symlink(&linkpath, self.path(&targetpath))
            .await
            .map_err(failure)?;
        Ok(ok(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_do_not_exist_normalize_lexically() {
        assert_eq!(
            normalize(Path::new("/home/a/./b/../c")),
            Path::new("/home/a/c")
        );
        assert_eq!(normalize(Path::new("/../x")), Path::new("/x"));
    }
}
