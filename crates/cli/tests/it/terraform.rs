//! Terraform through the real binaries: `coder server` (built-in daemons) and external
//! `coder provisionerd start` daemons running the real `terraform` (from PATH) with our
//! provider served by the `coder` binary itself, on the example templates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use codersdk::provisioners::{ProvisionerJob, ProvisionerJobStatus};
use codersdk::workspaces::{Workspace, WorkspaceResource, WorkspaceStatus};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use testutil::eventually;

use crate::harness::{Deployment, stop_gracefully};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/templates");

/// The `terraform` block of a template using our provider.
pub(crate) const CODER_PROVIDER: &str = r#"
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}
"#;

/// Pushes a template whose `main.tf` is our provider's block followed by `main`.
pub(crate) fn push_with_provider(d: &Deployment, name: &str, main: &str) -> anyhow::Result<()> {
    let dir = d.dir.path().join("templates").join(name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.tf"), format!("{CODER_PROVIDER}{main}"))?;
    d.ok(&[
        "templates",
        "push",
        name,
        "-d",
        dir.to_str().context("utf-8 path")?,
        "--yes",
    ])?;
    Ok(())
}

/// Whether to run: a missing `terraform` fails the test with a message naming it, unless
/// `CODER_TERRAFORM_OPTIONAL=1` says to skip instead.
pub(crate) fn terraform() -> anyhow::Result<Option<PathBuf>> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("terraform"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_some() {
        return Ok(found);
    }
    let message = "the `terraform` binary is not on PATH; these tests run the real terraform \
                   (1.5 or newer)";
    if std::env::var("CODER_TERRAFORM_OPTIONAL").as_deref() == Ok("1") {
        eprintln!("{message}; skipping because CODER_TERRAFORM_OPTIONAL=1");
        return Ok(None);
    }
    bail!("{message}; install it, or set CODER_TERRAFORM_OPTIONAL=1 to skip these tests")
}

pub(crate) fn example(name: &str) -> String {
    format!("{EXAMPLES}/{name}")
}

fn resource<'a>(
    resources: &'a [WorkspaceResource],
    name: &str,
) -> anyhow::Result<&'a WorkspaceResource> {
    resources
        .iter()
        .find(|r| r.name == name)
        .with_context(|| format!("no resource {name} in {resources:#?}"))
}

fn names(resources: &[WorkspaceResource]) -> Vec<String> {
    let mut names: Vec<String> = resources
        .iter()
        .map(|r| format!("{}.{}", r.kind, r.name))
        .collect();
    names.sort();
    names
}

/// A live (not zombie) process.
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

pub(crate) fn pid_in(file: &Path) -> anyhow::Result<i32> {
    Ok(std::fs::read_to_string(file)
        .with_context(|| format!("reading {}", file.display()))?
        .trim()
        .parse()?)
}

/// Pushes the `local-process` example with its workspaces' homes under `workspaces`; returns
/// what the push printed.
pub(crate) fn push_local_process(d: &Deployment, workspaces: &Path) -> anyhow::Result<String> {
    d.ok(&[
        "templates",
        "push",
        "local-process",
        "-d",
        &example("local-process"),
        "--variable",
        &format!("workspaces_dir={}", workspaces.display()),
        "--yes",
    ])
}

/// Pushes the `local-process` example with `extra` HCL appended, as template `name`, its
/// workspaces' homes under `workspaces`.
pub(crate) fn push_local_process_with(
    d: &Deployment,
    name: &str,
    workspaces: &Path,
    extra: &str,
) -> anyhow::Result<String> {
    let dir = d.dir.path().join(name);
    std::fs::create_dir_all(&dir)?;
    let example = std::fs::read_to_string(format!("{}/main.tf", example("local-process")))?;
    std::fs::write(dir.join("main.tf"), format!("{example}\n{extra}"))?;
    d.ok(&[
        "templates",
        "push",
        name,
        "-d",
        dir.to_str().context("utf-8 path")?,
        "--variable",
        &format!("workspaces_dir={}", workspaces.display()),
        "--yes",
    ])
}

