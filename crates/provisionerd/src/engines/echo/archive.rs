//! Building echo template archives, for tests and benchmarks of coderd and the CLI.

use super::format::{EchoTemplate, FILE_NAME};

/// A tar archive holding `template` as `echo.json`.
pub fn archive(template: &EchoTemplate) -> Vec<u8> {
    archive_with_files(template, &[])
}

/// A tar archive holding `template` as `echo.json` plus other files (`README.md`, say), given
/// as relative paths and contents.
pub fn archive_with_files(template: &EchoTemplate, files: &[(&str, &[u8])]) -> Vec<u8> {
    // Echo templates hold only plain data and string-keyed maps, which always serialise.
    let json = serde_json::to_vec_pretty(template).unwrap_or_default();
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in std::iter::once((FILE_NAME, json.as_slice())).chain(files.iter().copied()) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        // Writing into memory cannot fail; a path tar refuses (absolute, `..`) is a bug in
        // the calling test, which then finds the file missing.
        if let Err(e) = builder.append_data(&mut header, path, data) {
            tracing::error!(path, error = %e, "cannot add a file to an echo archive");
        }
    }
    builder.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::echo::format::BuildStage;

    #[test]
    fn archives_round_trip() {
        let template = EchoTemplate {
            start: Some(BuildStage {
                delay_ms: 5,
                ..BuildStage::default()
            }),
            ..EchoTemplate::default()
        };
        let bytes = archive_with_files(&template, &[("README.md", b"# hi")]);
        let mut tar = tar::Archive::new(bytes.as_slice());
        let mut found = Vec::new();
        for entry in tar.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let path = entry.path().expect("path").display().to_string();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).expect("read");
            found.push((path, data));
        }
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, FILE_NAME);
        let parsed: EchoTemplate = serde_json::from_slice(&found[0].1).expect("json");
        assert_eq!(parsed, template);
        assert_eq!(found[1], ("README.md".to_string(), b"# hi".to_vec()));
    }
}
