//! An import and a build of a template using every newer provider type, through the real
//! terraform: what the converter makes of presets, AI tasks, external agents, dev containers
//! and script ordering (across a module) in real plans and states.

use codersdk::proto::{Agent, Resource, ScriptRequirement};
use codersdk::provisionerd::{BuildSecret, JobResult, LogLevel, Transition};

use crate::support::dependencies;

use super::harness::{
    BuildSpec, CODER_PROVIDER, Fixture, build_job, import_job, terraform_on_path,
};

const MAIN: &str = r#"
data "coder_workspace" "me" {}

data "coder_parameter" "region" {
  name    = "region"
  default = "eu"
}

data "coder_workspace_preset" "fast" {
  name    = "fast"
  default = true
  parameters = {
    region = "us"
    gpu    = "a100"
  }
  prebuilds {
    instances = 2
    expiration_policy {
      ttl = 3600
    }
    scheduling {
      timezone = "UTC"
      schedule {
        cron      = "* 8-18 * * 1-5"
        instances = 3
      }
    }
  }
}

data "coder_workspace_preset" "plain" {
  name = "plain"
}

data "coder_secret" "gh" {
  env          = "GITHUB_TOKEN"
  help_message = "Add a GitHub token."
}

data "coder_secret" "kube" {
  file         = "~/.kube/config"
  help_message = "Add your kubeconfig."
}

resource "coder_agent" "main" {
  os   = "linux"
  arch = "amd64"
}

resource "terraform_data" "vm" {
  count = data.coder_workspace.me.start_count
  input = coder_agent.main.id
}

resource "coder_app" "chat" {
  agent_id = coder_agent.main.id
  slug     = "chat"
  url      = "http://localhost:3284"
}

resource "coder_ai_task" "task" {
  count  = data.coder_workspace.me.start_count
  app_id = coder_app.chat.id
}

resource "coder_external_agent" "elsewhere" {
  count    = 0
  agent_id = coder_agent.main.id
}

resource "coder_devcontainer" "repo" {
  agent_id         = coder_agent.main.id
  workspace_folder = "/repo"
}

resource "coder_env" "inside" {
  agent_id = coder_devcontainer.repo.subagent_id
  name     = "INSIDE"
  value    = "yes"
}

resource "coder_script" "clone" {
  agent_id     = coder_agent.main.id
  display_name = "clone"
  script       = "echo clone"
  run_on_start = true
}

resource "coder_script" "install" {
  agent_id     = coder_agent.main.id
  display_name = "install"
  script       = "echo install"
  run_on_start = true
}

resource "coder_script" "serve" {
  agent_id     = coder_agent.main.id
  display_name = "serve"
  script       = "echo serve"
  run_on_start = true
}

module "tools" {
  source   = "./tools"
  agent_id = coder_agent.main.id
}

data "coder_script_order" "startup" {
  rule {
    run   = ["coder_script.install"]
    after = ["coder_script.clone"]
  }
  rule {
    run      = ["coder_script.serve"]
    after    = ["coder_script.install", "module.tools"]
    requires = "completion"
  }
}
"#;

const TOOLS: &str = r#"
variable "agent_id" {
  type = string
}

resource "coder_script" "warm" {
  agent_id     = var.agent_id
  display_name = "warm caches"
  script       = "echo warm"
  run_on_start = true
}

resource "coder_script" "save" {
  agent_id     = var.agent_id
  display_name = "save caches"
  script       = "echo save"
  run_on_stop  = true
}
"#;

fn files() -> Vec<(&'static str, String)> {
    let tools = format!("{CODER_PROVIDER}\n{TOOLS}");
    vec![
        ("main.tf", format!("{CODER_PROVIDER}\n{MAIN}")),
        ("tools/main.tf", tools),
    ]
}

fn the_agent(resources: &[Resource]) -> anyhow::Result<&Agent> {
    resources
        .iter()
        .flat_map(|r| &r.agents)
        .find(|a| a.name == "main")
        .ok_or_else(|| anyhow::anyhow!("no agent in {resources:#?}"))
}

