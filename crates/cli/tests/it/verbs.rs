//! Coder's CLI verbs this round added, each through the real binary against a real server:
//! `version`, `whoami`, `rename`, `favorite`/`unfavorite`, `autoupdate`, `state pull`, `logs`,
//! `open`, `completion`, `secret --env/--file`, `provisioner start|jobs cancel`, `delete --orphan`.

use std::time::Duration;

use codersdk::workspaces::{CreateWorkspaceBuildRequest, WorkspaceStatus};
use provisionerd::engines::echo::{BuildStage, EchoLog, EchoTemplate};
use serde_json::Value;
use testutil::eventually;

use crate::harness::Deployment;

fn echo_template() -> EchoTemplate {
    EchoTemplate {
        start: Some(BuildStage {
            logs: vec![EchoLog::info("hello from the start build")],
            state: Some("{\"state\": \"of the start build\"}".into()),
            ..BuildStage::default()
        }),
        stop: Some(BuildStage {
            hang: true,
            ..BuildStage::default()
        }),
        ..EchoTemplate::default()
    }
}

fn push(d: &Deployment, name: &str, echo: &EchoTemplate) -> anyhow::Result<()> {
    let dir = d.template_dir(name, echo)?;
    let dir = dir.to_str().unwrap_or_default().to_string();
    d.ok(&[
        "templates",
        "push",
        name,
        "-d",
        &dir,
        "--provisioner",
        "echo",
        "--yes",
    ])?;
    Ok(())
}

