//! What a user's session in the workspace runs: SSH shells and commands, and the web
//! terminal's PTYs. They share the scripts' world (shell, directory, the manifest's environment
//! and Coder's variables, see [`crate::environment`]) plus what OpenSSH's sshd sets for a
//! login (`USER`, `SSH_CLIENT`, `SSH_CONNECTION`, `TERM`), the variables the client asked for,
//! and the MOTD on login shells.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Config;
use crate::connection::Session;
use crate::environment::{UserInfo, shell_for};
use crate::process::ShellCommand;
use crate::scripts::bin_dir;

/// A client's request for the kind of session, counted in stats and never passed on to the
/// command (Coder's `CODER_SSH_SESSION_TYPE`, set by its VS Code and JetBrains plugins).
pub(crate) const SESSION_TYPE_VARIABLE: &str = "CODER_SSH_SESSION_TYPE";

/// The latest manifest and what the agent was started with: enough to build any session.
#[derive(Clone)]
pub(crate) struct Logins {
    config: Arc<Config>,
    sessions: watch::Receiver<Option<Arc<Session>>>,
}

/// Everything needed to start one session's process.
#[derive(Debug, Clone)]
pub(crate) struct Login {
    pub(crate) shell: ShellCommand,
    /// The manifest's MOTD file, `~` and variables expanded.
    pub(crate) motd_file: Option<PathBuf>,
    pub(crate) home: Option<PathBuf>,
}

impl Logins {
    pub(crate) fn new(
        config: Arc<Config>,
        sessions: watch::Receiver<Option<Arc<Session>>>,
    ) -> Self {
        Self { config, sessions }
    }

    /// The workspace and agent the latest manifest names.
    pub(crate) fn identity(&self) -> Option<(uuid::Uuid, String)> {
        let session = self.sessions.borrow().clone()?;
        Some((
            session.manifest.workspace_id,
            session.manifest.agent_name.clone(),
        ))
    }

    /// A login for the latest manifest with the client's `requested` variables; `None` before
    /// the agent has its first manifest.
    pub(crate) fn login(&self, requested: &BTreeMap<String, String>) -> Option<Login> {
        let session = self.sessions.borrow().clone()?;
        // The client's variables sit between the agent's environment and the manifest's, as
        // in Coder: a client cannot override `CODER=true` or what the template set.
        let mut base = self.config.environment.clone();
        base.extend(
            requested
                .iter()
                .filter(|(name, _)| name.as_str() != SESSION_TYPE_VARIABLE)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let data_dir = self.config.script_data_dir.join("coder-script-data");
        let mut shell = shell_for(
            &base,
            &session.manifest,
            &session.token,
            self.config.url.as_str(),
            &bin_dir(&data_dir),
        );
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten();
        if let Some(user) = user {
            shell.env.entry("USER".into()).or_insert(user.name);
        }
        // There is no network connection to describe (the client came through coderd), but
        // tools test these to know they run over SSH.
        shell.env.insert("SSH_CLIENT".into(), "0.0.0.0 0 0".into());
        shell
            .env
            .insert("SSH_CONNECTION".into(), "0.0.0.0 0 0.0.0.0 0".into());
        let home = UserInfo::current(&self.config.environment).home;
        let motd_file = crate::environment::expand_path(
            &session.manifest.motd_file,
            home.as_deref(),
            &self.config.environment,
        );
        Some(Login {
            shell,
            motd_file,
            home,
        })
    }
}

impl Login {
    /// The shell's arguments: a login shell (`-l`) without a command, `-c <command>` with one,
    /// as OpenSSH runs them.
    pub(crate) fn args(command: Option<&str>) -> Vec<String> {
        match command {
            None => vec!["-l".into()],
            Some(command) => vec!["-c".into(), command.into()],
        }
    }

    /// The MOTD to show before a login shell, lines ending in CR LF for the terminal; nothing
    /// when the manifest names none, it is missing, or `~/.hushlogin` exists (as sshd does).
    pub(crate) fn motd(&self) -> Vec<u8> {
        let hushed = self
            .home
            .as_ref()
            .is_some_and(|home| home.join(".hushlogin").exists());
        let Some(path) = self.motd_file.as_ref().filter(|_| !hushed) else {
            return Vec::new();
        };
        match std::fs::read(path) {
            Ok(text) => {
                let mut out = Vec::with_capacity(text.len() + 16);
                for line in text.split_inclusive(|b| *b == b'\n') {
                    let line = line.strip_suffix(b"\n").unwrap_or(line);
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    out.extend_from_slice(line);
                    out.extend_from_slice(b"\r\n");
                }
                out
            }
            Err(error) => {
                if error.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), %error, "cannot read the MOTD file");
                }
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(home: &std::path::Path, motd: Option<PathBuf>) -> Login {
        Login {
            shell: ShellCommand {
                program: "/bin/sh".into(),
                env: BTreeMap::new(),
                dir: home.to_path_buf(),
            },
            motd_file: motd,
            home: Some(home.to_path_buf()),
        }
    }

    #[test]
    fn motd_lines_end_in_crlf_and_hushlogin_silences_them() -> anyhow::Result<()> {
        let home = tempfile::tempdir()?;
        let motd = home.path().join("motd");
        std::fs::write(&motd, "Welcome\nto the workspace\r\nno newline")?;
        let l = login(home.path(), Some(motd));
        assert_eq!(l.motd(), b"Welcome\r\nto the workspace\r\nno newline\r\n");
        std::fs::write(home.path().join(".hushlogin"), "")?;
        assert!(l.motd().is_empty());
        assert!(
            login(home.path(), Some(home.path().join("missing")))
                .motd()
                .is_empty()
        );
        assert!(login(home.path(), None).motd().is_empty());
        Ok(())
    }

    #[test]
    fn shells_are_login_shells_without_a_command() {
        assert_eq!(Login::args(None), ["-l"]);
        assert_eq!(Login::args(Some("echo hi")), ["-c", "echo hi"]);
    }
}
