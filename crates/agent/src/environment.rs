//! The world scripts see: which shell runs them, their environment variables, their working
//! directory, and the expansion of `~` and `$VAR` in the paths the manifest names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use codersdk::agentsdk::Manifest;

use crate::process::ShellCommand;

/// What the agent knows about the user it runs as.
#[derive(Debug, Clone, Default)]
pub(crate) struct UserInfo {
    pub(crate) home: Option<PathBuf>,
    pub(crate) shell: Option<PathBuf>,
}

impl UserInfo {
    /// `$HOME` and the passwd entry of the current user (for the login shell, and the home
    /// when `$HOME` is unset, as in some container entrypoints).
    pub(crate) fn current(env: &BTreeMap<String, String>) -> Self {
        let passwd = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten();
        let home = env
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| passwd.as_ref().map(|u| u.dir.clone()));
        Self {
            home,
            shell: passwd.map(|u| u.shell),
        }
    }
}

/// The user's shell: `$SHELL`, else the login shell from passwd, else `/bin/sh`.
pub(crate) fn choose_shell(env: &BTreeMap<String, String>, user: &UserInfo) -> PathBuf {
    env.get("SHELL")
        .filter(|s| !s.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| user.shell.clone().filter(|s| !s.as_os_str().is_empty()))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// Expands `$NAME` and `${NAME}` from `lookup` (unset names expand to nothing, as in a shell).
/// A `$` that starts no name is kept.
pub(crate) fn expand_vars(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
        {
            out.push_str(&lookup(&braced[..end]).unwrap_or_default());
            rest = &braced[end + 1..];
            continue;
        }
        let len = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
        if len == 0 {
            out.push('$');
        } else {
            out.push_str(&lookup(&after[..len]).unwrap_or_default());
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// Coder's path expansion: a leading `~` is the home directory, `$VAR`s are expanded, and a
/// relative result is taken from the home directory. Empty stays empty (no directory set).
pub(crate) fn expand_path(
    path: &str,
    home: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Option<PathBuf> {
    if path.is_empty() {
        return None;
    }
    let home_str = home.map(|h| h.to_string_lossy().into_owned());
    let with_home = match (path.strip_prefix('~'), &home_str) {
        (Some(rest), Some(home)) => format!("{home}/{}", rest.trim_start_matches('/')),
        _ => path.to_string(),
    };
    let expanded = PathBuf::from(expand_vars(&with_home, |name| env.get(name).cloned()));
    if expanded.is_absolute() {
        Some(expanded)
    } else {
        Some(home.unwrap_or(Path::new("/")).join(expanded))
    }
}

/// The environment of every command the agent runs for the workspace, in Coder's order of
/// precedence (later wins):
/// 1. the variables that mark a Coder workspace (and the agent's token and URL, which Coder's
///    own subcommands run inside the workspace need),
/// 2. the agent's environment, for names not set in 1,
/// 3. the manifest's variables, with `$VAR`s expanded from the agent's environment,
/// 4. the script bin directory prepended to `PATH`.
///
/// Git is pointed at this binary: `GIT_SSH_COMMAND` (in 1) runs `coder gitssh` with the
/// owner's key, and `GIT_ASKPASS` (set last, as Coder's agent does) answers git's credential
/// prompts with the owner's linked accounts.
pub(crate) fn command_env(
    base: &BTreeMap<String, String>,
    manifest: &Manifest,
    token: &str,
    agent_url: &str,
    script_bin_dir: &Path,
) -> BTreeMap<String, String> {
    let exe = std::env::current_exe()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_else(|_| "coder".into());
    let git_ssh = format!("{exe} gitssh --");
    let mut env: BTreeMap<String, String> = [
        ("CODER", "true"),
        ("GIT_SSH_COMMAND", git_ssh.as_str()),
        ("CODER_WORKSPACE_NAME", manifest.workspace_name.as_str()),
        ("CODER_WORKSPACE_AGENT_NAME", manifest.agent_name.as_str()),
        ("CODER_WORKSPACE_OWNER_NAME", manifest.owner_name.as_str()),
        ("CODER_AGENT_TOKEN", token),
        ("CODER_AGENT_URL", agent_url),
        // Keeps code-server's "Getting Started" page from advertising Coder inside Coder.
        ("CS_DISABLE_GETTING_STARTED_OVERRIDE", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (name, value) in base {
        env.entry(name.clone()).or_insert_with(|| value.clone());
    }
    for (name, value) in &manifest.environment_variables {
        env.insert(
            name.clone(),
            expand_vars(value, |var| base.get(var).cloned()),
        );
    }
    env.insert("GIT_ASKPASS".into(), exe);
    let path = env.get("PATH").cloned().unwrap_or_default();
    let bin = script_bin_dir.to_string_lossy();
    env.insert(
        "PATH".into(),
        if path.is_empty() {
            bin.into_owned()
        } else {
            format!("{bin}:{path}")
        },
    );
    env
}

/// Everything needed to run the manifest's commands: the shell, the environment, and the
/// working directory (the manifest's, created if missing, else the home directory).
pub(crate) fn shell_for(
    base: &BTreeMap<String, String>,
    manifest: &Manifest,
    token: &str,
    agent_url: &str,
    script_bin_dir: &Path,
) -> ShellCommand {
    let user = UserInfo::current(base);
    let home = user.home.clone().unwrap_or_else(|| PathBuf::from("/"));
    let dir = match expand_path(&manifest.directory, Some(&home), base) {
        Some(dir) => match std::fs::create_dir_all(&dir) {
            Ok(()) => dir,
            Err(error) => {
                tracing::warn!(
                    directory = %dir.display(),
                    %error,
                    "cannot create the workspace directory; running commands in the home directory"
                );
                home.clone()
            }
        },
        None => home.clone(),
    };
    ShellCommand {
        program: choose_shell(base, &user),
        env: command_env(base, manifest, token, agent_url, script_bin_dir),
        dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn shell_prefers_the_variable_then_passwd_then_sh() {
        let passwd = UserInfo {
            home: None,
            shell: Some("/usr/bin/zsh".into()),
        };
        assert_eq!(
            choose_shell(&env(&[("SHELL", "/bin/bash")]), &passwd),
            Path::new("/bin/bash")
        );
        assert_eq!(
            choose_shell(&env(&[("SHELL", " ")]), &passwd),
            Path::new("/usr/bin/zsh")
        );
        assert_eq!(
            choose_shell(&env(&[]), &UserInfo::default()),
            Path::new("/bin/sh")
        );
    }

    #[test]
    fn variables_expand_like_a_shell() {
        let vars = env(&[("A", "1"), ("LONG_NAME", "two")]);
        let lookup = |name: &str| vars.get(name).cloned();
        assert_eq!(expand_vars("$A-${LONG_NAME}/$MISSING.", lookup), "1-two/.");
        assert_eq!(expand_vars("cost: 5$ or $", lookup), "cost: 5$ or $");
        assert_eq!(expand_vars("${A", lookup), "${A");
        assert_eq!(expand_vars("$A$A", lookup), "11");
    }

    #[test]
    fn paths_expand_home_and_variables_and_become_absolute() {
        let home = Path::new("/home/coder");
        let vars = env(&[("PROJECT", "app")]);
        let expand = |p: &str| expand_path(p, Some(home), &vars);
        assert_eq!(expand(""), None);
        assert_eq!(expand("~"), Some(home.to_path_buf()));
        assert_eq!(expand("~/src/$PROJECT"), Some(home.join("src/app")));
        assert_eq!(expand("src"), Some(home.join("src")));
        assert_eq!(expand("/srv/${PROJECT}"), Some(PathBuf::from("/srv/app")));
    }

    #[test]
    fn command_env_follows_coders_precedence() {
        let manifest = Manifest {
            workspace_name: "ws".into(),
            agent_name: "main".into(),
            owner_name: "alice".into(),
            environment_variables: [
                ("CODER", "overridden".to_string()),
                ("GREETING", "hi $USER".to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..Manifest::default()
        };
        let base = env(&[
            ("USER", "alice"),
            ("CODER_WORKSPACE_NAME", "stale"),
            ("PATH", "/usr/bin"),
        ]);
        let out = command_env(
            &base,
            &manifest,
            "tok",
            "http://coderd/",
            Path::new("/data/bin"),
        );
        assert_eq!(out["CODER"], "overridden", "the manifest wins");
        assert_eq!(
            out["CODER_WORKSPACE_NAME"], "ws",
            "the agent's own env loses"
        );
        assert_eq!(out["CODER_WORKSPACE_AGENT_NAME"], "main");
        assert_eq!(out["CODER_AGENT_URL"], "http://coderd/");
        assert_eq!(out["CODER_AGENT_TOKEN"], "tok");
        assert_eq!(out["GREETING"], "hi alice");
        assert_eq!(out["USER"], "alice");
        assert_eq!(out["PATH"], "/data/bin:/usr/bin");
        let exe = std::env::current_exe().expect("exe");
        assert_eq!(out["GIT_ASKPASS"], exe.to_string_lossy());
        assert_eq!(
            out["GIT_SSH_COMMAND"],
            format!("{} gitssh --", exe.to_string_lossy())
        );
    }

    #[test]
    fn the_working_directory_is_created_else_home() -> anyhow::Result<()> {
        let home = tempfile::tempdir()?;
        let home_str = home.path().to_string_lossy().into_owned();
        let base = env(&[("HOME", &home_str), ("SHELL", "/bin/sh")]);
        let mut manifest = Manifest {
            directory: "~/projects/$SHELL_IS_UNSET/app".into(),
            ..Manifest::default()
        };
        let shell = shell_for(&base, &manifest, "t", "u", Path::new("/bin"));
        assert_eq!(shell.dir, home.path().join("projects/app"));
        assert!(shell.dir.is_dir());
        assert_eq!(shell.program, Path::new("/bin/sh"));

        manifest.directory = String::new();
        assert_eq!(
            shell_for(&base, &manifest, "t", "u", Path::new("/bin")).dir,
            home.path()
        );

        let file = home.path().join("a-file");
        std::fs::write(&file, "")?;
        manifest.directory = format!("{}/below", file.display());
        assert_eq!(
            shell_for(&base, &manifest, "t", "u", Path::new("/bin")).dir,
            home.path(),
            "an impossible directory falls back to home"
        );
        Ok(())
    }
}
