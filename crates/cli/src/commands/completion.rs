//! `coder completion`: shell completion for every verb and flag, generated from the same
//! command-line definition the binary parses with, so it cannot drift.

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for; detected from `$SHELL` when missing.
    #[arg(short, long, value_enum)]
    pub shell: Option<Shell>,
    /// Print the completion script instead of installing it.
    #[arg(short, long)]
    pub print: bool,
}

pub fn run(args: CompletionArgs) -> anyhow::Result<()> {
    let shell = match args.shell {
        Some(shell) => shell,
        None => Shell::from_env().context(
            "cannot tell the shell from $SHELL; name it with --shell bash|zsh|fish|powershell",
        )?,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut crate::Cli::command(), "coder", &mut script);
    if args.print {
        print!("{}", String::from_utf8_lossy(&script));
        return Ok(());
    }
    let path = install_path(shell)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "Installed {shell} completion for coder in {}",
        path.display()
    );
    if shell == Shell::Zsh {
        eprintln!("Make sure that directory is on $fpath before compinit runs in ~/.zshrc.");
    }
    Ok(())
}

/// Where each shell loads completions from by itself (for the current user).
fn install_path(shell: Shell) -> anyhow::Result<PathBuf> {
    let home = dirs::home_dir().context("cannot find your home directory")?;
    let data = dirs::data_dir().unwrap_or_else(|| home.join(".local/share"));
    let config = dirs::config_dir().unwrap_or_else(|| home.join(".config"));
    Ok(match shell {
        Shell::Bash => data.join("bash-completion/completions/coder"),
        Shell::Zsh => home.join(".zfunc/_coder"),
        Shell::Fish => config.join("fish/completions/coder.fish"),
        other => anyhow::bail!("{other} completion cannot be installed here; use --print"),
    })
}
