//! Fuzzing coderd from its own OpenAPI document with schemathesis (issue 11): a real `coder
//! server` with an owner, a member and objects for the paths to name, then schemathesis as the
//! member and as the owner. Its checks (no 5xx, every status and body as documented, a refused
//! write changes nothing) and the exclusions live in `crates/cli/tests/fuzz/schemathesis.toml`.
//!
//! Bounded for the suite: `CODER_FUZZ_MAX_EXAMPLES` cases per operation and `CODER_FUZZ_MAX_TIME`
//! seconds per run; `CODER_FUZZ_ARGS` adds schemathesis flags (`--seed N`,
//! `--include-path-regex ...`). `scripts/fuzz.sh` runs the same test with larger bounds. Reports
//! go to `target/tmp/fuzz/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use codersdk::Client;
use codersdk::proto::{Agent, Resource};
use codersdk::users::{CreateUserRequest, LoginWithPasswordRequest};
use provisionerd::engines::echo::{BuildStage, EchoTemplate};
use serde_json::{Value, json};
use testutil::PASSWORD;

use crate::harness::{Deployment, stop_gracefully};

const FUZZ_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz");

/// Both runs together stay within a few minutes on a 2-core machine.
const DEFAULT_MAX_EXAMPLES: u32 = 10;
const DEFAULT_MAX_TIME_SECS: u32 = 75;

/// The schemathesis executable: in the virtualenv `scripts/setup.sh --tests` makes
/// (`CODER_TEST_SCHEMATHESIS_VENV`, default `~/.cache/coder-rs/schemathesis-venv`), else on
/// PATH. `None` when missing and the environment allows skipping.
fn schemathesis() -> anyhow::Result<Option<PathBuf>> {
    let venv = std::env::var_os("CODER_TEST_SCHEMATHESIS_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".cache/coder-rs/schemathesis-venv"))
        })
        .map(|venv| venv.join("bin/schemathesis"));
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("schemathesis"))
            .find(|candidate| candidate.is_file())
    });
    if let Some(found) = venv.filter(|p| p.is_file()).or(on_path) {
        return Ok(Some(found));
    }
    let message = "schemathesis is missing; scripts/setup.sh --tests installs it into \
                   ~/.cache/coder-rs/schemathesis-venv";
    // CI must run the fuzzer: a skip there would pass without testing anything.
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !ci && std::env::var("CODER_FUZZ_OPTIONAL").as_deref() == Ok("1") {
        eprintln!("{message}; skipping because CODER_FUZZ_OPTIONAL=1");
        return Ok(None);
    }
    bail!("{message}; or set CODER_FUZZ_OPTIONAL=1 (outside CI) to skip")
}

fn env_number(name: &str, default: u32) -> anyhow::Result<u32> {
    match std::env::var(name) {
        Ok(v) => v.parse().with_context(|| format!("{name}={v:?}")),
        Err(_) => Ok(default),
    }
}