/// Kills a workspace process a failed test left behind.
pub(crate) struct Reaper(pub(crate) PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(pid) = pid_in(&self.0) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

async fn latest(d: &Deployment, name: &str) -> anyhow::Result<Workspace> {
    d.workspace(name).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_process_workspace_lives_through_start_stop_start_and_delete() -> anyhow::Result<()>
{
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let workspaces = d.dir.path().join("workspaces");
    let out = push_local_process(&d, &workspaces)?;
    assert!(out.contains("Detecting persistent resources"), "{out}");

    // The import saw the variable, the parameter and both transitions' resources.
    let template = d.owner.template_by_name("coder", "local-process").await?;
    let version = template.active_version_id;
    let variables = d.owner.template_version_variables(version).await?;
    assert_eq!(variables.len(), 1, "{variables:?}");
    let parameters = d.owner.template_version_rich_parameters(version).await?;
    assert_eq!(parameters.len(), 1);
    assert_eq!(parameters[0].name, "greeting");
    let imported = d.owner.template_version_resources(version).await?;
    assert!(
        imported
            .iter()
            .any(|r| r.name == "process" && r.workspace_transition == "start"),
        "{imported:#?}"
    );
    assert!(
        imported
            .iter()
            .any(|r| r.name == "home" && r.workspace_transition == "stop"),
        "{imported:#?}"
    );

    let out = d.ok(&[
        "create",
        "dev",
        "-t",
        "local-process",
        "--parameter",
        "greeting=howdy",
        "--yes",
    ])?;
    assert!(
        out.contains("Apply complete!"),
        "build logs are streamed: {out}"
    );
    let ws = latest(&d, "dev").await?;
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    let home = workspaces.join(ws.id.to_string());
    let pid_file = home.join(".coder-workspace.pid");
    let _reaper = Reaper(pid_file.clone());

    // What Coder shows: the home with its metadata, the process with the agent and its app.
    let resources = &ws.latest_build.resources;
    assert_eq!(
        names(resources),
        ["terraform_data.home", "terraform_data.process"]
    );
    let home_resource = resource(resources, "home")?;
    assert_eq!(home_resource.metadata.len(), 1);
    assert_eq!(home_resource.metadata[0].key, "path");
    assert_eq!(home_resource.metadata[0].value, home.display().to_string());
    let process = resource(resources, "process")?;
    assert_eq!(process.agents.len(), 1);
    let agent = &process.agents[0];
    assert_eq!(agent.name, "main");
    assert_eq!(agent.operating_system, "linux");
    assert_eq!(agent.directory, home.display().to_string());
    assert_eq!(agent.apps.len(), 1);
    assert_eq!(agent.apps[0].slug, "workspace-log");

    // The process runs detached from terraform: the init script, which becomes the agent
    // (crates/cli/tests/it/agent.rs follows the agent itself).
    let first = pid_in(&pid_file)?;
    assert!(alive(first), "the workspace process runs");
    eventually(Duration::from_secs(60), "the agent's greeting", || async {
        let lines = d.owner.workspace_agent_logs(agent.id).await?;
        Ok(lines.iter().any(|l| l.output.starts_with("howdy from ")))
    })
    .await?;
    let exe = std::fs::read_link(format!("/proc/{first}/exe"))?;
    assert!(
        exe.starts_with(home.join(".cache/coder")),
        "the init script keeps the binary in the home's cache: {}",
        exe.display()
    );
    std::fs::write(home.join("notes.txt"), "kept across stops")?;

    // Stop: the process goes, the home stays.
    d.ok(&["stop", "dev", "--yes"])?;
    let ws = latest(&d, "dev").await?;
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Stopped);
    assert_eq!(names(&ws.latest_build.resources), ["terraform_data.home"]);
    eventually(Duration::from_secs(10), "the process to stop", || async {
        Ok(!alive(first))
    })
    .await?;
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt"))?,
        "kept across stops"
    );
    assert!(!pid_file.exists());
    assert!(
        home.join(".coder-last-stop").exists(),
        "the agent ran its shutdown script"
    );

    // Start: a new process in the same home.
    d.ok(&["start", "dev", "--yes"])?;
    let second = pid_in(&pid_file)?;
    assert_ne!(first, second);
    assert!(alive(second));
    assert!(home.join("notes.txt").exists());
    // coderd still serves the binary the first start kept: 304, nothing downloaded.
    eventually(
        Duration::from_secs(30),
        "the init script's cache hit",
        || async {
            let log =
                std::fs::read_to_string(home.join(".coder-workspace.log")).unwrap_or_default();
            Ok(log.contains("is current"))
        },
    )
    .await?;

    // Delete: nothing is left.
    d.ok(&["delete", "dev", "--yes"])?;
    eventually(Duration::from_secs(10), "the process to stop", || async {
        Ok(!alive(second))
    })
    .await?;
    assert!(!home.exists(), "the home directory is removed");
    ensure!(d.workspace("dev").await.is_err(), "the workspace is gone");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn parameters_and_apps_show_as_coder_shows_them() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    d.ok(&[
        "templates",
        "push",
        "parameters-and-apps",
        "-d",
        &example("parameters-and-apps"),
        "--yes",
    ])?;
    let template = d
        .owner
        .template_by_name("coder", "parameters-and-apps")
        .await?;
    let parameters = d
        .owner
        .template_version_rich_parameters(template.active_version_id)
        .await?;
    // By their `order`, as Coder lists them.
    let mut declared: Vec<(i32, &str, &str)> = parameters
        .iter()
        .map(|p| (p.order, p.name.as_str(), p.kind.as_str()))
        .collect();
    declared.sort_unstable();
    assert_eq!(
        declared,
        [
            (1, "region", "string"),
            (2, "cpus", "number"),
            (3, "disk_gb", "number"),
            (4, "dotfiles_repo", "string"),
            (5, "jupyter", "bool"),
            (6, "extensions", "list(string)")
        ]
    );
    let parameter = |name: &str| {
        parameters
            .iter()
            .find(|p| p.name == name)
            .with_context(|| format!("parameter {name}"))
    };
    let region = parameter("region")?;
    assert_eq!(region.options.len(), 2);
    assert!(!region.mutable);
    assert_eq!(parameter("cpus")?.validation_max, Some(8));
    assert_eq!(parameter("disk_gb")?.validation_monotonic, "increasing");
    assert_eq!(
        parameter("dotfiles_repo")?.validation_error,
        "Use an https:// URL, or leave it empty."
    );

    d.ok(&[
        "create",
        "tour",
        "-t",
        "parameters-and-apps",
        "--parameter",
        "region=us-east",
        "--parameter",
        "cpus=4",
        "--parameter",
        "jupyter=true",
        "--yes",
    ])?;
    let ws = latest(&d, "tour").await?;
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    let resources = &ws.latest_build.resources;
    // Like Coder, every managed resource but agents, apps, scripts and metadata is listed.
    assert_eq!(
        names(resources),
        [
            "coder_env.editor",
            "terraform_data.home_disk",
            "terraform_data.machine"
        ]
    );
    let machine = resource(resources, "machine")?;
    assert_eq!(machine.daily_cost, 20);
    // A sensitive item's value is not served.
    let items: Vec<(&str, &str, bool)> = machine
        .metadata
        .iter()
        .map(|m| (m.key.as_str(), m.value.as_str(), m.sensitive))
        .collect();
    assert_eq!(
        items,
        [
            ("region", "us-east", false),
            ("cpus", "4", false),
            ("owner", "", true)
        ]
    );
    assert_eq!(resource(resources, "home_disk")?.metadata[0].value, "10 GB");

    let agent = &machine.agents[0];
    assert_eq!(agent.name, "dev");
    assert_eq!(
        agent
            .environment_variables
            .get("REGION")
            .map(String::as_str),
        Some("us-east")
    );
    let mut apps: Vec<&str> = agent.apps.iter().map(|a| a.slug.as_str()).collect();
    apps.sort_unstable();
    assert_eq!(apps, ["code-server", "docs", "jupyter"]);
    let code = agent
        .apps
        .iter()
        .find(|a| a.slug == "code-server")
        .context("code-server")?;
    assert_eq!(code.healthcheck.as_ref().map(|h| h.threshold), Some(6));
    assert!(agent.apps.iter().any(|a| a.slug == "docs" && a.external));
    let mut display_apps = agent.display_apps.clone();
    display_apps.sort();
    assert_eq!(display_apps, ["ssh_helper", "vscode", "web_terminal"]);
    assert_eq!(agent.scripts.len(), 1);
    assert_eq!(agent.scripts[0].display_name, "Dotfiles");
    assert!(agent.scripts[0].run_on_start);

    Ok(())
}

