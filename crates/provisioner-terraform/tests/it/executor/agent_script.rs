//! The agent bootstrap script end to end: the executor hands it to terraform, the provider
//! renders it into `coder_agent.init_script` with the deployment's URL, and running it
//! downloads the agent binary from that URL (retrying while the deployment fails) and starts it;
//! the next start reuses the kept binary when the deployment says it is current.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use codersdk::provisionerd::Transition;

use super::harness::{BuildSpec, CODER_PROVIDER, Fixture, build_job, built, terraform_on_path};

/// Stands in for `coder agent`: prints what it was started with.
const FAKE_AGENT: &str = "#!/bin/sh\necho \"started: $1 auth=$CODER_AGENT_AUTH url=$CODER_AGENT_URL token=$CODER_AGENT_TOKEN\"\n";

/// Each request's path and `If-None-Match` (empty when absent).
type Requests = Arc<Mutex<Vec<(String, String)>>>;

/// Serves the fake agent at any path, after failing the first request, and 304 to a request
/// whose `If-None-Match` carries the fake agent's hash; records each request's path and
/// `If-None-Match`.
fn serve_binary() -> anyhow::Result<(String, Requests)> {
    use sha2::Digest as _;
    let current = format!("W/\"{}\"", hex::encode(sha2::Sha256::digest(FAKE_AGENT)));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(match stream.try_clone() {
                Ok(s) => s,
                Err(_) => return,
            });
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut header = String::new();
            let mut if_none_match = String::new();
            while reader.read_line(&mut header).is_ok_and(|read| read > 2) {
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("if-none-match")
                {
                    value.trim().clone_into(&mut if_none_match);
                }
                header.clear();
            }
            let path = request_line
                .split(' ')
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((path, if_none_match.clone()));
            let response = if n == 0 {
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned()
            } else if if_none_match == current {
                "HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n".to_owned()
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{FAKE_AGENT}",
                    FAKE_AGENT.len()
                )
            };
            let _ = stream.write_all(response.as_bytes());
        }
    });
    Ok((url, paths))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rendered_init_script_downloads_and_starts_the_agent() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let (url, paths) = serve_binary()?;
    let template = format!(
        "{CODER_PROVIDER}\nresource \"coder_agent\" \"main\" {{\n  os   = \"linux\"\n  arch = \"arm64\"\n}}\n"
    );
    let f = Fixture::new(&[("main.tf", &template)], &[])?;
    let spec = BuildSpec {
        coder_url: format!("{url}/some/base"),
        ..BuildSpec::new(Transition::Start)
    };
    let (state, _) = built(f.run(&build_job(spec)).await, &f.logs)?;
    let state: serde_json::Value = serde_json::from_slice(&state)?;
    let agent = state["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["type"] == "coder_agent")
        .context("the agent is in the state")?;
    let attributes = &agent["instances"][0]["attributes"];
    let script = attributes["init_script"].as_str().context("init_script")?;
    let token = attributes["token"].as_str().context("token")?;
    assert!(
        script.contains(&format!("{url}/bin/coder-linux-arm64")),
        "{script}"
    );

    let tmp = tempfile::tempdir()?;
    let start = || {
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("TMPDIR", tmp.path())
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .env("CODER_AGENT_TOKEN", token)
            .output()
    };
    let started = format!("started: agent auth=token url={url}/ token={token}");
    let output = start().await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), started);
    assert!(stderr.contains("retrying in 1s"), "{stderr}");
    let kept = tmp.path().join("cache/coder/coder-linux-arm64");
    assert_eq!(std::fs::read_to_string(&kept)?, FAKE_AGENT);

    // The second start asks with the kept binary's hash, gets 304 and runs the kept binary.
    let output = start().await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), started);
    assert!(stderr.contains("is current"), "{stderr}");
    let requests = paths.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let path = "/bin/coder-linux-arm64";
    let (first, second) = (requests[..2].to_vec(), requests[2..].to_vec());
    assert_eq!(
        first,
        [(path.into(), String::new()), (path.into(), String::new())]
    );
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0].0, path);
    assert!(second[0].1.len() > 64, "{second:?}");
    // Nothing but the binary is left in the cache directory.
    let entries = std::fs::read_dir(tmp.path().join("cache/coder"))?.count();
    assert_eq!(entries, 1);
    Ok(())
}
