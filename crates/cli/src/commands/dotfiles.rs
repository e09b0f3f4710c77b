//! `coder dotfiles`: personalise a workspace from a dotfiles repository, as Coder's does — clone
//! it (or pull it) into the CLI's config directory, then run its install script, or, without
//! one, link its dotfiles into the home directory. Private repositories just work: git asks the
//! agent's askpass for the owner's linked credentials.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use clap::Args;

use crate::GlobalArgs;

/// The install scripts Coder looks for, in order.
const INSTALL_SCRIPTS: &[&str] = &[
    "install.sh",
    "install",
    "bootstrap.sh",
    "bootstrap",
    "script/bootstrap",
    "setup.sh",
    "setup",
    "script/setup",
];

#[derive(Debug, Args)]
pub struct DotfilesArgs {
    /// The dotfiles repository's URL.
    repo: String,
    /// Specifies which branch to clone. If empty, will default to cloning the default branch
    /// or using the existing branch in the cloned repo on disk.
    #[arg(short, long, default_value = "")]
    branch: String,
    /// Specifies the directory for the dotfiles symlink destinations. If empty, will use $HOME.
    #[arg(long, env = "CODER_SYMLINK_DIR", default_value = "")]
    symlink_dir: String,
    /// Specifies the directory for the dotfiles repository, relative to global config
    /// directory.
    #[arg(long, env = "CODER_DOTFILES_REPO_DIR", default_value = "dotfiles")]
    repo_dir: String,
    /// Bypass prompts.
    #[arg(short = 'y', long)]
    yes: bool,
}

fn confirm(yes: bool, question: &str) -> anyhow::Result<()> {
    if yes || crate::prompt::confirm(question)? {
        Ok(())
    } else {
        bail!("canceled")
    }
}

/// git, with host keys of a first clone over SSH accepted (as Coder's does: a fresh workspace
/// knows no hosts).
fn git(dir: &Path) -> tokio::process::Command {
    let ssh = std::env::var("GIT_SSH_COMMAND").unwrap_or_else(|_| "ssh".into());
    let mut cmd = tokio::process::Command::new("git");
    cmd.current_dir(dir).env(
        "GIT_SSH_COMMAND",
        format!("{ssh} -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no"),
    );
    cmd
}

async fn run_git(dir: &Path, args: &[&str]) -> anyhow::Result<bool> {
    let status = git(dir)
        .args(args)
        .stdin(Stdio::null())
        .status()
        .await
        .context("running git")?;
    Ok(status.success())
}

pub async fn run(global: &GlobalArgs, args: DotfilesArgs) -> anyhow::Result<()> {
    let config = global.config_dir()?.path().to_path_buf();
    std::fs::create_dir_all(&config).with_context(|| format!("creating {}", config.display()))?;
    let repo_dir = config.join(&args.repo_dir);
    let url_file = config.join("dotfilesurl");
    let previous = std::fs::read_to_string(&url_file).unwrap_or_default();
    let mut exists = repo_dir.is_dir();
    if exists && previous.trim() != args.repo.trim() {
        confirm(
            args.yes,
            &format!(
                "The dotfiles URL has changed from {:?} to {:?}. Coder will move the old repository to a backup and clone the new one. Continue?",
                previous.trim(),
                args.repo
            ),
        )?;
        let backup = PathBuf::from(format!(
            "{}_backup_{}",
            repo_dir.display(),
            chrono::Utc::now().format("%Y-%m-%dT%H-%M-%SZ")
        ));
        std::fs::rename(&repo_dir, &backup)
            .with_context(|| format!("moving {} aside", repo_dir.display()))?;
        eprintln!("Moved the old dotfiles to {}", backup.display());
        exists = false;
    }
    if exists {
        eprintln!("Pulling {} into {}", args.repo, repo_dir.display());
        if !args.branch.is_empty() {
            let current = git(&repo_dir)
                .args(["branch", "--show-current"])
                .output()
                .await?;
            if String::from_utf8_lossy(&current.stdout).trim() != args.branch
                && !run_git(&repo_dir, &["checkout", &args.branch]).await?
            {
                eprintln!(
                    "Failed to switch to branch {:?}, continuing...",
                    args.branch
                );
            }
        }
        if !run_git(&repo_dir, &["pull", "--ff-only"]).await? {
            eprintln!("Failed to update repo, continuing...");
        }
    } else {
        confirm(
            args.yes,
            &format!("Clone {} into {}?", args.repo, repo_dir.display()),
        )?;
        let mut clone = vec!["clone", args.repo.as_str(), args.repo_dir.as_str()];
        if !args.branch.is_empty() {
            clone.extend(["--branch", args.branch.as_str()]);
        }
        if !run_git(&config, &clone).await? {
            bail!("cloning {} failed", args.repo);
        }
    }
    std::fs::write(&url_file, &args.repo)?;

    if let Some(script) = INSTALL_SCRIPTS
        .iter()
        .map(|name| repo_dir.join(name))
        .find(|path| path.is_file())
    {
        confirm(
            args.yes,
            &format!("Running install script {}. Continue?", script.display()),
        )?;
        use std::os::unix::fs::PermissionsExt as _;
        if std::fs::metadata(&script)?.permissions().mode() & 0o111 == 0 {
            bail!(
                "script {:?} is not executable. See https://coder.com/docs/dotfiles for how to make it so",
                script.display().to_string()
            );
        }
        let status = tokio::process::Command::new(&script)
            .current_dir(&repo_dir)
            .status()
            .await
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!("{} failed: {status}", script.display());
        }
        eprintln!("Dotfiles installation complete.");
        return Ok(());
    }
    link_dotfiles(&repo_dir, &args.symlink_dir)
}

/// Links the repository's dotfiles (`.gitconfig`, but no other `.git*`) into `symlink_dir`
/// (the home directory when empty); a file already there is kept as `<name>.bak`.
fn link_dotfiles(repo_dir: &Path, symlink_dir: &str) -> anyhow::Result<()> {
    let target = if symlink_dir.is_empty() {
        PathBuf::from(std::env::var("HOME").context("HOME is not set")?)
    } else {
        PathBuf::from(symlink_dir)
    };
    let mut names: Vec<String> = std::fs::read_dir(repo_dir)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && (!n.starts_with(".git") || n == ".gitconfig"))
        .collect();
    names.sort();
    if names.is_empty() {
        eprintln!("No install scripts or dotfiles found, nothing to do.");
        return Ok(());
    }
    std::fs::create_dir_all(&target)?;
    for name in names {
        let from = repo_dir.join(&name);
        let to = target.join(&name);
        match std::fs::symlink_metadata(&to) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&to)?,
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&to)?,
            Ok(_) => std::fs::rename(&to, target.join(format!("{name}.bak")))?,
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&from, &to)
            .with_context(|| format!("linking {} to {}", to.display(), from.display()))?;
        eprintln!("Linked {} to {}", to.display(), from.display());
    }
    eprintln!("Dotfiles installation complete.");
    Ok(())
}
