//! Imports and builds that work: what reaches terraform and the provider, and what comes back.

use codersdk::proto::{AgentAuth, Resource};
use codersdk::provisionerd::{JobResult, LogLevel, Transition};

use super::harness::{
    BuildSpec, CODER_PROVIDER, Fixture, build_job, built, import_job, state_addresses,
    terraform_on_path, variable,
};

/// A workspace: a persistent `home`, and a `box` that exists while the workspace runs, hosting
/// the agent. Its provisioner writes its environment to `${var.out_dir}/env`.
fn workspace_template() -> String {
    format!(
        r#"{CODER_PROVIDER}
variable "out_dir" {{
  type        = string
  description = "Where the test reads what the build saw"
}}

variable "greeting" {{
  type    = string
  default = "hello"
}}

data "coder_workspace" "me" {{}}
data "coder_workspace_owner" "me" {{}}

data "coder_parameter" "region" {{
  name    = "region"
  type    = "string"
  default = "eu"
  mutable = true
  option {{
    name  = "Europe"
    value = "eu"
  }}
  option {{
    name  = "United States"
    value = "us"
  }}
}}

data "coder_external_auth" "github" {{
  id       = "github"
  optional = true
}}

resource "coder_agent" "main" {{
  os   = "linux"
  arch = "amd64"
}}

resource "coder_app" "web" {{
  agent_id     = coder_agent.main.id
  slug         = "web"
  display_name = "Web"
  url          = "http://localhost:8080"
}}

resource "terraform_data" "home" {{
  input = var.out_dir
}}

resource "terraform_data" "box" {{
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id

  provisioner "local-exec" {{
    command = "env > \"$OUT/env\""
    environment = {{
      OUT         = var.out_dir
      GREETING    = var.greeting
      REGION      = data.coder_parameter.region.value
      OWNER_TOKEN = data.coder_workspace_owner.me.session_token
    }}
  }}
}}

resource "coder_metadata" "box" {{
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.box[0].id
  item {{
    key   = "region"
    value = data.coder_parameter.region.value
  }}
}}
"#
    )
}

/// Resource names, sorted (the converter keeps terraform's order).
fn names_of(resources: &[Resource]) -> Vec<&str> {
    let mut names: Vec<&str> = resources.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    names
}

