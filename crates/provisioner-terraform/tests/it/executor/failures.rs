//! Jobs that do not succeed: terraform's errors reach the logs and the failure, a failed or
//! cancelled apply keeps its state, and an unusable terraform is named.

use std::time::{Duration, Instant};

use codersdk::provisionerd::{JobFailure, LogLevel, Transition};
use tokio_util::sync::CancellationToken;

use super::harness::{
    BuildSpec, CODER_PROVIDER, Fixture, build_job, failed, fake_terraform, import_job,
    state_addresses, terraform_on_path, until, variable,
};

#[tokio::test(flavor = "multi_thread")]
async fn an_import_needs_every_required_variable() -> anyhow::Result<()> {
    // The variables are checked before terraform runs, so no terraform is needed.
    let template = "variable \"image\" {\n  type = string\n}\nvariable \"size\" {\n  default = 1\n}\nvariable \"zone\" {}\n";
    let f = Fixture::with_settings(&[("main.tf", template)], |s| {
        s.terraform = "/nonexistent/terraform".into();
    })?;
    let failure = failed(f.run(&import_job(vec![variable("zone", "z1")])).await)?;
    assert_eq!(failure.error_code, "REQUIRED_TEMPLATE_VARIABLES");
    assert!(
        failure
            .error
            .contains("required template variables need values: image"),
        "{}",
        failure.error
    );
    assert!(f.logs.contains("need values: image"), "{}", f.logs.text());
    assert!(!failure.canceled);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_plan_explains_itself_and_changes_nothing() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = format!(
        r#"{CODER_PROVIDER}
data "coder_parameter" "region" {{
  name    = "region"
  type    = "string"
  default = "eu"
  option {{
    name  = "Europe"
    value = "eu"
  }}
}}
resource "terraform_data" "x" {{
  input = data.coder_parameter.region.value
}}
"#
    );
    let f = Fixture::new(&[("main.tf", &template)], &[])?;
    let spec = BuildSpec {
        parameters: vec![("region", "mars")],
        ..BuildSpec::new(Transition::Start)
    };
    let failure = failed(f.run(&build_job(spec)).await)?;
    assert!(
        failure.error.starts_with("terraform plan "),
        "{}",
        failure.error
    );
    assert!(failure.error.contains("mars"), "{}", failure.error);
    assert_eq!(failure.state, None, "a plan changes nothing");
    assert!(!failure.canceled);
    let errors: Vec<_> = f
        .logs
        .lines()
        .into_iter()
        .filter(|(level, stage, _)| *level == LogLevel::Error && stage == "Planning infrastructure")
        .collect();
    assert!(!errors.is_empty(), "{}", f.logs.text());
    assert!(failure.timings.iter().any(|t| t.stage == "plan"));
    Ok(())
}

/// `terraform_data.<first>`, then `terraform_data.<second>` whose provisioner runs `command`.
fn two_steps(first: &str, second: &str, command: &str) -> String {
    format!(
        r#"
resource "terraform_data" "{first}" {{
  input = "x"
}}
resource "terraform_data" "{second}" {{
  depends_on = [terraform_data.{first}]
  provisioner "local-exec" {{
    command = "{command}"
  }}
}}
"#
    )
}

/// Runs a start build, cancels it once its logs contain `marker`, and returns the failure and
/// how long the job took to stop after the cancel.
async fn cancel_once(f: &Fixture, marker: &str) -> anyhow::Result<(JobFailure, Duration)> {
    let cancel = CancellationToken::new();
    let job = build_job(BuildSpec::new(Transition::Start));
    let run = f.run_with(&job, &cancel);
    tokio::pin!(run);
    let logs = f.logs.clone();
    tokio::select! {
        result = &mut run => anyhow::bail!("finished before the cancel: {result:?}"),
        waited = until(marker, Duration::from_secs(60), || logs.contains(marker)) => waited?,
    }
    let canceled_at = Instant::now();
    cancel.cancel();
    let failure = failed(run.await)?;
    Ok((failure, canceled_at.elapsed()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_apply_returns_the_state_it_left() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = two_steps("made", "broken", "echo about to fail; exit 3");
    let f = Fixture::new(&[("main.tf", &template)], &[])?;
    let failure = failed(f.run(&build_job(BuildSpec::new(Transition::Start))).await)?;
    assert!(
        failure.error.contains("local-exec provisioner error"),
        "{}",
        failure.error
    );
    assert!(failure.error.contains("exit status 3"), "{}", failure.error);
    assert!(f.logs.contains("about to fail"), "{}", f.logs.text());
    let state = failure.state.unwrap_or_default();
    let addresses = state_addresses(&state)?;
    assert!(
        addresses.contains(&"terraform_data.made".to_owned()),
        "{addresses:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_apply_is_interrupted_and_keeps_its_state() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = two_steps("first", "slow", "echo sleeping; sleep 120");
    let f = Fixture::new(&[("main.tf", &template)], &[])?;
    let (failure, took) = cancel_once(&f, "sleeping").await?;
    assert!(took < Duration::from_secs(10), "took {took:?} to stop");
    assert!(failure.canceled, "{failure:?}");
    assert!(
        f.logs.contains("Interrupting terraform"),
        "{}",
        f.logs.text()
    );
    let state = failure.state.unwrap_or_default();
    assert!(
        state_addresses(&state)?.contains(&"terraform_data.first".to_owned()),
        "what was created before the cancel is in the state"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terraform_ignoring_the_interrupt_is_killed_after_the_grace() -> anyhow::Result<()> {
    let bin = tempfile::tempdir()?;
    let fake = fake_terraform(
        bin.path(),
        r#"case "$1" in
  version) echo '{"terraform_version":"1.11.4"}' ;;
  init) echo initialized ;;
  *) trap '' INT; echo '{"@level":"info","@message":"stuck","type":"log"}'; sleep 120 ;;
esac
"#,
    )?;
    let f = Fixture::with_settings(&[("main.tf", "")], |s| {
        s.terraform = fake;
        s.interrupt_grace = Duration::from_millis(500);
    })?;
    let (failure, took) = cancel_once(&f, "stuck").await?;
    assert!(took < Duration::from_secs(5), "took {took:?} to stop");
    assert!(failure.canceled);
    assert!(f.logs.contains("Killing terraform"), "{}", f.logs.text());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_or_missing_terraform_is_named() -> anyhow::Result<()> {
    let bin = tempfile::tempdir()?;
    let old = fake_terraform(bin.path(), "echo '{\"terraform_version\":\"1.4.7\"}'\n")?;
    let f = Fixture::with_settings(&[("main.tf", "")], |s| s.terraform = old.clone())?;
    let failure = failed(f.run(&import_job(Vec::new())).await)?;
    let expected = format!("terraform 1.4.7 at {} is too old", old.display());
    assert!(failure.error.contains(&expected), "{}", failure.error);
    assert!(
        failure.error.contains("1.5.0 or newer"),
        "{}",
        failure.error
    );
    assert!(f.logs.contains(&expected), "{}", f.logs.text());
    let checked = f.terraform.check().await.expect_err("too old");
    assert!(checked.to_string().contains(&expected), "{checked}");

    let f = Fixture::with_settings(&[("main.tf", "")], |s| {
        s.terraform = "terraform-that-does-not-exist".into();
    })?;
    let failure = failed(f.run(&import_job(Vec::new())).await)?;
    assert!(
        failure
            .error
            .contains("terraform not found: no \"terraform-that-does-not-exist\" in PATH"),
        "{}",
        failure.error
    );
    Ok(())
}
