//! `coder external-workspaces create|list` through the real binaries and the real terraform: a
//! template whose agent stands for a machine of the user's own (`coder_external_agent`).
//! `create` refuses a template without one and, for one with it, prints after the build the
//! command that starts the agent; running that command on "the other machine" (here, a
//! process group of the test's) connects the agent. `list` shows only such workspaces.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use testutil::eventually;

use crate::harness::Deployment;
use crate::terraform::{push_with_provider as push, terraform};

const OUTSIDE: &str = r#"
resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}

resource "coder_external_agent" "main" {
  agent_id = coder_agent.main.id
}
"#;

const INSIDE: &str = r#"
data "coder_workspace" "me" {}

resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}

resource "terraform_data" "vm" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id
}
"#;

/// The external machine's agent: killed with its whole process group, however the test ends.
struct Machine(Child);

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// The workspace names a `list -o json` printed.
fn names(json: &str) -> anyhow::Result<Vec<String>> {
    let listed: Vec<serde_json::Value> = serde_json::from_str(json)?;
    listed
        .iter()
        .map(|w| w["name"].as_str().map(str::to_owned).context("a name"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_workspace_is_created_listed_and_its_agent_started_from_the_instructions()
-> anyhow::Result<()> {
    if terraform()?.is_none() {
        return Ok(());
    }
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "outside", OUTSIDE)?;
    push(&d, "inside", INSIDE)?;

    // A template without an external agent is refused before anything is built.
    let out = d.run(&[
        "external-workspaces",
        "create",
        "wrong",
        "-t",
        "inside",
        "--yes",
    ])?;
    ensure!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("does not have an external agent"),
        "{stderr}"
    );
    assert!(d.owner.workspaces("owner:me").await?.workspaces.is_empty());
    // The template is required, as in Coder.
    let out = d.run(&["external-workspaces", "create", "wrong", "--yes"])?;
    ensure!(!out.status.success(), "{out:?}");

    d.ok(&["create", "plain", "-t", "inside", "--yes"])?;
    let out = d.ok(&[
        "external-workspaces",
        "create",
        "ext",
        "-t",
        "outside",
        "--yes",
    ])?;
    assert!(out.contains("The ext workspace has been created!"), "{out}");

    // The instructions are the credentials coderd hands out for the agent.
    let ws = d.workspace("ext").await?;
    assert_eq!(ws.latest_build.has_external_agent, Some(true));
    let creds = d
        .owner
        .workspace_external_agent_credentials(ws.id, "main")
        .await?;
    assert!(
        out.contains(
            "Please run the following command to attach the external agent to the workspace ext:"
        ),
        "{out}"
    );
    assert!(out.contains(&creds.command), "{out}");
    assert!(
        creds
            .command
            .contains(&format!("CODER_AGENT_TOKEN=\"{}\"", creds.agent_token))
            && creds.command.contains("/api/v2/init-script/linux/amd64"),
        "{}",
        creds.command
    );
    let agent_id = ws
        .latest_build
        .resources
        .iter()
        .find(|r| r.kind == "coder_external_agent")
        .and_then(|r| r.agents.first())
        .context("the external agent")?
        .id;
    assert_eq!(
        d.owner.workspace_agent(agent_id).await?.status,
        "connecting",
        "nothing runs the agent before its owner does"
    );

    // Running the printed command elsewhere connects the agent.
    let home = d.dir.path().join("machine");
    std::fs::create_dir_all(&home)?;
    let _machine = Machine(
        Command::new("sh")
            .arg("-c")
            .arg(&creds.command)
            .env("HOME", &home)
            .env("TMPDIR", &home)
            .current_dir(&home)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(home.join("agent.log"))?)
            .stderr(std::fs::File::create(home.join("agent.err"))?)
            .process_group(0)
            .spawn()?,
    );
    eventually(
        Duration::from_secs(120),
        "the external agent connected",
        || async { Ok(d.owner.workspace_agent(agent_id).await?.status == "connected") },
    )
    .await
    .with_context(|| {
        format!(
            "agent stderr: {}",
            std::fs::read_to_string(home.join("agent.err")).unwrap_or_default()
        )
    })?;

    // `list` shows the external workspace only; `coder list` shows both.
    let table = d.ok(&["external-workspaces", "list"])?;
    assert!(table.contains("admin/ext"), "{table}");
    assert!(!table.contains("plain"), "{table}");
    let listed = names(&d.ok(&["external-workspaces", "list", "-o", "json"])?)?;
    assert_eq!(listed, ["ext"]);
    let all = names(&d.ok(&["external-workspaces", "ls", "--all", "-o", "json"])?)?;
    assert_eq!(all, ["ext"]);
    let everything = names(&d.ok(&["list", "-o", "json"])?)?;
    assert_eq!(everything.len(), 2, "{everything:?}");

    // Nothing matches: Coder's hint, on stderr.
    let out = d.run(&["external-workspaces", "list", "--search", "name:nothing"])?;
    ensure!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("coder external-workspaces create <name>"),
        "{out:?}"
    );
    Ok(())
}
