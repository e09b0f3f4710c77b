//! Template archives between the two forms Coder's clients send and ask for: tar (what
//! provisioners unpack and what is stored) and zip (what people make on desktops). Only
//! regular files and directories cross over; links and special entries stay behind, as
//! Coder's conversion leaves them.

use std::io::{Cursor, Read, Write};

/// The most a zip may unpack to; a small upload must not expand without bound.
const MAX_UNPACKED: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not a valid zip archive: {0}")]
    Zip(#[from] zip::result::ZipError),
    #[error("not a valid tar archive: {0}")]
    Tar(std::io::Error),
    #[error("the archive unpacks to more than {} MiB", MAX_UNPACKED >> 20)]
    TooLarge,
}

/// A zip archive as tar.
pub fn zip_to_tar(zip: &[u8]) -> Result<Vec<u8>, Error> {
    let mut archive = zip::ZipArchive::new(Cursor::new(zip))?;
    let mut builder = tar::Builder::new(Vec::new());
    let mut total = 0u64;
    for i in 0..archive.len() {
        let mut file = archive.by_index(i)?;
        // `enclosed_name` drops entries that would leave the directory they unpack in.
        let Some(path) = file.enclosed_name() else {
            continue;
        };
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        if file.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder
                .append_data(&mut header, &path, std::io::empty())
                .map_err(Error::Tar)?;
            continue;
        }
        total = total.saturating_add(file.size());
        if total > MAX_UNPACKED {
            return Err(Error::TooLarge);
        }
        let mut data = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
        file.by_ref()
            .take(MAX_UNPACKED)
            .read_to_end(&mut data)
            .map_err(|e| Error::Zip(e.into()))?;
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(file.unix_mode().unwrap_or(0o644) & 0o777);
        header.set_size(data.len() as u64);
        builder
            .append_data(&mut header, &path, data.as_slice())
            .map_err(Error::Tar)?;
    }
    builder.into_inner().map_err(Error::Tar)
}

/// A tar archive as zip.
pub fn tar_to_zip(tar: &[u8]) -> Result<Vec<u8>, Error> {
    let mut archive = tar::Archive::new(tar);
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for entry in archive.entries().map_err(Error::Tar)? {
        let mut entry = entry.map_err(Error::Tar)?;
        let path = entry.path().map_err(Error::Tar)?.display().to_string();
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(mode);
        match entry.header().entry_type() {
            tar::EntryType::Directory => zip.add_directory(path, options)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                zip.start_file(path, options)?;
                let mut data = Vec::new();
                entry.read_to_end(&mut data).map_err(Error::Tar)?;
                zip.write_all(&data).map_err(|e| Error::Zip(e.into()))?;
            }
            _ => {}
        }
    }
    Ok(zip.finish()?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tar_survives_the_round_trip_through_zip() {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data) in [("main.tf", &b"resource {}"[..]), ("dir/a.sh", b"echo hi")] {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o755);
            builder
                .append_data(&mut header, name, data)
                .expect("append");
        }
        let tar = builder.into_inner().expect("tar");
        let back = zip_to_tar(&tar_to_zip(&tar).expect("to zip")).expect("to tar");
        let mut archive = tar::Archive::new(back.as_slice());
        let mut found = Vec::new();
        for entry in archive.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let mut data = String::new();
            entry.read_to_string(&mut data).expect("read");
            let mode = entry.header().mode().expect("mode");
            found.push((
                entry.path().expect("path").display().to_string(),
                data,
                mode,
            ));
        }
        assert_eq!(
            found,
            vec![
                ("main.tf".to_string(), "resource {}".to_string(), 0o755),
                ("dir/a.sh".to_string(), "echo hi".to_string(), 0o755),
            ]
        );
    }

    #[test]
    fn garbage_is_refused() {
        assert!(zip_to_tar(b"not a zip").is_err());
    }
}
