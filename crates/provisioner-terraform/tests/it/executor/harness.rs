//! Running the executor on small templates with the real `terraform` and our provider (this
//! crate's `coder-terraform-provider` binary), each test in its own cache and work directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::Utc;
use codersdk::provisionerd::{
    AcquiredJob, BuildSecret, JobFailure, JobKind, JobResult, LogLevel, Metadata,
    PrebuiltWorkspaceBuildStage, RichParameterValue, Transition, VariableValue,
};
use provisioner_terraform::{JobLogs, Settings, Terraform};
use tokio_util::sync::CancellationToken;

pub const PROVIDER: &str = env!("CARGO_BIN_EXE_coder-terraform-provider");

/// The `terraform` block of every template that uses our provider.
pub const CODER_PROVIDER: &str = r#"
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}
"#;

/// Whether to run a test that needs `terraform` on PATH: a missing terraform fails the test
/// with a message naming it, unless `CODER_TERRAFORM_OPTIONAL=1` says to skip instead.
pub fn terraform_on_path() -> anyhow::Result<bool> {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("terraform").is_file())
    });
    if found {
        return Ok(true);
    }
    let message = "the `terraform` binary is not on PATH; these tests run the real terraform \
                   (1.5 or newer)";
    if std::env::var("CODER_TERRAFORM_OPTIONAL").as_deref() == Ok("1") {
        eprintln!("{message}; skipping because CODER_TERRAFORM_OPTIONAL=1");
        return Ok(false);
    }
    bail!("{message}; install it, or set CODER_TERRAFORM_OPTIONAL=1 to skip these tests")
}

/// Log lines as the executor wrote them.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<(LogLevel, String, String)>>>);

impl JobLogs for Logs {
    fn log(&self, level: LogLevel, stage: &str, output: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
            level,
            stage.to_owned(),
            output.to_owned(),
        ));
    }
}

impl Logs {
    pub fn lines(&self) -> Vec<(LogLevel, String, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn text(&self) -> String {
        self.lines()
            .iter()
            .map(|(level, stage, output)| format!("[{}] {stage}: {output}\n", level.as_str()))
            .collect()
    }

    pub fn contains(&self, needle: &str) -> bool {
        self.lines()
            .iter()
            .any(|(_, _, output)| output.contains(needle))
    }
}

/// A daemon's terraform with its own cache, and a template in a work directory.
pub struct Fixture {
    _cache: tempfile::TempDir,
    pub workdir: tempfile::TempDir,
    pub terraform: Terraform,
    pub logs: Logs,
}

impl Fixture {
    /// `files` in a fresh work directory; terraform from PATH, with the test's environment
    /// plus `extra_env` as the daemon's.
    pub fn new(files: &[(&str, &str)], extra_env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::with_settings(files, |settings| {
            settings.base_env.extend(
                extra_env
                    .iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v))),
            );
        })
    }

    pub fn with_settings(
        files: &[(&str, &str)],
        adjust: impl FnOnce(&mut Settings),
    ) -> anyhow::Result<Self> {
        let cache = tempfile::Builder::new().prefix("tf-cache-").tempdir()?;
        let mut settings = Settings::new(PROVIDER, cache.path());
        adjust(&mut settings);
        let terraform = Terraform::new(settings)?;
        let workdir = tempfile::Builder::new().prefix("tf-job-").tempdir()?;
        write_files(workdir.path(), files)?;
        Ok(Self {
            _cache: cache,
            workdir,
            terraform,
            logs: Logs::default(),
        })
    }

    /// Replaces the template for the next job (each job starts from the template alone).
    pub fn fresh_workdir(&mut self, files: &[(&str, &str)]) -> anyhow::Result<()> {
        self.workdir = tempfile::Builder::new().prefix("tf-job-").tempdir()?;
        write_files(self.workdir.path(), files)
    }

    pub async fn run(&self, job: &AcquiredJob) -> Result<JobResult, JobFailure> {
        self.run_with(job, &CancellationToken::new()).await
    }

    pub async fn run_with(
        &self,
        job: &AcquiredJob,
        cancel: &CancellationToken,
    ) -> Result<JobResult, JobFailure> {
        self.terraform
            .run(job, self.workdir.path(), &self.logs, cancel)
            .await
    }
}

fn write_files(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<()> {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {name}"))?;
    }
    Ok(())
}

pub fn variable(name: &str, value: &str) -> VariableValue {
    VariableValue {
        name: name.into(),
        value: value.into(),
        sensitive: false,
    }
}

