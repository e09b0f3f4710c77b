//! Running the `coder` binary the way a user does: its own config directory, no inherited
//! CODER_* settings.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const CODER: &str = env!("CARGO_BIN_EXE_coder");

/// A `coder` invocation with a private config directory.
pub struct Coder {
    pub config: tempfile::TempDir,
}

impl Coder {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            config: tempfile::Builder::new()
                .prefix("coder-cli-")
                .tempdir_in("/tmp")?,
        })
    }

    pub fn config_dir(&self) -> &Path {
        self.config.path()
    }

    pub fn command(&self) -> Command {
        command_with_config(self.config.path().to_path_buf())
    }

    /// Runs to completion and returns the output, whatever the exit status.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        Ok(self.command().args(args).stdin(Stdio::null()).output()?)
    }

    /// Runs and fails the test with both streams when the command fails.
    pub fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run(args)?;
        anyhow::ensure!(
            out.status.success(),
            "coder {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Runs with `input` on stdin.
    pub fn with_stdin(&self, args: &[&str], input: &str) -> anyhow::Result<Output> {
        use std::io::Write;
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdin"))?
            .write_all(input.as_bytes())?;
        Ok(child.wait_with_output()?)
    }
}

pub fn command_with_config(config: PathBuf) -> Command {
    let mut cmd = Command::new(CODER);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CODER_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CODER_CONFIG_DIR", config);
    cmd.env("NO_COLOR", "1");
    cmd
}
