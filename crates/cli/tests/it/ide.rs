//! Coder's IDE clients, replayed: what Coder's VS Code extension (coder/vscode-coder) and
//! JetBrains Toolbox plugin (coder/coder-jetbrains-toolbox) do against a deployment, call for
//! call — the version check, the CLI download with their cache tag, the sign-in, the start
//! with its reason while `watch-ws` reports progress, metadata, and then OpenSSH through the
//! exact ProxyCommand each writes into `~/.ssh/config`, with its network-info and log files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use serde_json::Value;
use sha1::Digest as _;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

use crate::agent::local_process;
use crate::harness::Deployment;
use crate::relay::{openssh, output, running_workspace, tool};

/// The binary a client on this machine downloads.
fn own_binary_name() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("coder-linux-{arch}")
}

/// `GET /bin/<own binary>` as the VS Code extension sends it (`Accept-Encoding: identity`,
/// `If-None-Match: "<sha1 of its copy>"`, `""` when it has none), saved to `to`.
async fn download(d: &Deployment, if_none_match: &str, to: &Path) -> anyhow::Result<u16> {
    let mut response = reqwest::Client::new()
        .get(format!("{}/bin/{}", d.url(), own_binary_name()))
        .header("Accept-Encoding", "identity")
        .header("If-None-Match", if_none_match)
        .send()
        .await?;
    let status = response.status().as_u16();
    if status == 200 {
        assert_eq!(
            response.headers()["content-type"],
            "application/octet-stream"
        );
        let etag = response.headers()["etag"].to_str()?.to_string();
        let mut file = std::fs::File::create(to)?;
        let mut hasher = sha1::Sha1::new();
        while let Some(chunk) = response.chunk().await? {
            hasher.update(&chunk);
            std::io::Write::write_all(&mut file, &chunk)?;
        }
        let sha1 = hex::encode(hasher.finalize());
        assert_eq!(
            etag,
            format!("\"{sha1}\""),
            "a strong tag: the SHA-1 in quotes"
        );
        std::fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    } else {
        assert!(response.bytes().await?.is_empty(), "{status}: no body");
    }
    Ok(status)
}

fn sha1_of(path: &Path) -> anyhow::Result<String> {
    Ok(hex::encode(sha1::Sha1::digest(std::fs::read(path)?)))
}