fn fails(d: &Deployment, args: &[&str]) -> anyhow::Result<String> {
    let out = d.run(args)?;
    anyhow::ensure!(!out.status.success(), "{args:?} succeeded");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn coders_verbs_work_through_the_binary() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1", "--allow-workspace-renames"]).await?;
    push(&d, "echo", &echo_template())?;
    d.ok(&["create", "dev", "-t", "echo", "--yes"])?;
    d.ok(&["create", "zed", "-t", "echo", "--yes"])?;

    // version and whoami, in each output format.
    let text = d.ok(&["version"])?;
    assert!(
        text.starts_with(&format!("Coder {}", codersdk::version::VERSION)),
        "{text}"
    );
    let whoami = d.ok(&["whoami"])?;
    assert!(whoami.contains("You're authenticated as admin"), "{whoami}");
    let json: Value = serde_json::from_str(&d.ok(&["whoami", "-o", "json"])?)?;
    assert_eq!(json[0]["username"], "admin");
    assert!(
        json[0]["roles"]["*"].to_string().contains("Owner"),
        "{json}"
    );
    let table = d.ok(&["whoami", "-o", "table", "-c", "username,id"])?;
    assert!(
        table.contains("USERNAME") && table.contains("admin"),
        "{table}"
    );

    // Favorites come first in the owner's list and say so.
    d.ok(&["favorite", "zed"])?;
    let listed = d.ok(&["list", "-o", "json"])?;
    let listed: Value = serde_json::from_str(&listed)?;
    assert_eq!(listed[0]["name"], "zed", "{listed}");
    assert_eq!(listed[0]["favorite"], true);
    d.ok(&["unfavorite", "zed"])?;
    assert!(!d.workspace("zed").await?.favorite);

    // Rename (confirmed), and a name that is taken.
    d.ok(&["rename", "zed", "alpha", "--yes"])?;
    assert_eq!(d.workspace("alpha").await?.name, "alpha");
    let err = fails(&d, &["rename", "alpha", "dev", "--yes"])?;
    assert!(
        err.contains("409") && err.contains("already exists"),
        "{err}"
    );
    let err = fails(&d, &["rename", "alpha", "not_valid", "--yes"])?;
    assert!(err.contains("name:"), "{err}");

    // Auto-updates.
    let out = d.ok(&["autoupdate", "dev", "Always"])?;
    assert!(out.contains("\"always\""), "{out}");
    assert_eq!(d.workspace("dev").await?.automatic_updates, "always");
    let err = fails(&d, &["autoupdate", "dev", "sometimes"])?;
    assert!(err.contains("invalid value 'sometimes'"), "{err}");

    // The build's state and logs.
    let state = d.ok(&["state", "pull", "dev"])?;
    assert!(state.contains("of the start build"), "{state}");
    let saved = d.dir.path().join("dev.tfstate");
    d.ok(&[
        "state",
        "pull",
        "dev",
        saved.to_str().unwrap_or_default(),
        "-b",
        "1",
    ])?;
    assert!(std::fs::read_to_string(&saved)?.contains("of the start build"));
    let logs = d.ok(&["logs", "dev"])?;
    assert!(logs.contains("hello from the start build"), "{logs}");
    let err = fails(&d, &["logs", "dev", "-n", "7"])?;
    assert!(err.contains("no build 7"), "{err}");

    // The VS Code link, with the agent's directory and a fresh token when asked.
    let ws = d.workspace("dev").await?;
    let err = fails(&d, &["open", "vscode", "dev"])?;
    assert!(err.contains("has no agent"), "{err}");
    let err = fails(&d, &["open", "app", "dev", "web", "--region", "mars"])?;
    assert!(err.contains("\"mars\" does not exist"), "{err}");
    assert_eq!(ws.name, "dev");

    // Completion scripts for each shell.
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let script = d.ok(&["completion", "--shell", shell, "--print"])?;
        assert!(
            script.contains("whoami") && script.contains("port-forward"),
            "{shell}"
        );
    }

    // A stop that hangs, canceled by its job id.
    let stop = d
        .owner
        .create_workspace_build(
            ws.id,
            &CreateWorkspaceBuildRequest {
                transition: "stop".into(),
                ..Default::default()
            },
        )
        .await?;
    eventually(Duration::from_secs(30), "the stop running", || async {
        Ok(d.owner
            .workspace_build(stop.id)
            .await?
            .job
            .started_at
            .is_some())
    })
    .await?;
    let out = d.ok(&["provisioner", "jobs", "cancel", &stop.job.id.to_string()])?;
    assert!(out.contains("canceled"), "{out}");
    eventually(Duration::from_secs(30), "the stop canceled", || async {
        let status = d.workspace("dev").await?.latest_build.status;
        Ok(status == WorkspaceStatus::Canceled)
    })
    .await?;

    // Orphaned: the record goes, the (hanging) delete of its resources never runs.
    d.ok(&["delete", "dev", "--orphan", "--yes"])?;
    let gone = d.owner.workspace_with_deleted(ws.id).await?;
    assert_eq!(gone.latest_build.status, WorkspaceStatus::Deleted);

    // Coder's name for running a daemon.
    let help = d.ok(&["provisioner", "start", "--help"])?;
    assert!(help.contains("--tag"), "{help}");

    // Secrets under Coder's singular verb and flags.
    let out = d.with_stdin(
        &[
            "secret",
            "create",
            "api-key",
            "--env",
            "API_KEY",
            "--file",
            "~/.api-key",
        ],
        "s3cret",
    )?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = d.ok(&["secret", "list", "-o", "json"])?;
    assert!(
        listed.contains("API_KEY") && listed.contains("~/.api-key"),
        "{listed}"
    );
    assert!(!listed.contains("s3cret"), "values are never listed");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn renames_are_refused_unless_the_deployment_allows_them() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "echo", &EchoTemplate::default())?;
    d.ok(&["create", "dev", "-t", "echo", "--yes"])?;
    let err = fails(&d, &["rename", "dev", "other", "--yes"])?;
    assert!(err.contains("renames are not allowed"), "{err}");
    assert!(!d.workspace("dev").await?.allow_renames);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn state_push_starts_a_build_from_the_pushed_state_or_replaces_it() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "echo", &EchoTemplate::default())?;
    d.ok(&["create", "dev", "-t", "echo", "--yes"])?;
    let file = d.dir.path().join("pushed.tfstate");
    std::fs::write(&file, "x".repeat(1234))?;
    let path = file.to_str().unwrap_or_default();

    // A new start build begins from the file: the echo provisioner says how long it was.
    d.ok(&["state", "push", "dev", path])?;
    let ws = d.workspace("dev").await?;
    assert_eq!(ws.latest_build.build_number, 2);
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    let pulled: Value = serde_json::from_str(&d.ok(&["state", "pull", "dev"])?)?;
    assert_eq!(pulled["previous_bytes"], 1234, "{pulled}");

    // Without a build, the latest build's state is replaced as is.
    let out = d.with_stdin(&["state", "push", "dev", "-", "--no-build"], "by hand")?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(d.ok(&["state", "pull", "dev"])?, "by hand\n");
    assert_eq!(d.workspace("dev").await?.latest_build.build_number, 2);
    Ok(())
}

#[test]
fn stat_reports_this_machines_use_as_coders_does() -> anyhow::Result<()> {
    let coder = crate::harness::Coder::new()?;
    let cpu = coder.ok(&["stat", "cpu", "--host"])?;
    let shape = |text: &str, unit: &str| {
        let (figures, rest) = text.trim().split_once(' ').unwrap_or_default();
        let (used, total) = figures.split_once('/').unwrap_or_default();
        used.parse::<f64>().is_ok()
            && total.parse::<f64>().is_ok()
            && rest.starts_with(unit)
            && rest.ends_with("%)")
    };
    assert!(shape(&cpu, "cores"), "{cpu}");
    let mem = coder.ok(&["stat", "mem", "--host", "--prefix", "Mi"])?;
    assert!(shape(&mem, "MiB"), "{mem}");
    let disk: Value =
        serde_json::from_str(&coder.ok(&["stat", "disk", "--path", "/tmp", "-o", "json"])?)?;
    assert_eq!(disk["unit"], "B");
    assert!(disk["used"].as_f64() <= disk["total"].as_f64(), "{disk}");
    let table = coder.ok(&["stat", "-c", "host cpu,home disk"])?;
    assert!(
        table.contains("HOST CPU") && table.contains("HOME DISK"),
        "{table}"
    );
    let out = coder.run(&["stat", "-c", "gpu"])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown column \"gpu\""));
    Ok(())
}