fn by_name<'a>(resources: &'a [Resource], name: &str) -> anyhow::Result<&'a Resource> {
    resources
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| anyhow::anyhow!("no resource {name} in {resources:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_import_reports_variables_parameters_and_start_and_stop_resources() -> anyhow::Result<()>
{
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = workspace_template();
    let f = Fixture::new(
        &[("main.tf", &template), ("README.md", "# A workspace\n")],
        &[],
    )?;
    let out = tempfile::tempdir()?;
    let result = f
        .run(&import_job(vec![variable(
            "out_dir",
            &out.path().display().to_string(),
        )]))
        .await;
    let JobResult::TemplateImport {
        start_resources,
        stop_resources,
        rich_parameters,
        external_auth_providers,
        variables,
        readme,
        timings,
        ..
    } = result.map_err(|e| anyhow::anyhow!("{}\n{}", e.error, f.logs.text()))?
    else {
        anyhow::bail!("not an import result");
    };

    assert_eq!(readme, "# A workspace\n");
    let names: Vec<_> = variables.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["out_dir", "greeting"]);
    assert!(variables[0].required && !variables[1].required);
    assert_eq!(variables[1].default_value, "hello");

    assert_eq!(rich_parameters.len(), 1);
    assert_eq!(rich_parameters[0].name, "region");
    assert_eq!(rich_parameters[0].options.len(), 2);
    assert_eq!(external_auth_providers.len(), 1);
    assert_eq!(external_auth_providers[0].id, "github");
    assert!(external_auth_providers[0].optional);

    assert_eq!(names_of(&start_resources), ["box", "home"]);
    let host = by_name(&start_resources, "box")?;
    assert_eq!(host.agents.len(), 1);
    assert_eq!(host.agents[0].name, "main");
    assert_eq!(host.agents[0].apps[0].slug, "web");
    assert_eq!(host.metadata[0].key, "region");
    assert_eq!(
        names_of(&stop_resources),
        ["home"],
        "the box exists only while the workspace runs"
    );

    let stages: Vec<_> = timings
        .iter()
        .map(|t| format!("{}/{}", t.stage, t.action))
        .collect();
    assert_eq!(
        stages,
        [
            "init/version",
            "init/init",
            "plan/plan",
            "graph/graph",
            "plan/show",
            "plan/plan",
            "plan/show"
        ]
    );
    // The graph is read while the start plan runs (it does not wait for it).
    assert!(
        timings[3].started_at < timings[2].ended_at,
        "graph {:?} runs alongside plan {:?}",
        timings[3],
        timings[2]
    );
    assert!(
        timings
            .iter()
            .all(|t| t.source == "terraform" && t.ended_at >= t.started_at)
    );
    assert!(f.logs.contains("Using terraform "), "{}", f.logs.text());
    assert!(
        f.logs.contains("Plan: 3 to add"),
        "plan output is logged: {}",
        f.logs.text()
    );
    assert!(
        !out.path().join("env").exists(),
        "an import applies nothing"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_starts_stops_starts_and_is_deleted() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let template = workspace_template();
    let files = [("main.tf", template.as_str())];
    let mut f = Fixture::new(
        &files,
        &[
            ("PROVIDER_CREDENTIAL", "for-the-providers"),
            ("CODER_SESSION_TOKEN", "daemon-secret"),
            ("CODER_PROVISIONER_DAEMON_PSK", "daemon-psk"),
        ],
    )?;
    let out = tempfile::tempdir()?;
    let out_dir = out.path().display().to_string();
    let spec = |transition, state: &[u8]| BuildSpec {
        state: state.to_vec(),
        parameters: vec![("region", "us")],
        variables: vec![variable("out_dir", &out_dir), variable("undeclared", "x")],
        ..BuildSpec::new(transition)
    };

    // Start: everything is created, and the build saw the job's environment only.
    let (state, resources) = built(
        f.run(&build_job(spec(Transition::Start, &[]))).await,
        &f.logs,
    )?;
    assert_eq!(names_of(&resources), ["box", "home"]);
    let host = by_name(&resources, "box")?;
    let agent = &host.agents[0];
    assert!(matches!(&agent.auth, AgentAuth::Token(token) if !token.is_empty()));
    assert!(!agent.id.is_empty());
    let apps = &agent.display_apps;
    assert!(
        apps.vscode && apps.web_terminal && apps.ssh_helper && apps.port_forwarding_helper,
        "no display_apps block means Coder's defaults: {apps:?}"
    );
    assert!(!apps.vscode_insiders);

    assert_eq!(agent.apps[0].url, "http://localhost:8080");
    assert_eq!(host.metadata[0].value, "us");
    let env = std::fs::read_to_string(out.path().join("env"))?;
    for expected in [
        "PROVIDER_CREDENTIAL=for-the-providers",
        "GREETING=hello",
        "REGION=us",
        "OWNER_TOKEN=owner-session-secret",
        "CODER_WORKSPACE_TRANSITION=start",
        "CODER_WORKSPACE_NAME=dev",
        "CODER_WORKSPACE_OWNER=alice",
        "CODER_WORKSPACE_OWNER_EMAIL=alice@example.com",
        "CODER_WORKSPACE_TEMPLATE_NAME=tpl",
        "CODER_AGENT_URL=http://coder.example:3000",
        "CHECKPOINT_DISABLE=1",
    ] {
        assert!(env.contains(expected), "{expected} missing from\n{env}");
    }
    for hidden in ["daemon-secret", "daemon-psk"] {
        assert!(
            !env.contains(hidden),
            "the daemon's {hidden} reached terraform"
        );
    }
    assert!(
        f.logs.contains("Ignoring the value of \"undeclared\""),
        "{}",
        f.logs.text()
    );
    let shown = f.logs.text();
    assert!(
        !shown.contains("owner-session-secret"),
        "secrets stay out of the logs"
    );
    assert!(shown.contains("[info] Starting workspace: terraform_data.box[0]: Creating..."));

    // Stop: the box goes, the home stays.
    std::fs::remove_file(out.path().join("env"))?;
    f.fresh_workdir(&files)?;
    let (state, resources) = built(
        f.run(&build_job(spec(Transition::Stop, &state))).await,
        &f.logs,
    )?;
    assert_eq!(names_of(&resources), ["home"]);
    assert!(state_addresses(&state)?.contains(&"terraform_data.home".to_owned()));
    assert!(!state_addresses(&state)?.contains(&"terraform_data.box".to_owned()));
    assert!(!out.path().join("env").exists());

    // Start again from the stopped state.
    f.fresh_workdir(&files)?;
    let (state, resources) = built(
        f.run(&build_job(spec(Transition::Start, &state))).await,
        &f.logs,
    )?;
    assert_eq!(resources.len(), 2);
    assert!(out.path().join("env").exists());

    // Delete: nothing is left.
    f.fresh_workdir(&files)?;
    let (state, resources) = built(
        f.run(&build_job(spec(Transition::Delete, &state))).await,
        &f.logs,
    )?;
    assert!(resources.is_empty(), "{resources:#?}");
    let left: Vec<String> = state_addresses(&state)?
        .into_iter()
        .filter(|a| !a.starts_with("data."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        f.logs
            .lines()
            .iter()
            .any(|(level, stage, output)| *level == LogLevel::Info
                && stage == "Destroying workspace"
                && output.contains("Destruction complete")),
        "{}",
        f.logs.text()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_workspace_without_state_runs_nothing() -> anyhow::Result<()> {
    // No terraform at all: the delete must not need one.
    let f = Fixture::with_settings(&[("main.tf", "")], |s| {
        s.terraform = "/nonexistent/terraform".into();
    })?;
    let (state, resources) = built(
        f.run(&build_job(BuildSpec::new(Transition::Delete))).await,
        &f.logs,
    )?;
    assert!(state.is_empty() && resources.is_empty());
    assert!(f.logs.contains("nothing to destroy"), "{}", f.logs.text());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_templates_lock_file_may_pin_coders_own_provider() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    // The hashes of Coder's registry packages: our provider has others, so terraform would
    // refuse to install it if the entry stayed.
    let lock = r#"# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/coder/coder" {
  version     = "2.4.1"
  constraints = "~> 2.0"
  hashes = [
    "h1:0000000000000000000000000000000000000000000=",
  ]
}
"#;
    let template = format!("{CODER_PROVIDER}\ndata \"coder_workspace\" \"me\" {{}}\n");
    let f = Fixture::new(
        &[("main.tf", &template), (".terraform.lock.hcl", lock)],
        &[],
    )?;
    let result = f.run(&import_job(Vec::new())).await;
    assert!(result.is_ok(), "{:?}\n{}", result.err(), f.logs.text());
    assert!(
        f.logs
            .contains("Replaced coder/coder in .terraform.lock.hcl")
    );
    Ok(())
}

/// Daemons sharing a cache directory share terraform's plugin cache. A job's `init` must use
/// the cached coder/coder package as it is: installing it again replaces the cache's directory,
/// and another daemon's terraform running from it would find its provider gone mid-command.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_init_leaves_the_shared_plugin_cache_alone() -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;

    if !terraform_on_path()? {
        return Ok(());
    }
    let shared = tempfile::Builder::new()
        .prefix("tf-shared-cache-")
        .tempdir()?;
    let template = format!("{CODER_PROVIDER}\ndata \"coder_workspace\" \"me\" {{}}\n");
    let first = Fixture::with_settings(&[("main.tf", &template)], |s| {
        s.cache_dir = shared.path().into();
    })?;
    let result = first.run(&import_job(Vec::new())).await;
    assert!(result.is_ok(), "{:?}\n{}", result.err(), first.logs.text());
    let versions = shared
        .path()
        .join("terraform/plugins/registry.terraform.io/coder/coder")
        .join(terraform_provider_coder::PROVIDER_VERSION);
    let package = std::fs::read_dir(&versions)?
        .next()
        .ok_or_else(|| anyhow::anyhow!("no package under {}", versions.display()))??
        .path();
    let cached = std::fs::metadata(&package)?.ino();

    let second = Fixture::with_settings(&[("main.tf", &template)], |s| {
        s.cache_dir = shared.path().into();
    })?;
    let result = second.run(&import_job(Vec::new())).await;
    assert!(result.is_ok(), "{:?}\n{}", result.err(), second.logs.text());
    assert!(
        second.logs.contains("from the shared cache directory"),
        "{}",
        second.logs.text()
    );
    assert_eq!(
        std::fs::metadata(&package)?.ino(),
        cached,
        "the cached package was installed again"
    );
    Ok(())
}

/// The actions of a job's terraform commands, in order.
fn actions(result: &Result<JobResult, codersdk::provisionerd::JobFailure>) -> Vec<String> {
    match result {
        Ok(
            JobResult::TemplateImport { timings, .. } | JobResult::WorkspaceBuild { timings, .. },
        ) => timings.iter().map(|t| t.action.clone()).collect(),
        Err(failure) => panic!("the job failed: {}", failure.error),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn terraforms_version_is_asked_once_per_binary() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;

    if !terraform_on_path()? {
        return Ok(());
    }
    let real = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("terraform"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| anyhow::anyhow!("terraform vanished from PATH"))?;
    // The daemon's terraform: a script running the real one, replaced below as an upgrade
    // would replace it (a new file renamed over the old).
    let bin = tempfile::tempdir()?;
    let wrapper = bin.path().join("terraform");
    let install = |comment: &str| -> anyhow::Result<()> {
        let staging = bin.path().join(".terraform.new");
        std::fs::write(
            &staging,
            format!("#!/bin/sh\n# {comment}\nexec '{}' \"$@\"\n", real.display()),
        )?;
        std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&staging, &wrapper)?;
        Ok(())
    };
    install("first")?;
    let mut f = Fixture::with_settings(&[("main.tf", "")], |s| s.terraform = wrapper.clone())?;

    let first = actions(&f.run(&import_job(Vec::new())).await);
    assert_eq!(
        first,
        ["version", "init", "plan", "graph", "show", "plan", "show"]
    );

    f.fresh_workdir(&[("main.tf", "")])?;
    let second = actions(&f.run(&import_job(Vec::new())).await);
    assert_eq!(second, ["init", "plan", "graph", "show", "plan", "show"]);
    let using = f
        .logs
        .lines()
        .into_iter()
        .filter(|(_, _, line)| line.starts_with("Using terraform "))
        .count();
    assert_eq!(using, 2, "every job still says which terraform it uses");

    install("upgraded")?;
    f.fresh_workdir(&[("main.tf", "")])?;
    let third = actions(&f.run(&import_job(Vec::new())).await);
    assert_eq!(third.first().map(String::as_str), Some("version"));
    Ok(())
}