/// Fails at plan for a workspace named `doomed-plan`, at apply for `doomed-apply`, and works
/// for any other (the import plans with the name `default`).
const FAILING: &str = r#"
data "coder_workspace" "me" {}

resource "terraform_data" "checked" {
  count = data.coder_workspace.me.start_count
  input = data.coder_workspace.me.name
  lifecycle {
    precondition {
      condition     = data.coder_workspace.me.name != "doomed-plan"
      error_message = "workspaces named doomed-plan cannot be planned"
    }
  }
}

resource "terraform_data" "built" {
  count = data.coder_workspace.me.start_count
  provisioner "local-exec" {
    command     = "if [ \"$NAME\" = doomed-apply ]; then echo 'cannot build this one' >&2; exit 3; fi"
    environment = { NAME = data.coder_workspace.me.name }
  }
}
"#;

/// The failed build of `name`, after `coder create` exited non-zero saying `expected`.
async fn failed_build(
    d: &Deployment,
    name: &str,
    expected: &str,
) -> anyhow::Result<(codersdk::workspaces::WorkspaceBuild, String)> {
    let out = d.run(&["create", name, "-t", "failing", "--yes"])?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(!out.status.success(), "{said}");
    ensure!(
        said.contains(expected),
        "`coder create` shows {expected:?}: {said}"
    );
    let build = latest(d, name).await?.latest_build;
    ensure!(
        build.status == WorkspaceStatus::Failed,
        "{:?}",
        build.status
    );
    let logs: String = d
        .owner
        .workspace_build_logs(build.id)
        .await?
        .iter()
        .map(|l| format!("[{}] {}: {}\n", l.log_level, l.stage, l.output))
        .collect();
    ensure!(
        logs.contains(expected),
        "the build logs show {expected:?}: {logs}"
    );
    Ok((build, logs))
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_plans_and_applies_show_terraforms_error() -> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    let dir = d.dir.path().join("templates/failing");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.tf"), format!("{CODER_PROVIDER}{FAILING}"))?;
    d.ok(&[
        "templates",
        "push",
        "failing",
        "-d",
        dir.to_str().context("utf-8 path")?,
        "--yes",
    ])?;

    let (build, logs) = failed_build(
        &d,
        "doomed-plan",
        "workspaces named doomed-plan cannot be planned",
    )
    .await?;
    assert!(
        build.job.error.contains("terraform plan"),
        "{}",
        build.job.error
    );
    assert!(
        build
            .job
            .error
            .contains("workspaces named doomed-plan cannot be planned"),
        "{}",
        build.job.error
    );
    assert!(
        logs.contains("[error] Planning infrastructure: Error: Resource precondition failed"),
        "{logs}"
    );

    let (build, logs) = failed_build(&d, "doomed-apply", "cannot build this one").await?;
    assert!(
        build.job.error.contains("terraform apply"),
        "{}",
        build.job.error
    );
    assert!(
        build.job.error.contains("exit status 3"),
        "{}",
        build.job.error
    );
    assert!(
        logs.contains("[error] Starting workspace: Error: local-exec provisioner error"),
        "{logs}"
    );
    // The failed apply's state is kept: the resource created before the failure is in it.
    let state = String::from_utf8(d.owner.workspace_build_state(build.id).await?)?;
    assert!(state.contains("\"checked\""), "{state}");

    // And a workspace with a usable name builds.
    d.ok(&["create", "fine", "-t", "failing", "--yes"])?;
    Ok(())
}

