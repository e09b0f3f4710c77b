//! Workspaces that look after themselves, through the real binaries: a workspace whose TTL is
//! a few seconds stops by itself under a server polling every second, and the schedule,
//! `templates edit` and `update` commands.

use std::time::Duration;

use chrono::Utc;
use codersdk::proto::RichParameter;
use codersdk::workspaces::WorkspaceStatus;
use provisionerd::engines::echo::{EchoTemplate, ImportStage};
use testutil::eventually;

use crate::harness::Deployment;

/// Pushes `echo` as `name` (version `version`).
fn push(d: &Deployment, name: &str, version: &str, echo: &EchoTemplate) -> anyhow::Result<()> {
    let dir = d.template_dir(&format!("{name}-{version}"), echo)?;
    let dir = dir.to_str().unwrap_or_default().to_string();
    d.ok(&[
        "templates",
        "push",
        name,
        "-d",
        &dir,
        "--provisioner",
        "echo",
        "--version-name",
        version,
        "--yes",
    ])?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_with_a_few_seconds_ttl_stops_by_itself_and_the_cli_says_when()
-> anyhow::Result<()> {
    let d =
        Deployment::new(&["--provisioner-daemons=1", "--autobuild-poll-interval", "1s"]).await?;
    push(&d, "basic", "v1", &EchoTemplate::default())?;
    d.ok(&["templates", "edit", "basic", "--default-ttl", "8s"])?;
    d.ok(&["create", "dev", "-t", "basic", "--yes"])?;

    let will = d.ok(&["schedule", "show", "dev"])?;
    assert!(will.contains("STOPS NEXT"), "{will}");
    assert!(
        will.contains("8s") && will.contains("(in "),
        "will stop: {will}"
    );
    let listed = d.ok(&["list", "-c", "workspace,status,stops after,stops next"])?;
    assert!(
        listed.contains("admin/dev") && listed.contains("running") && listed.contains("(in "),
        "{listed}"
    );

    eventually(Duration::from_secs(60), "dev stopped by itself", || async {
        let ws = d.workspace("dev").await?;
        Ok(ws.latest_build.status == WorkspaceStatus::Stopped)
    })
    .await?;
    let ws = d.workspace("dev").await?;
    assert_eq!(ws.latest_build.reason, "autostop");
    assert_eq!(ws.latest_build.build_number, 2);

    let did = d.ok(&["list", "-c", "workspace,status,last built,stops next"])?;
    assert!(
        did.contains("stopped") && did.contains(" ago)"),
        "says when it did: {did}"
    );
    let now = d.ok(&["schedule", "show", "dev"])?;
    assert!(!now.contains("(in "), "nothing scheduled any more: {now}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn schedule_and_template_edit_commands() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "basic", "v1", &EchoTemplate::default())?;
    d.ok(&[
        "templates",
        "edit",
        "basic",
        "--default-ttl",
        "2h",
        "--activity-bump",
        "30m",
        "--autostart-requirement-weekdays",
        "monday,friday",
        "--autostop-requirement-weekdays",
        "saturday",
        "--autostop-requirement-weeks",
        "2",
        "--failure-ttl",
        "1h",
        "--dormancy-threshold",
        "720h",
        "--allow-user-autostop=false",
        "--require-active-version",
    ])?;
    let t = d.owner.template_by_name("coder", "basic").await?;
    assert_eq!(
        (t.default_ttl_ms, t.activity_bump_ms),
        (7_200_000, 1_800_000)
    );
    assert_eq!(t.autostart_requirement.days_of_week, ["monday", "friday"]);
    assert_eq!(
        (
            t.autostop_requirement.days_of_week.as_slice(),
            t.autostop_requirement.weeks
        ),
        (&["saturday".to_string()][..], 2)
    );
    assert_eq!(
        (t.failure_ttl_ms, t.time_til_dormant_ms),
        (3_600_000, 720 * 3_600_000)
    );
    assert!(!t.allow_user_autostop && t.require_active_version);
    let refused = d.run(&["templates", "edit", "basic", "--failure-ttl", "30s"])?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("at least one minute"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    d.ok(&[
        "templates",
        "edit",
        "basic",
        "--autostart-requirement-weekdays",
        "all",
        "--autostop-requirement-weekdays",
        "none",
        "--allow-user-autostop",
        "--require-active-version=false",
    ])?;
    let t = d.owner.template_by_name("coder", "basic").await?;
    assert_eq!(t.autostart_requirement.days_of_week.len(), 7);
    assert!(t.autostop_requirement.days_of_week.is_empty());
    assert!(t.allow_user_autostop && !t.require_active_version);

    d.ok(&["create", "dev", "-t", "basic", "--yes"])?;
    let set = d.ok(&[
        "schedule",
        "start",
        "dev",
        "9:30AM",
        "Mon-Fri",
        "Europe/Dublin",
    ])?;
    assert!(set.contains("9:30AM Mon-Fri (Europe/Dublin)"), "{set}");
    assert!(
        set.contains("09:30 IST") || set.contains("09:30 GMT"),
        "{set}"
    );
    let ws = d.workspace("dev").await?;
    assert_eq!(
        ws.autostart_schedule.as_deref(),
        Some("CRON_TZ=Europe/Dublin 30 9 * * Mon-Fri")
    );
    let manual = d.ok(&["schedule", "start", "dev", "manual"])?;
    assert!(!manual.contains("Dublin"), "{manual}");
    assert_eq!(d.workspace("dev").await?.autostart_schedule, None);

    assert!(d.ok(&["schedule", "stop", "dev", "90m"])?.contains("1h30m"));
    assert_eq!(d.workspace("dev").await?.ttl_ms, Some(5_400_000));
    let short = d.run(&["schedule", "stop", "dev", "30s"])?;
    assert!(!short.status.success(), "Coder's one-minute minimum");

    // The running build still has the template's two hours; extending moves it to 3h away.
    let extended = d.ok(&["schedule", "extend", "dev", "3h"])?;
    assert!(
        extended.contains("(in 2h5") || extended.contains("(in 3h"),
        "{extended}"
    );
    let deadline = d
        .workspace("dev")
        .await?
        .latest_build
        .deadline
        .ok_or_else(|| anyhow::anyhow!("no deadline"))?;
    let off = (deadline - (Utc::now() + chrono::Duration::hours(3)))
        .num_seconds()
        .abs();
    assert!(off < 60, "deadline {deadline}");
    let soon = d.run(&["schedule", "override-stop", "dev", "10m"])?;
    assert!(!soon.status.success());
    assert!(String::from_utf8_lossy(&soon.stderr).contains("30 minutes"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn update_restarts_on_the_active_version_asking_for_new_parameters() -> anyhow::Result<()> {
    let d = Deployment::new(&["--provisioner-daemons=1"]).await?;
    push(&d, "basic", "v1", &EchoTemplate::default())?;
    d.ok(&["create", "dev", "-t", "basic", "--yes"])?;
    let needs_region = EchoTemplate {
        import: Some(ImportStage {
            rich_parameters: vec![RichParameter {
                name: "region".into(),
                display_name: "Region".into(),
                kind: "string".into(),
                required: true,
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    push(&d, "basic", "v2", &needs_region)?;
    let outdated = d.ok(&["list", "-c", "workspace,current version,outdated"])?;
    assert!(
        outdated.contains("v1") && outdated.contains("true"),
        "{outdated}"
    );

    let out = d.with_stdin(&["update", "dev"], "eu-west\n")?;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Region"));
    let ws = d.workspace("dev").await?;
    assert_eq!(ws.latest_build.template_version_name, "v2");
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    assert!(!ws.outdated);
    let params = d
        .owner
        .workspace_build_parameters(ws.latest_build.id)
        .await?;
    assert!(
        params
            .iter()
            .any(|p| p.name == "region" && p.value == "eu-west")
    );
    assert!(
        d.ok(&["update", "dev"])?
            .contains("Workspace is up-to-date.")
    );
    Ok(())
}
