//! The CLI's configuration directory: the deployment URL and session token `coder login` saves,
//! one small file each, as Coder's CLI keeps them.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use url::Url;

#[derive(Debug, Clone)]
pub struct ConfigDir(PathBuf);

impl ConfigDir {
    pub fn new(dir: PathBuf) -> Self {
        Self(dir)
    }

    /// `$XDG_CONFIG_HOME/coderv2` (usually `~/.config/coderv2`).
    pub fn default_location() -> anyhow::Result<Self> {
        let base =
            dirs::config_dir().context("cannot find a config directory; pass --global-config")?;
        Ok(Self(base.join("coderv2")))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    fn read(&self, name: &str) -> anyhow::Result<Option<String>> {
        match std::fs::read_to_string(self.0.join(name)) {
            Ok(s) if s.trim().is_empty() => Ok(None),
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.0.join(name).display())),
        }
    }

    /// Writes a file readable by its owner only: it may hold a secret.
    fn write(&self, name: &str, value: &str) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.0)
            .with_context(|| format!("creating {}", self.0.display()))?;
        let path = self.0.join(name);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        file.write_all(value.as_bytes())?;
        Ok(())
    }

    fn remove(&self, name: &str) -> anyhow::Result<()> {
        match std::fs::remove_file(self.0.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    pub fn url(&self) -> anyhow::Result<Option<Url>> {
        self.read("url")?
            .map(|s| Url::parse(&s).context("the saved URL is invalid; run 'coder login <url>'"))
            .transpose()
    }

    pub fn session(&self) -> anyhow::Result<Option<String>> {
        self.read("session")
    }

    pub fn save_login(&self, url: &Url, token: &str) -> anyhow::Result<()> {
        self.write("url", url.as_str())?;
        self.write("session", token)
    }

    pub fn clear_session(&self) -> anyhow::Result<()> {
        self.remove("session")
    }
}