/// A terraform wrapper that records each command it runs in `<dir>/<name>.log`.
fn recording_terraform(dir: &Path, name: &str, real: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    let log = dir.join(format!("{name}.log"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

const SMALL: &str = r#"data "coder_workspace" "me" {}
resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}
resource "terraform_data" "box" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn external_daemons_each_run_their_own_terraform() -> anyhow::Result<()> {
    let Some(real) = terraform()? else {
        return Ok(());
    };
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let bin = d.dir.path().join("bin");
    std::fs::create_dir_all(&bin)?;
    let mut daemons = Vec::new();
    for pool in ["a", "b"] {
        let wrapper = recording_terraform(&bin, &format!("terraform-{pool}"), &real)?;
        let cache = d.dir.path().join(format!("cache-{pool}"));
        daemons.push(d.spawn_provisionerd(
            &d.token,
            &format!("tf-{pool}"),
            &[
                "--tag",
                &format!("pool={pool}"),
                "--terraform-path",
                wrapper.to_str().context("utf-8 path")?,
                "--cache-dir",
                cache.to_str().context("utf-8 path")?,
            ],
        )?);
        let dir = d.dir.path().join(format!("templates/small-{pool}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("main.tf"), format!("{CODER_PROVIDER}{SMALL}"))?;
    }
    d.wait_daemon("tf-a").await?;
    d.wait_daemon("tf-b").await?;

    // Both pools import, then build, at the same time.
    let both = |args: &dyn Fn(&str) -> Vec<String>| -> anyhow::Result<()> {
        let children: Vec<_> = ["a", "b"]
            .iter()
            .map(|pool| {
                d.coder(&d.token)
                    .args(args(pool))
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
            })
            .collect::<Result<_, _>>()?;
        for child in children {
            let output = child.wait_with_output()?;
            ensure!(
                output.status.success(),
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    };
    let templates = d.dir.path().join("templates");
    both(&|pool| {
        vec![
            "templates".into(),
            "push".into(),
            format!("small-{pool}"),
            "-d".into(),
            templates
                .join(format!("small-{pool}"))
                .display()
                .to_string(),
            "--provisioner-tag".into(),
            format!("pool={pool}"),
            "--yes".into(),
        ]
    })?;
    both(&|pool| {
        vec![
            "create".into(),
            format!("ws-{pool}"),
            "-t".into(),
            format!("small-{pool}"),
            "--yes".into(),
        ]
    })?;

    for pool in ["a", "b"] {
        let ws = latest(&d, &format!("ws-{pool}")).await?;
        assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
        assert_eq!(ws.latest_build.resources[0].agents.len(), 1);
        let ran = std::fs::read_to_string(bin.join(format!("terraform-{pool}.log")))?;
        // An import (version, init, plan, show, graph, plan, show) and a build (version, init,
        // plan, show, graph, apply, show).
        assert_eq!(ran.lines().filter(|l| *l == "apply").count(), 1, "{ran}");
        assert_eq!(ran.lines().filter(|l| *l == "plan").count(), 3, "{ran}");
    }
    let jobs: Vec<ProvisionerJob> =
        serde_json::from_str(&d.ok(&["provisioner", "jobs", "list", "-o", "json"])?)?;
    assert_eq!(jobs.len(), 4);
    for job in &jobs {
        assert_eq!(job.status, ProvisionerJobStatus::Succeeded);
        let pool = job.tags.get("pool").context("pool tag")?;
        assert_eq!(job.worker_name, format!("tf-{pool}"));
    }
    for daemon in daemons {
        assert!(stop_gracefully(daemon)?.success());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_daemon_refuses_to_start_without_a_usable_terraform() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;
    let out = d
        .coder(&d.token)
        .args([
            "provisionerd",
            "start",
            "--terraform-path",
            "/nonexistent/terraform",
            "--cache-dir",
            d.dir.path().join("cache").to_str().context("utf-8 path")?,
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("this provisioner daemon runs terraform jobs"),
        "{stderr}"
    );
    assert!(stderr.contains("/nonexistent/terraform"), "{stderr}");
    Ok(())
}