/// Runs the downloaded CLI with `args`; its stdout on success.
fn cli(bin: &Path, env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .args(args)
        .env_remove("CODER_URL")
        .env_remove("CODER_SESSION_TOKEN")
        .env_remove("CODER_CONFIG_DIR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// A WebSocket to `path` with the session token, yielding each text message as JSON.
async fn watch(
    d: &Deployment,
    token: &str,
    path: &str,
) -> anyhow::Result<impl futures::Stream<Item = Value> + Unpin + use<>> {
    let url = format!("{}{path}", d.url().replacen("http", "ws", 1));
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("Coder-Session-Token", token.parse()?);
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    Ok(Box::pin(socket.filter_map(|message| async move {
        match message {
            Ok(tungstenite::Message::Text(text)) => serde_json::from_str(&text).ok(),
            _ => None,
        }
    })))
}

/// The first `data` message for which `done` holds, within `within`.
async fn data_until(
    messages: &mut (impl futures::Stream<Item = Value> + Unpin),
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = tokio::time::timeout(left, messages.next())
            .await
            .context("no such message in time")?
            .context("the socket closed")?;
        if message["type"] == "data" && done(&message["data"]) {
            return Ok(message["data"].clone());
        }
    }
}

/// The workspace's one agent in a watched workspace, when connected and ready.
fn agent_ready(workspace: &Value) -> bool {
    workspace["latest_build"]["status"] == "running"
        && workspace["latest_build"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["agents"].as_array().into_iter().flatten())
            .any(|a| a["status"] == "connected" && a["lifecycle_state"] == "ready")
}

/// Writes `~/.ssh/config` in a fresh HOME with `block`.
fn ssh_home(block: &str) -> anyhow::Result<tempfile::TempDir> {
    let home = tempfile::Builder::new()
        .prefix("ide-home-")
        .tempdir_in("/tmp")?;
    std::fs::create_dir_all(home.path().join(".ssh"))?;
    std::fs::write(home.path().join(".ssh/config"), block)?;
    Ok(home)
}

/// The one file in `dir` whose name ends with `suffix`.
fn file_ending(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .with_context(|| format!("no file ending {suffix:?} in {}", dir.display()))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vscode_extensions_flow_runs_unchanged() -> anyhow::Result<()> {
    tool("ssh")?;
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (ws, agent, _reaper) = running_workspace(&d, &workspaces, "dev").await?;
    let base = tempfile::Builder::new()
        .prefix("vscode-")
        .tempdir_in("/tmp")?;
    let host = "127.0.0.1";

    // The CLI: downloaded with the extension's cache tag; the same version as the server's.
    let bin = base.path().join("coder-linux");
    assert_eq!(download(&d, "\"\"", &bin).await?, 200);
    let cached = format!("\"{}\"", sha1_of(&bin)?);
    assert_eq!(
        download(&d, &cached, &base.path().join("again")).await?,
        304
    );
    let version: Value = serde_json::from_str(&cli(&bin, &[], &["version", "--output", "json"])?)?;
    let server = d.owner.build_info().await?.version;
    assert_eq!(version["version"], server.as_str());
    assert!(server.starts_with("v2.34.3+"), "{server}");

    // Sign-in: the token handed over in the environment becomes the CLI's session as is.
    let config = base.path().join(host);
    let config_flag = config.to_str().context("utf-8")?;
    let header_command = "echo X-Coder-Test=1";
    let url = d.url();
    let global = [
        "--global-config",
        config_flag,
        "--url",
        &url,
        "--use-keyring=false",
        "--header-command",
        header_command,
    ];
    let login = [&global[..], &["login", "--use-token-as-session", &url]].concat();
    cli(&bin, &[("CODER_SESSION_TOKEN", &d.token)], &login)?;
    assert_eq!(std::fs::read_to_string(config.join("session"))?, d.token);
    let read_back = cli(&bin, &[], &[&global[..], &["login", "token"]].concat())?;
    assert_eq!(read_back.trim(), d.token);

    // Stopped, then started by the extension with its reason while it watches the workspace.
    d.ok(&["stop", "dev", "--yes"])?;
    let mut changes = watch(
        &d,
        &d.token,
        &format!("/api/v2/workspaces/{}/watch-ws", ws.id),
    )
    .await?;
    let first = data_until(&mut changes, Duration::from_secs(10), |_| true).await?;
    assert_eq!(first["latest_build"]["status"], "stopped");
    let start = [
        &global[..],
        &[
            "start",
            "--yes",
            "--reason",
            "vscode_connection",
            "admin/dev",
        ],
    ]
    .concat();
    cli(&bin, &[], &start)?;
    let ready = data_until(&mut changes, Duration::from_secs(90), agent_ready).await?;
    assert_eq!(ready["latest_build"]["reason"], "vscode_connection");
    let agent = ready["latest_build"]["resources"][0]["agents"][0]["id"]
        .as_str()
        .map_or(agent.to_string(), str::to_owned);

    // The status bar's metadata: every value carries a timestamp, never null.
    let mut metadata = watch(
        &d,
        &d.token,
        &format!("/api/v2/workspaceagents/{agent}/watch-metadata-ws"),
    )
    .await?;
    let list = data_until(&mut metadata, Duration::from_secs(10), |_| true).await?;
    let keys: Vec<_> = list
        .as_array()
        .context("a list")?
        .iter()
        .map(|m| {
            assert!(m["result"]["collected_at"].is_string(), "{m}");
            m["description"]["key"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(keys.contains(&"load".to_string()), "{keys:?}");

    // OpenSSH through the ProxyCommand the extension writes (its Host block, options sorted).
    let net = base.path().join("net");
    let logs = base.path().join("log");
    std::fs::create_dir_all(&logs)?;
    let prefix = format!("coder-vscode.{host}--");
    let proxy = format!(
        "{bin} --global-config {config_flag} --url {url} --use-keyring=false --header-command \
         '{header_command}' ssh --disable-autostart --stdio --usage-app=vscode \
         --network-info-dir {net} --log-dir {logs} -v --ssh-host-prefix {prefix} %h",
        bin = bin.display(),
        url = d.url(),
        net = net.display(),
        logs = logs.display(),
    );
    let home = ssh_home(&format!(
        "Host {prefix}*\n  ConnectTimeout 0\n  LogLevel ERROR\n  ProxyCommand {proxy}\n  \
         ServerAliveCountMax 3\n  ServerAliveInterval 10\n  SetEnv CODER_SSH_SESSION_TYPE=vscode\n  \
         StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
    ))?;
    for target in [
        format!("{prefix}admin--dev"),
        format!("{prefix}admin--dev--main"),
    ] {
        let (code, out, err) = output(openssh("ssh", home.path()).args([&target, "echo", "hi"]))?;
        assert_eq!((code, out.as_str()), (0, "hi\n"), "{target}: {err}");
    }

    // A session long enough for a reading: the network info and the log, named after ssh.
    let mut long = openssh("ssh", home.path())
        .args([&format!("{prefix}admin--dev.main"), "sleep 3; echo done"])
        .stdout(Stdio::piped())
        .spawn()?;
    let ssh_pid = long.id();
    let info_path = net.join(format!("{ssh_pid}.json"));
    testutil::eventually(Duration::from_secs(10), "a network reading", || async {
        let Ok(text) = std::fs::read_to_string(&info_path) else {
            return Ok(false);
        };
        let info: Value = serde_json::from_str(&text)?;
        Ok(info["latency"].as_f64().is_some_and(|l| l > 0.0)
            && info["derp_latency"]["coderd"]
                .as_f64()
                .is_some_and(|l| l > 0.0))
    })
    .await?;
    let info: Value = serde_json::from_str(&std::fs::read_to_string(&info_path)?)?;
    assert_eq!(
        (info["p2p"].as_bool(), info["preferred_derp"].as_str()),
        (Some(false), Some("coderd"))
    );
    for field in ["upload_bytes_sec", "download_bytes_sec"] {
        assert!(info[field].is_u64(), "{field}: {info}");
    }
    assert!(long.wait()?.success());
    let log = std::fs::read_to_string(file_ending(&logs, &format!("-{ssh_pid}.log"))?)?;
    assert!(log.contains("connecting through coderd's relay"), "{log}");

    // An installer's background server outlives the SSH session that started it, as under sshd.
    let (code, out, err) = output(openssh("ssh", home.path()).args([
        &format!("{prefix}admin--dev"),
        "nohup sleep 300 >/dev/null 2>&1 & echo $!",
    ]))?;
    assert_eq!(code, 0, "{err}");
    let background: i32 = out.trim().parse()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(background), None).is_ok();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(background),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(alive, "the background process was killed with the session");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_jetbrains_plugins_flow_runs_unchanged() -> anyhow::Result<()> {
    tool("ssh")?;
    let Some((d, workspaces)) = local_process().await? else {
        return Ok(());
    };
    let (_ws, _agent, _reaper) = running_workspace(&d, &workspaces, "box").await?;
    let base = tempfile::Builder::new()
        .prefix("toolbox-")
        .tempdir_in("/tmp")?;
    let host = "127.0.0.1";

    // The plugin's sign-in: users/me, buildinfo, appearance (application_name must be there).
    let http = reqwest::Client::new();
    for path in ["users/me", "buildinfo", "appearance"] {
        let body: Value = http
            .get(format!("{}/api/v2/{path}", d.url()))
            .header("Coder-Session-Token", &d.token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        if path == "appearance" {
            assert!(body["application_name"].is_string(), "{body}");
        }
    }

    // The CLI, downloaded with the plugin's headers, and its version: plain semver it parses.
    let bin = base.path().join("coder-linux-amd64");
    let response = http
        .get(format!("{}/bin/{}", d.url(), own_binary_name()))
        .header("Accept-Encoding", "gzip")
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/octet-stream"
    );
    drop(response);
    assert_eq!(download(&d, "\"\"", &bin).await?, 200);
    let version: Value = serde_json::from_str(&cli(&bin, &[], &["version", "--output", "json"])?)?;
    let version = version["version"].as_str().context("version")?;
    let core = version
        .trim_start_matches('v')
        .split('+')
        .next()
        .unwrap_or_default();
    let numbers: Vec<u32> = core.split('.').map(str::parse).collect::<Result<_, _>>()?;
    assert!(numbers.len() == 3 && numbers >= vec![2, 25, 0], "{version}");

    // `login --token` makes a session of the CLI's own from the plugin's token.
    let config = base.path().join(host).join("config");
    let config_flag = config.to_str().context("utf-8")?;
    cli(
        &bin,
        &[],
        &[
            "login",
            &d.url(),
            "--token",
            &d.token,
            "--global-config",
            config_flag,
        ],
    )?;
    let session = std::fs::read_to_string(config.join("session"))?;
    assert_ne!(
        session.trim(),
        d.token,
        "a new session, not the plugin's token"
    );
    let me = codersdk::Client::new(url::Url::parse(&d.url())?)
        .with_token(session.trim())
        .user("me")
        .await?;
    assert_eq!(me.username, "admin");

    // Start with its reason, as the plugin does for a stopped workspace.
    d.ok(&["stop", "box", "--yes"])?;
    cli(
        &bin,
        &[],
        &[
            "--global-config",
            config_flag,
            "start",
            "--yes",
            "--reason",
            "jetbrains_connection",
            "--",
            "admin/box",
        ],
    )?;
    let started = d.workspace("box").await?;
    assert_eq!(started.latest_build.reason, "jetbrains_connection");
    testutil::eventually(Duration::from_secs(90), "the agent ready again", || async {
        let ws = d.workspace("box").await?;
        Ok(ws
            .latest_build
            .resources
            .iter()
            .flat_map(|r| r.agents.iter())
            .any(|a| a.status == "connected" && a.lifecycle_state == "ready"))
    })
    .await?;

    // Both forms of the Host block the plugin writes: the wildcard one and one per agent.
    let net = base.path().join("ssh-network-metrics");
    let logs = base.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let common = format!(
        "{bin} --global-config {config_flag} --url {url} ssh --stdio --disable-autostart \
         --network-info-dir {net} --log-dir {logs} -v --usage-app=jetbrains",
        bin = bin.display(),
        url = d.url(),
        net = net.display(),
        logs = logs.display(),
    );
    let options = "  ConnectTimeout 0\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  \
                   LogLevel ERROR\n  SetEnv CODER_SSH_SESSION_TYPE=JetBrains\n";
    let wildcard = format!("coder-jetbrains-toolbox-{host}--");
    let per_host = format!("coder-jetbrains-toolbox--admin--box.main--{host}");
    let home = ssh_home(&format!(
        "# --- START CODER JETBRAINS TOOLBOX {host}\n\
         Host {wildcard}*\n  ProxyCommand {common} --ssh-host-prefix {wildcard} -- %h\n{options}\
         Host {per_host}\n  ProxyCommand {common} -- admin/box.main\n{options}\
         # --- END CODER JETBRAINS TOOLBOX {host}\n"
    ))?;
    for target in [format!("{wildcard}admin--box.main"), per_host] {
        let (code, out, err) =
            output(openssh("ssh", home.path()).args([&target, "echo $CODER_WORKSPACE_NAME"]))?;
        assert_eq!((code, out.as_str()), (0, "box\n"), "{target}: {err}");
    }
    assert!(
        std::fs::read_dir(&net)?.count() >= 1,
        "network info written"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_from_an_ide_fails_clearly() -> anyhow::Result<()> {
    let d = Deployment::new(&[]).await?;
    let fails = |args: &[&str]| -> anyhow::Result<String> {
        let out = d.run(args)?;
        anyhow::ensure!(!out.status.success(), "{args:?} succeeded");
        Ok(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let err = fails(&["--header-command", "echo nonsense", "list"])?;
    assert!(err.contains("not of the form key=value"), "{err}");
    let err = fails(&["ssh", "--stdio", "--network-info-dir", "/proc/nope", "dev"])?;
    assert!(err.contains("--network-info-dir"), "{err}");
    let err = fails(&[
        "ssh",
        "--stdio",
        "--ssh-host-prefix",
        "coder.",
        "coder.a--b--c--d",
    ])?;
    assert!(err.contains("a--b--c--d"), "{err}");
    let err = fails(&["ssh", "--no-such-flag", "dev"])?;
    assert!(
        err.contains("unexpected argument '--no-such-flag'"),
        "{err}"
    );
    let err = fails(&["start", "dev", "--reason", "because"])?;
    assert!(err.contains("invalid value 'because'"), "{err}");

    // The usage report: a known app of an agent of the workspace, else the field is named.
    let http = reqwest::Client::new();
    let missing = http
        .post(format!(
            "{}/api/v2/workspaces/{}/usage",
            d.url(),
            uuid::Uuid::new_v4()
        ))
        .header("Coder-Session-Token", &d.token)
        .send()
        .await?;
    assert_eq!(missing.status(), 404);

    // Appearance: refused fields are named and nothing changes.
    let refused = http
        .put(format!("{}/api/v2/appearance", d.url()))
        .header("Coder-Session-Token", &d.token)
        .json(&serde_json::json!({"application_name": "Acme", "logo_url": "javascript:x"}))
        .send()
        .await?;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await?;
    assert_eq!(body["validations"][0]["field"], "logo_url", "{body}");
    assert_eq!(d.owner.appearance().await?.application_name, "");
    let saved = d
        .owner
        .update_appearance(&codersdk::appearance::UpdateAppearanceConfig {
            application_name: "Acme Dev".into(),
            ..Default::default()
        })
        .await?;
    assert_eq!(saved.application_name, "Acme Dev");
    assert_eq!(d.owner.appearance().await?.application_name, "Acme Dev");
    Ok(())
}