fn check_ordering(agent: &Agent) {
    assert_eq!(
        dependencies(&agent.scripts, "coder_script.install"),
        [("coder_script.clone".to_owned(), ScriptRequirement::Success)]
    );
    assert_eq!(
        dependencies(&agent.scripts, "coder_script.serve"),
        [
            (
                "coder_script.install".to_owned(),
                ScriptRequirement::Completion
            ),
            (
                "module.tools.coder_script.warm".to_owned(),
                ScriptRequirement::Completion
            ),
        ],
        "the module's stop script is filtered out of the start rule"
    );
    assert!(dependencies(&agent.scripts, "module.tools.coder_script.save").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_import_reports_presets_tasks_and_ordering() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let files = files();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let f = Fixture::new(&files, &[])?;
    let result = f
        .run(&import_job(vec![]))
        .await
        .map_err(|e| anyhow::anyhow!("{}\n{}", e.error, f.logs.text()))?;
    let JobResult::TemplateImport {
        start_resources,
        features,
        ..
    } = result
    else {
        anyhow::bail!("not an import result");
    };

    let names: Vec<&str> = features.presets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fast", "plain"]);
    let fast = &features.presets[0];
    assert!(fast.default);
    let prebuild = fast.prebuild.clone().unwrap_or_default();
    assert_eq!(prebuild.instances, 2);
    assert_eq!(prebuild.expiration_policy.map(|p| p.ttl), Some(3600));
    let scheduling = prebuild.scheduling.unwrap_or_default();
    assert_eq!(scheduling.timezone, "UTC");
    assert_eq!(scheduling.schedule[0].instances, 3);
    assert!(features.presets[1].prebuild.is_none());
    assert!(
        f.logs
            .lines()
            .iter()
            .any(|(level, _, line)| *level == LogLevel::Warn
                && line.contains("not defined by the template: \"gpu\"")),
        "{}",
        f.logs.text()
    );

    let secrets: Vec<(&str, &str, &str)> = features
        .secrets
        .iter()
        .map(|s| (s.env.as_str(), s.file.as_str(), s.help_message.as_str()))
        .collect();
    assert_eq!(
        secrets,
        [
            ("GITHUB_TOKEN", "", "Add a GitHub token."),
            ("", "~/.kube/config", "Add your kubeconfig.")
        ]
    );

    assert!(features.has_ai_tasks);
    assert!(features.has_external_agents, "declared with count = 0");
    assert_eq!(features.ai_tasks.len(), 1);

    let agent = the_agent(&start_resources)?;
    check_ordering(agent);
    assert_eq!(agent.devcontainers.len(), 1);
    assert_eq!(agent.devcontainers[0].envs[0].name, "INSIDE");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_carries_script_dependencies_and_task_ids() -> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let files = files();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let f = Fixture::new(&files, &[])?;
    let mut spec = BuildSpec::new(Transition::Start);
    spec.secrets = vec![
        BuildSecret {
            env_name: "GITHUB_TOKEN".into(),
            file_path: String::new(),
            value: "ghp-build-value".into(),
        },
        BuildSecret {
            env_name: String::new(),
            file_path: "~/.kube/config".into(),
            value: "kubeconfig-build-value".into(),
        },
    ];
    let result = f
        .run(&build_job(spec))
        .await
        .map_err(|e| anyhow::anyhow!("{}\n{}", e.error, f.logs.text()))?;
    let JobResult::WorkspaceBuild {
        resources,
        features,
        state,
        ..
    } = result
    else {
        anyhow::bail!("not a build result");
    };
    assert!(features.presets.is_empty(), "presets belong to imports");
    // The secrets were read (the build would fail without them) and are not in the state
    // coderd keeps, nor in the logs.
    let state = String::from_utf8(state)?;
    assert!(state.contains("GITHUB_TOKEN"), "{state}");
    for value in ["ghp-build-value", "kubeconfig-build-value"] {
        assert!(!state.contains(value), "{state}");
        assert!(!f.logs.text().contains(value));
    }
    let [task] = features.ai_tasks.as_slice() else {
        anyhow::bail!("one task: {features:?}");
    };
    assert!(uuid::Uuid::parse_str(&task.id).is_ok(), "{task:?}");
    let agent = the_agent(&resources)?;
    let app = agent
        .apps
        .iter()
        .find(|a| a.slug == "chat")
        .map(|a| a.id.clone());
    assert_eq!(Some(task.app_id.clone()), app);
    check_ordering(agent);
    let container = &agent.devcontainers[0];
    assert!(uuid::Uuid::parse_str(&container.subagent_id).is_ok());
    assert_eq!(container.envs[0].value, "yes");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_build_without_a_declared_secret_fails_with_the_providers_error()
-> anyhow::Result<()> {
    if !terraform_on_path()? {
        return Ok(());
    }
    let files = files();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let f = Fixture::new(&files, &[])?;
    let Err(failure) = f.run(&build_job(BuildSpec::new(Transition::Start))).await else {
        anyhow::bail!("the build succeeded without its secrets");
    };
    let logs = f.logs.text();
    assert!(
        logs.contains(r#"Missing required secret: environment variable "GITHUB_TOKEN""#),
        "{}\n{logs}",
        failure.error
    );
    assert!(logs.contains("Add a GitHub token."), "{logs}");
    Ok(())
}
