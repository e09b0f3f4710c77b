//! `coder vscodessh`: the ProxyCommand of Coder's VS Code extension before it moved to
//! `coder ssh --stdio` (extensions that see a CLI older than 2.19 still write it). The host is
//! `<anything>--<owner>--<workspace>[--<agent>]`; the URL and session come from files the
//! extension wrote; a stopped workspace is never started.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use url::Url;

use super::ssh::SshArgs;
use crate::GlobalArgs;
use crate::reach::Wait;

#[derive(Debug, clap::Args)]
pub struct VscodesshArgs {
    /// The host OpenSSH connects to (`%h`).
    pub host: String,
    /// The file holding the session token.
    #[arg(long, env = "CODER_SESSION_TOKEN_FILE")]
    pub session_token_file: PathBuf,
    /// The file holding the deployment's URL.
    #[arg(long, env = "CODER_URL_FILE")]
    pub url_file: PathBuf,
    /// Write the connection's network info as JSON to `<dir>/<parent pid>.json`.
    #[arg(long, value_name = "DIR")]
    pub network_info_dir: PathBuf,
    /// How often the network info file is refreshed.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub network_info_interval: Duration,
    /// Write this connection's logs to a file of its own in this directory.
    #[arg(long, env = "CODER_VSCODE_SSH_LOG_DIR", value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
}

pub async fn run(global: &GlobalArgs, args: VscodesshArgs) -> anyhow::Result<()> {
    let parts: Vec<&str> = args.host.split("--").collect();
    let name = match parts.as_slice() {
        [_, owner, workspace] => format!("{owner}/{workspace}"),
        [_, owner, workspace, agent] => format!("{owner}/{workspace}.{agent}"),
        _ => anyhow::bail!(
            "invalid host {:?}: expected <prefix>--<owner>--<workspace>[--<agent>]",
            args.host
        ),
    };
    let read = |path: &PathBuf, what: &str| {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the {what} from {}", path.display()))
            .map(|s| s.trim().to_string())
    };
    let url = read(&args.url_file, "deployment URL")?;
    let url = Url::parse(&url).with_context(|| format!("{url:?} is not a URL"))?;
    let token = read(&args.session_token_file, "session token")?;
    let global = GlobalArgs {
        url: Some(url),
        token: Some(token),
        ..global.clone()
    };
    let ssh = SshArgs {
        workspace: name,
        command: Vec::new(),
        stdio: true,
        ssh_host_prefix: None,
        hostname_suffix: None,
        forward_agent: false,
        identity_agent: None,
        remote_forward: Vec::new(),
        env: Vec::new(),
        wait: Wait::No,
        no_wait: false,
        disable_autostart: true,
        usage_app: "vscode".into(),
        network_info_dir: Some(args.network_info_dir),
        network_info_interval: args.network_info_interval,
        log_dir: args.log_dir,
    };
    super::ssh::run(&global, ssh).await
}