/// A template whose workspaces have one resource with an agent (which never connects), so the
/// agent paths have something to name.
fn template() -> EchoTemplate {
    let stage = BuildStage {
        resources: vec![Resource {
            name: "box".into(),
            kind: "null_resource".into(),
            agents: vec![Agent {
                name: "main".into(),
                operating_system: "linux".into(),
                architecture: "amd64".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    EchoTemplate {
        start: Some(stage),
        stop: Some(BuildStage::default()),
        delete: Some(BuildStage::default()),
        ..Default::default()
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> anyhow::Result<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("{pointer} in {v}"))
}

/// Creates what the fuzzed paths name and returns the fixtures `hooks.py` reads, and the
/// member's token.
async fn fixtures(d: &Deployment) -> anyhow::Result<(Value, String)> {
    let owner = &d.owner;
    // `victim` is there for the owner's run to suspend, demote or delete: the member's token
    // is done with by then, and nothing else depends on the victim.
    for (username, email) in [
        ("member", "member@example.com"),
        ("victim", "victim@example.com"),
    ] {
        owner
            .create_user(&CreateUserRequest {
                email: email.into(),
                username: username.into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await?;
    }
    let member_token = Client::new(owner.url().clone())
        .login_with_password(&LoginWithPasswordRequest {
            email: "member@example.com".into(),
            password: PASSWORD.into(),
        })
        .await?
        .session_token;
    let org: Value = owner
        .post("/api/v2/organizations", &json!({"name": "fuzz-org"}))
        .await?;

    // Builds need a daemon; it is stopped before fuzzing so that the workspaces the fuzzer
    // creates stay pending instead of changing state under `rejected_writes_nothing`.
    let daemon = d.provisionerd(&d.token, "fixtures", &[])?;
    d.wait_daemon("fixtures").await?;
    let dir = d.template_dir("fuzz", &template())?;
    let dir = dir.to_str().context("template dir")?;
    d.ok(&[
        "templates",
        "push",
        "fuzz",
        "-d",
        dir,
        "--provisioner",
        "echo",
        "--version-name",
        "v1",
        "--yes",
    ])?;
    d.ok(&["create", "dev", "-t", "fuzz", "--yes"])?;
    d.ok_as(&member_token, &["create", "mine", "-t", "fuzz", "--yes"])?;
    stop_gracefully(daemon)?;
    d.ok(&["tokens", "create", "--name", "fuzz"])?;
    d.ok(&["provisioner", "keys", "create", "fuzz"])?;

    let org_id = str_at(&org, "/id")?;
    let default_org: Value = owner.get("/api/v2/organizations/coder").await?;
    let default_org_id = str_at(&default_org, "/id")?;
    let template: Value = owner
        .get("/api/v2/organizations/coder/templates/fuzz")
        .await?;
    let template_id = str_at(&template, "/id")?;
    let version_id = str_at(&template, "/active_version_id")?;
    let version: Value = owner
        .get(&format!("/api/v2/templateversions/{version_id}"))
        .await?;
    let dev: Value = owner.get("/api/v2/users/admin/workspace/dev").await?;
    let mine: Value = owner.get("/api/v2/users/member/workspace/mine").await?;
    let member: Value = owner.get("/api/v2/users/member").await?;
    let victim: Value = owner.get("/api/v2/users/victim").await?;
    let tokens: Value = owner.get("/api/v2/users/admin/keys/tokens").await?;
    let fuzz_key = tokens
        .as_array()
        .and_then(|t| t.iter().find(|k| k["token_name"] == "fuzz"))
        .context("the fuzz token")?;
    let mut workspace_ids = Vec::new();
    let mut build_ids = Vec::new();
    let mut job_ids = vec![str_at(&version, "/job/id")?.to_string()];
    let mut agent_ids = Vec::new();
    for ws in [&dev, &mine] {
        workspace_ids.push(str_at(ws, "/id")?.to_string());
        build_ids.push(str_at(ws, "/latest_build/id")?.to_string());
        job_ids.push(str_at(ws, "/latest_build/job/id")?.to_string());
        agent_ids.push(str_at(ws, "/latest_build/resources/0/agents/0/id")?.to_string());
    }

    let fixtures = json!({
        "url": d.url(),
        "owner_token": d.token,
        // By parameter name, on every path.
        "params": {
            "organization": ["coder", "fuzz-org", default_org_id, org_id],
            "user": ["me", "admin", "member", "victim", str_at(&member, "/id")?, str_at(&victim, "/id")?],
        },
        // By path prefix; a longer prefix overrides a shorter one.
        "paths": {
            "/api/v2/files/": {"id": [str_at(&version, "/job/file_id")?]},
            "/api/v2/organizations/{organization}/provisionerjobs/": {"job": job_ids},
            "/api/v2/organizations/{organization}/provisionerkeys/": {"name": ["fuzz"]},
            "/api/v2/organizations/{organization}/templates/": {"name": ["fuzz"]},
            "/api/v2/templates/": {"id": [template_id], "name": ["v1"]},
            "/api/v2/templateversions/": {"id": [version_id]},
            "/api/v2/users/{user}/keys/": {"id": [str_at(fuzz_key, "/id")?], "name": ["fuzz"]},
            "/api/v2/users/{user}/workspace/": {"name": ["dev", "mine"], "number": ["1"]},
            "/api/v2/workspaceagents/": {"id": agent_ids},
            "/api/v2/workspacebuilds/": {"id": build_ids},
            "/api/v2/workspaces/": {"id": workspace_ids},
        },
        // What `rejected_writes_nothing` lists, as the owner, before and after a refused write.
        "state": [
            "/api/v2/users",
            "/api/v2/organizations",
            "/api/v2/organizations/coder/members",
            "/api/v2/organizations/fuzz-org/members",
            "/api/v2/organizations/coder/provisionerkeys",
            "/api/v2/templates",
            format!("/api/v2/templates/{template_id}/versions"),
            "/api/v2/workspaces",
            format!("/api/v2/workspaces/{}/builds", str_at(&dev, "/id")?),
            "/api/v2/users/admin/keys/tokens",
            "/api/v2/users/member/keys/tokens",
        ],
    });
    Ok((fixtures, member_token))
}

/// One schemathesis run as `who` (the token's owner); the error carries its report.
fn run(
    schemathesis: &Path,
    d: &Deployment,
    fixtures: &Path,
    who: &str,
    token: &str,
) -> anyhow::Result<()> {
    let max_examples = env_number("CODER_FUZZ_MAX_EXAMPLES", DEFAULT_MAX_EXAMPLES)?;
    let max_time = env_number("CODER_FUZZ_MAX_TIME", DEFAULT_MAX_TIME_SECS)?;
    // Kept after the test (the deployment's directory is not) for reading a failure.
    let reports = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    std::fs::create_dir_all(&reports)?;
    let log_path = reports.join(format!("schemathesis-{who}.log"));
    // More schemathesis flags, for people narrowing a run (scripts/fuzz.sh passes its own).
    let extra = std::env::var("CODER_FUZZ_ARGS").unwrap_or_default();
    let log = std::fs::File::create(&log_path)?;
    let url = d.url();
    let started = Instant::now();
    let status = Command::new(schemathesis)
        // hooks.py is named relative to the configuration's directory.
        .current_dir(FUZZ_DIR)
        .env("CODER_FUZZ_FIXTURES", fixtures)
        // Nothing left in the source tree: no __pycache__ of hooks.py, and Hypothesis's caches
        // (character tables) beside the reports instead of in `.hypothesis` here.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HYPOTHESIS_STORAGE_DIRECTORY", reports.join("hypothesis"))
        .args(["--config-file", "schemathesis.toml", "--no-color", "run"])
        .arg(format!("{url}/api/v2/openapi.json"))
        .args(["--url", &url])
        .args(["--header", &format!("Coder-Session-Token: {token}")])
        .args(["--max-examples", &max_examples.to_string()])
        .args(["--max-time", &max_time.to_string()])
        .args(extra.split_whitespace())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()?;
    let report = std::fs::read_to_string(&log_path)?;
    eprintln!(
        "schemathesis as {who}: {status} in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    if !status.success() {
        // The summary is at the end; the whole report stays in target/tmp/fuzz/.
        let tail: Vec<&str> = report.lines().rev().take(400).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "schemathesis as {who} failed ({status}); report in {}:\n{}",
            log_path.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_nothing() -> anyhow::Result<()> {
    let Some(schemathesis) = schemathesis()? else {
        return Ok(());
    };
    let started = Instant::now();
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let (fixtures, member_token) = fixtures(&d).await?;
    let fixtures_path = d.dir.path().join("fixtures.json");
    std::fs::write(&fixtures_path, serde_json::to_vec_pretty(&fixtures)?)?;
    eprintln!("fixtures ready in {:.0}s", started.elapsed().as_secs_f64());
    // The member first: the owner's run may suspend, demote or delete the member.
    let member = run(&schemathesis, &d, &fixtures_path, "member", &member_token);
    let owner = run(&schemathesis, &d, &fixtures_path, "owner", &d.token);
    match (member, owner) {
        (Ok(()), Ok(())) => {}
        (Err(e), Ok(())) | (Ok(()), Err(e)) => return Err(e),
        (Err(m), Err(o)) => bail!("{m}\n\n{o}"),
    }
    eprintln!("fuzzed in {:.0}s", started.elapsed().as_secs_f64());
    // Killing a server that a 5xx may have left unwell is not enough: it must still answer.
    tokio::time::timeout(Duration::from_secs(10), d.owner.build_info()).await??;
    Ok(())
}
