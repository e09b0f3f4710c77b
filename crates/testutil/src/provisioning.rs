//! Real provisioner daemons and echo templates for tests: the `provisionerd` runner connected to
//! a test coderd over a real WebSocket, and helpers to import templates and wait for jobs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codersdk::Client;
use codersdk::provisioners::{ProvisionerJob, ProvisionerJobStatus};
use codersdk::templates::{
    CreateTemplateRequest, CreateTemplateVersionRequest, Template, TemplateVersion,
};
use codersdk::workspaces::{CreateWorkspaceRequest, Workspace, WorkspaceBuild};
use provisionerd::engines::echo::{self, EchoEngine, EchoTemplate};
use provisionerd::{DaemonAuth, DaemonConfig, DaemonError, WebSocketConnector};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::TestApp;

/// How long tests wait for a job that should finish.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(30);

/// A running daemon; stop it to wait for its graceful exit.
pub struct TestDaemon {
    pub name: String,
    stop: CancellationToken,
    handle: Option<JoinHandle<Result<(), DaemonError>>>,
}

impl TestDaemon {
    /// Graceful stop; returns how the daemon ended.
    pub async fn stop(mut self) -> anyhow::Result<Result<(), DaemonError>> {
        self.stop.cancel();
        let handle = self
            .handle
            .take()
            .ok_or_else(|| anyhow::anyhow!("daemon already ended"))?;
        Ok(handle.await?)
    }

    /// Waits for the daemon to end on its own (e.g. refused by coderd).
    pub async fn finished(mut self, within: Duration) -> anyhow::Result<Result<(), DaemonError>> {
        let handle = self
            .handle
            .take()
            .ok_or_else(|| anyhow::anyhow!("daemon already ended"))?;
        Ok(tokio::time::timeout(within, handle).await??)
    }

    /// Kills the daemon abruptly: no result, no goodbye.
    pub fn abort(mut self) {
        if let Some(handle) = self.handle.take() {
            handle.abort();
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Options of a test daemon.
pub struct DaemonSpec {
    pub name: String,
    pub auth: DaemonAuth,
    /// Organization path segment (`default` for the default organization).
    pub org: String,
    pub tags: BTreeMap<String, String>,
    pub shutdown_grace: Duration,
}

impl DaemonSpec {
    pub fn new(name: &str, auth: DaemonAuth) -> Self {
        Self {
            name: name.into(),
            auth,
            org: "default".into(),
            tags: BTreeMap::new(),
            shutdown_grace: Duration::from_secs(5),
        }
    }

    pub fn tags(mut self, tags: &[(&str, &str)]) -> Self {
        self.tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self
    }

    pub fn org(mut self, org: &str) -> Self {
        self.org = org.into();
        self
    }
}

/// Starts an echo daemon connected to the coderd at `url` over a WebSocket.
fn spawn_daemon(url: &url::Url, spec: DaemonSpec) -> anyhow::Result<TestDaemon> {
    let connector = WebSocketConnector::new(url.clone(), spec.org.clone(), spec.auth)?;
    let mut config = DaemonConfig::new(spec.name.clone()).with_engine("echo", Arc::new(EchoEngine));
    config.tags = spec.tags;
    config.shutdown_grace = spec.shutdown_grace;
    let stop = CancellationToken::new();
    let handle = tokio::spawn(provisionerd::run(connector, config, stop.clone()));
    Ok(TestDaemon {
        name: spec.name,
        stop,
        handle: Some(handle),
    })
}

impl crate::Replica {
    /// Starts an echo daemon connected to this replica.
    pub fn daemon(&self, spec: DaemonSpec) -> anyhow::Result<TestDaemon> {
        spawn_daemon(&self.url, spec)
    }
}

impl TestApp {
    /// Starts an echo daemon connected to this coderd over a WebSocket.
    pub fn daemon(&self, spec: DaemonSpec) -> anyhow::Result<TestDaemon> {
        spawn_daemon(&self.url, spec)
    }

    /// Uploads an echo template and starts its import (without waiting).
    pub async fn echo_version(
        &self,
        client: &Client,
        org: &str,
        template: &EchoTemplate,
        tags: &[(&str, &str)],
    ) -> anyhow::Result<TemplateVersion> {
        self.echo_version_of(client, org, None, template, tags)
            .await
    }

    /// Like [`TestApp::echo_version`], as a new version of an existing template.
    pub async fn echo_version_of(
        &self,
        client: &Client,
        org: &str,
        template_id: Option<uuid::Uuid>,
        template: &EchoTemplate,
        tags: &[(&str, &str)],
    ) -> anyhow::Result<TemplateVersion> {
        let file = client.upload_tar(echo::archive(template)).await?;
        Ok(client
            .create_template_version(
                org,
                &CreateTemplateVersionRequest {
                    file_id: file.hash,
                    template_id,
                    provisioner: "echo".into(),
                    storage_method: "file".into(),
                    tags: tags
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    ..Default::default()
                },
            )
            .await?)
    }

    /// Imports an echo template, waits for the import, and creates the template.
    pub async fn echo_template(
        &self,
        client: &Client,
        name: &str,
        template: &EchoTemplate,
        tags: &[(&str, &str)],
    ) -> anyhow::Result<Template> {
        let version = self.echo_version(client, "default", template, tags).await?;
        let job = wait_job(|| async { Ok(client.template_version(version.id).await?.job) }).await?;
        anyhow::ensure!(
            job.status == ProvisionerJobStatus::Succeeded,
            "import failed: {}",
            job.error
        );
        Ok(client
            .create_template(
                "default",
                &CreateTemplateRequest {
                    name: name.into(),
                    template_version_id: version.id,
                    ..Default::default()
                },
            )
            .await?)
    }
}

/// Creates `name` from `template` for the client's user, waits for its first build, and
/// returns the workspace as it then is.
pub async fn running_workspace(
    client: &Client,
    template: uuid::Uuid,
    name: &str,
) -> anyhow::Result<Workspace> {
    let ws = client
        .create_workspace(
            "me",
            &CreateWorkspaceRequest {
                template_id: Some(template),
                name: name.into(),
                ..Default::default()
            },
        )
        .await?;
    wait_build(client, ws.latest_build.id).await?;
    Ok(client.workspace(ws.id).await?)
}

/// Polls `job` until it is no longer active (or fails the test after [`JOB_TIMEOUT`]).
pub async fn wait_job<F, Fut>(mut job: F) -> anyhow::Result<ProvisionerJob>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<ProvisionerJob>>,
{
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let current = job().await?;
        if !current.status.is_active() {
            return Ok(current);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "job {} still {} after {JOB_TIMEOUT:?}",
            current.id,
            current.status.as_str()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits for a build's job to finish and returns the build as it then is.
pub async fn wait_build(client: &Client, build: uuid::Uuid) -> anyhow::Result<WorkspaceBuild> {
    wait_job(|| async { Ok(client.workspace_build(build).await?.job) }).await?;
    Ok(client.workspace_build(build).await?)
}

/// Polls `check` until it returns true, failing after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
