//! `coder config-ssh`: one managed block in `~/.ssh/config` that makes `ssh coder.<workspace>`
//! (and `coder.<workspace>.<agent>`) go through `coder ssh --stdio`. Everything outside the
//! block is left byte for byte; running it again changes nothing. The block names the CLI's
//! config directory, never a token: the session stays in that directory's `session` file.

use std::io::{IsTerminal, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::{GlobalArgs, prompt};

const START: &str = "# ------------START-CODER-----------";
const END: &str = "# ------------END-CODER------------";

#[derive(Debug, clap::Args)]
pub struct ConfigSshArgs {
    /// The SSH config file to change.
    #[arg(long, env = "CODER_SSH_CONFIG_FILE", default_value = "~/.ssh/config")]
    pub ssh_config_file: String,
    /// Extra options for the workspaces' hosts (`-o "ForwardAgent yes"`, repeatable).
    #[arg(short = 'o', long = "ssh-option", env = "CODER_SSH_CONFIG_OPTS")]
    pub ssh_options: Vec<String>,
    /// The prefix of the workspaces' host names.
    #[arg(
        long,
        env = "CODER_CONFIGSSH_SSH_HOST_PREFIX",
        default_value = "coder."
    )]
    pub ssh_host_prefix: String,
    /// Show what would change, change nothing.
    #[arg(short = 'n', long, env = "CODER_SSH_DRY_RUN")]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
}

fn expand_home(path: &str) -> anyhow::Result<PathBuf> {
    match path.strip_prefix("~/") {
        Some(rest) => Ok(dirs::home_dir()
            .context("cannot find your home directory; pass --ssh-config-file")?
            .join(rest)),
        None => Ok(PathBuf::from(path)),
    }
}

/// Quotes a path for ssh_config's tokenizer (double quotes; our paths never hold one).
fn quote(path: &Path) -> anyhow::Result<String> {
    let s = path
        .to_str()
        .with_context(|| format!("{} is not valid UTF-8", path.display()))?;
    if s.contains('"') {
        bail!("{s:?} contains a double quote, which ssh_config cannot quote");
    }
    Ok(format!("\"{s}\""))
}

/// The managed block, markers included, ending with a newline.
fn block(
    binary: &Path,
    config_dir: &Path,
    prefix: &str,
    options: &[String],
) -> anyhow::Result<String> {
    let mut out = String::new();
    out.push_str(START);
    out.push('\n');
    out.push_str(
        "# Written by `coder config-ssh`; it rewrites everything between these markers.\n",
    );
    out.push_str("# Edit your own hosts outside them.\n");
    out.push_str(&format!("Host {prefix}*\n"));
    for option in options {
        out.push_str(&format!("  {}\n", option.trim()));
    }
    out.push_str("  ConnectTimeout 0\n");
    // The host key is the agent's, and the stream to it was authenticated by coderd.
    out.push_str("  StrictHostKeyChecking no\n");
    out.push_str("  UserKnownHostsFile /dev/null\n");
    out.push_str("  LogLevel ERROR\n");
    out.push_str(&format!(
        "  ProxyCommand {} --global-config {} ssh --stdio --ssh-host-prefix {prefix} %h\n",
        quote(binary)?,
        quote(config_dir)?
    ));
    out.push_str(END);
    out.push('\n');
    Ok(out)
}

/// `existing` with the managed block replaced by `block` (or appended), all else untouched.
fn apply(existing: &str, block: &str) -> anyhow::Result<String> {
    let start = existing.find(START);
    let end = existing.find(END);
    match (start, end) {
        (Some(s), Some(e)) if s < e => {
            let mut after = e + END.len();
            if existing[after..].starts_with('\n') {
                after += 1;
            }
            Ok(format!("{}{block}{}", &existing[..s], &existing[after..]))
        }
        (None, None) => {
            let mut out = existing.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(block);
            Ok(out)
        }
        _ => bail!(
            "the Coder section of your SSH config is damaged (one marker without the other); \
             remove what is left of it and run again"
        ),
    }
}

/// A line diff of the two texts (what changes, with a little context).
fn diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = String::new();
    for line in &old[prefix..old.len() - suffix] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new[prefix..new.len() - suffix] {
        out.push_str(&format!("+{line}\n"));
    }
    out
}

/// Replaces `path` with `content` (through a temporary file, keeping its permissions).
fn write_atomically(path: &Path, content: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("the SSH config has no directory")?;
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let tmp = dir.join(format!(".{}.coder-tmp", std::process::id()));
    {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.write_all(content.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

pub async fn run(global: &GlobalArgs, args: ConfigSshArgs) -> anyhow::Result<()> {
    // Check the login now: the hosts would only fail later, inside ssh.
    let client = global.client()?;
    client
        .build_info()
        .await
        .context("checking the deployment")?;
    let config_dir = std::path::absolute(global.config_dir()?.path())?;
    let binary = std::env::current_exe().context("finding this coder binary")?;
    let path = expand_home(&args.ssh_config_file)?;
    let existing = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let wanted = block(
        &binary,
        &config_dir,
        &args.ssh_host_prefix,
        &args.ssh_options,
    )?;
    let updated = apply(&existing, &wanted)?;
    if updated == existing {
        println!("No changes to make: {} is up to date.", path.display());
        return Ok(());
    }
    let changes = diff(&existing, &updated);
    if args.dry_run {
        println!(
            "Dry run: {} would change like this:\n\n{changes}",
            path.display()
        );
        return Ok(());
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "not changing {} without confirmation: pass --yes",
                path.display()
            );
        }
        println!("{changes}");
        if !prompt::confirm(&format!("Update {}?", path.display()))? {
            bail!("aborted");
        }
    }
    write_atomically(&path, &updated)?;
    println!(
        "Updated {}. Connect with: ssh {}<workspace>",
        path.display(),
        args.ssh_host_prefix
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_block() -> String {
        block(
            Path::new("/usr/bin/coder"),
            Path::new("/home/me/.config/coderv2"),
            "coder.",
            &["ForwardAgent yes".into()],
        )
        .expect("block")
    }

    #[test]
    fn the_block_goes_after_the_users_config_which_stays_byte_for_byte() {
        let mine = "Host work\n\tHostName 10.0.0.1   # keep my tabs\n\nMatch all\n  User me";
        let out = apply(mine, &sample_block()).expect("apply");
        assert!(out.starts_with(mine), "{out}");
        assert!(out.contains("Host coder.*\n"), "{out}");
        assert!(out.contains(
            "ProxyCommand \"/usr/bin/coder\" --global-config \"/home/me/.config/coderv2\" ssh --stdio --ssh-host-prefix coder. %h"
        ), "{out}");
        assert!(out.contains("  ForwardAgent yes\n"), "{out}");
        // Idempotent.
        assert_eq!(apply(&out, &sample_block()).expect("again"), out);
    }

    #[test]
    fn a_new_block_replaces_the_old_one_in_place() {
        let before = "Host a\n  User x\n";
        let after = "\nHost b\n  User y\n";
        let old = format!("{before}{START}\nHost old.*\n{END}\n{after}");
        let out = apply(&old, &sample_block()).expect("apply");
        assert_eq!(out, format!("{before}{}{after}", sample_block()));
        let d = diff(&old, &out);
        assert!(d.contains("-Host old.*"), "{d}");
        assert!(d.contains("+Host coder.*"), "{d}");
        assert!(!d.contains("Host a"), "{d}");
    }

    #[test]
    fn a_damaged_block_is_refused() {
        assert!(apply(&format!("{START}\nHost x\n"), &sample_block()).is_err());
    }
}