pub fn import_job(variables: Vec<VariableValue>) -> AcquiredJob {
    AcquiredJob {
        job_id: uuid::Uuid::new_v4(),
        created_at: Utc::now(),
        provisioner: "terraform".into(),
        template_source_archive: Default::default(),
        kind: JobKind::TemplateImport {
            metadata: Metadata {
                coder_url: "http://coder.example:3000".into(),
                template_name: "tpl".into(),
                template_version: "v1".into(),
                ..Metadata::default()
            },
            user_variable_values: variables,
        },
    }
}

/// What differs between the builds of a test workspace.
pub struct BuildSpec {
    pub transition: Transition,
    pub state: Vec<u8>,
    pub parameters: Vec<(&'static str, &'static str)>,
    pub variables: Vec<VariableValue>,
    pub coder_url: String,
    pub secrets: Vec<BuildSecret>,
    pub external_auth: Vec<codersdk::externalauth::ExternalAuthProviderToken>,
    pub ssh_key: Option<codersdk::externalauth::AgentGitSshKey>,
    pub stage: PrebuiltWorkspaceBuildStage,
}

impl BuildSpec {
    pub fn new(transition: Transition) -> Self {
        Self {
            transition,
            state: Vec::new(),
            parameters: Vec::new(),
            variables: Vec::new(),
            coder_url: "http://coder.example:3000".into(),
            secrets: Vec::new(),
            external_auth: Vec::new(),
            ssh_key: None,
            stage: PrebuiltWorkspaceBuildStage::None,
        }
    }
}

pub fn build_job(spec: BuildSpec) -> AcquiredJob {
    let build_id = uuid::Uuid::new_v4();
    AcquiredJob {
        job_id: uuid::Uuid::new_v4(),
        created_at: Utc::now(),
        provisioner: "terraform".into(),
        template_source_archive: Default::default(),
        kind: JobKind::WorkspaceBuild {
            workspace_build_id: build_id,
            workspace_name: "dev".into(),
            state: spec.state,
            rich_parameter_values: spec
                .parameters
                .iter()
                .map(|(name, value)| RichParameterValue {
                    name: (*name).into(),
                    value: (*value).into(),
                })
                .collect(),
            variable_values: spec.variables,
            metadata: Metadata {
                coder_url: spec.coder_url,
                workspace_transition: spec.transition,
                workspace_name: "dev".into(),
                workspace_owner: "alice".into(),
                workspace_owner_id: "6a3b0d1e-3f2c-4d5e-8f90-1a2b3c4d5e6f".into(),
                workspace_owner_email: "alice@example.com".into(),
                workspace_owner_name: "Alice".into(),
                workspace_owner_session_token: "owner-session-secret".into(),
                workspace_id: "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b".into(),
                workspace_build_id: build_id.to_string(),
                template_id: "11111111-2222-3333-4444-555555555555".into(),
                template_name: "tpl".into(),
                template_version: "v1".into(),
                workspace_owner_groups: vec!["devs".into()],
                prebuilt_workspace_build_stage: spec.stage,
                ..Metadata::default()
            },
            secrets: spec.secrets,
            external_auth_providers: spec.external_auth,
            owner_ssh_key: spec.ssh_key,
        },
    }
}

/// The successful result of a build, or the test fails with the job's logs.
pub fn built(
    result: Result<JobResult, JobFailure>,
    logs: &Logs,
) -> anyhow::Result<(Vec<u8>, Vec<codersdk::proto::Resource>)> {
    match result {
        Ok(JobResult::WorkspaceBuild {
            state, resources, ..
        }) => Ok((state, resources)),
        Ok(other) => bail!("expected a build result, got {other:?}"),
        Err(failure) => bail!("build failed: {}\n{}", failure.error, logs.text()),
    }
}

/// The failure of a job that was expected to fail.
pub fn failed(result: Result<JobResult, JobFailure>) -> anyhow::Result<JobFailure> {
    match result {
        Ok(result) => bail!("expected a failure, got {result:?}"),
        Err(failure) => Ok(failure),
    }
}

/// The addresses of the resources in a state file.
pub fn state_addresses(state: &[u8]) -> anyhow::Result<Vec<String>> {
    let doc: serde_json::Value = serde_json::from_slice(state).context("state is JSON")?;
    Ok(doc["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mode = if r["mode"] == "data" { "data." } else { "" };
            format!(
                "{mode}{}.{}",
                r["type"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default()
            )
        })
        .collect())
}

/// An executable shell script standing in for terraform.
pub fn fake_terraform(dir: &Path, script: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("terraform");
    std::fs::write(&path, format!("#!/bin/sh\n{script}"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// Waits until `check` holds, polling.
pub async fn until(what: &str, timeout: Duration, check: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    while !check() {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
