//! The deployment under test: `coder server` on the run's database, an owner and its session
//! token, the echo templates, and the bench's own database pool and completion listener.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use codersdk::Client;
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::templates::{CreateTemplateRequest, CreateTemplateVersionRequest, Template};
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use codersdk::workspaces::{CreateWorkspaceRequest, Workspace};
use futures::StreamExt;
use provisionerd::engines::echo::{self, EchoTemplate};
use uuid::Uuid;

use crate::completions::Completions;
use crate::procs::{Cluster, Daemons, Server};

const EMAIL: &str = "bench@example.com";
const PASSWORD: &str = "s3cret-Passphrase-42";

/// A workspace build template the way a small real one looks to coderd: a resource with an
/// agent and an app on start, the resource alone on stop, a log line each.
pub fn build_template() -> anyhow::Result<EchoTemplate> {
    Ok(serde_json::from_value(serde_json::json!({
        "start": {
            "logs": [{"output": "starting the benchmark workspace"}],
            "resources": [{
                "name": "dev", "type": "bench_instance",
                "agents": [{
                    "name": "main", "operating_system": "linux", "architecture": "amd64",
                    "auth": {"token": "bench-agent-token"},
                    "apps": [{"slug": "code", "display_name": "Code", "url": "http://localhost:8080"}]
                }]
            }]
        },
        "stop": {
            "logs": [{"output": "stopping the benchmark workspace"}],
            "resources": [{"name": "dev", "type": "bench_instance"}]
        }
    }))?)
}

/// The template of the simulated agents (P8): a resource with one agent declaring two metadata
/// keys, as a template with `metadata` blocks on its `coder_agent` does.
pub fn agent_template() -> anyhow::Result<EchoTemplate> {
    let metadata: Vec<serde_json::Value> = crate::scenarios::agents::KEYS
        .iter()
        .map(|key| {
            serde_json::json!({
                "key": key, "display_name": key, "script": format!("echo {key}"),
                "interval": crate::scenarios::agents::METADATA_EVERY.as_secs(), "timeout": 1
            })
        })
        .collect();
    Ok(serde_json::from_value(serde_json::json!({
        "start": {
            "resources": [{
                "name": "dev", "type": "bench_instance",
                "agents": [{
                    "name": "main", "operating_system": "linux", "architecture": "amd64",
                    "auth": {"token": "bench-agent-token"},
                    "metadata": metadata
                }]
            }]
        },
        "stop": {"resources": [{"name": "dev", "type": "bench_instance"}]}
    }))?)
}

pub struct Deployment {
    pub server: Server,
    pub daemons: Option<Daemons>,
    /// The owner's client.
    pub owner: Client,
    pub token: String,
    pub pool: sqlx::PgPool,
    pub completions: Completions,
    pub dir: PathBuf,
    pub timeout: Duration,
    coder_bin: PathBuf,
    postgres_url: String,
}

impl Deployment {
    /// Starts `coder server` (no built-in daemons) on `cluster` and creates the owner.
    pub async fn start(
        coder_bin: &Path,
        cluster: &Cluster,
        dir: &Path,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let url = cluster.url();
        let (server, _) = Server::start(
            coder_bin,
            &crate::procs::open_dir(dir)?,
            &["--postgres-url", &url, "--provisioner-daemons=0"],
            timeout,
        )
        .await?;
        let client = Client::new(server.url.clone());
        client
            .create_first_user(&CreateFirstUserRequest {
                email: EMAIL.into(),
                username: "bench".into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await?;
        let token = client
            .login_with_password(&LoginWithPasswordRequest {
                email: EMAIL.into(),
                password: PASSWORD.into(),
            })
            .await?
            .session_token;
        let pool = cluster.pool(32).await?;
        let completions = Completions::listen(&pool).await?;
        Ok(Self {
            owner: client.with_token(&token),
            token,
            server,
            daemons: None,
            pool,
            completions,
            dir: dir.to_path_buf(),
            timeout,
            coder_bin: coder_bin.to_path_buf(),
            postgres_url: url,
        })
    }

    /// Starts another `coder server` on this deployment's database (a second replica, no
    /// daemons) and returns it with the owner's client for it.
    pub async fn replica(&self, name: &str) -> anyhow::Result<(Server, Client)> {
        let (server, _) = Server::start(
            &self.coder_bin,
            &crate::procs::open_dir(&self.dir.join(name))?,
            &[
                "--postgres-url",
                &self.postgres_url,
                "--provisioner-daemons=0",
            ],
            self.timeout,
        )
        .await?;
        let client = Client::new(server.url.clone()).with_token(&self.token);
        Ok((server, client))
    }

    pub async fn start_daemons(&mut self, coder_bin: &Path, count: usize) -> anyhow::Result<()> {
        let daemons = Daemons::start(
            coder_bin,
            &crate::procs::open_dir(&self.dir.join("daemons"))?,
            &self.owner,
            &self.token,
            ("echo", "bench-"),
            count,
            self.timeout,
        )
        .await?;
        self.daemons = Some(daemons);
        Ok(())
    }

    /// One external daemon running terraform jobs (terraform from PATH), for the caller to
    /// stop. The echo daemons take no terraform job, so it gets all of them.
    pub async fn terraform_daemon(&self, coder_bin: &Path) -> anyhow::Result<Daemons> {
        Daemons::start(
            coder_bin,
            &crate::procs::open_dir(&self.dir.join("terraform-daemon"))?,
            &self.owner,
            &self.token,
            ("terraform", "tf-"),
            1,
            self.timeout,
        )
        .await
    }

    /// Uploads `template`, imports it (tagged with `tags`) and, when `name` is given, waits for
    /// the import and makes it a template. Returns the version's job and the template.
    pub async fn template(
        &self,
        name: &str,
        template: &EchoTemplate,
        tags: &[(&str, &str)],
        wait: bool,
    ) -> anyhow::Result<(Uuid, Option<Template>)> {
        self.template_of(name, "echo", echo::archive(template), tags, wait)
            .await
    }

    /// [`Self::template`] for any provisioner and source archive.
    pub async fn template_of(
        &self,
        name: &str,
        provisioner: &str,
        archive: Vec<u8>,
        tags: &[(&str, &str)],
        wait: bool,
    ) -> anyhow::Result<(Uuid, Option<Template>)> {
        let file = self.owner.upload_tar(archive).await?;
        let version = self
            .owner
            .create_template_version(
                "default",
                &CreateTemplateVersionRequest {
                    file_id: file.hash,
                    provisioner: provisioner.into(),
                    storage_method: "file".into(),
                    tags: tags
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    ..Default::default()
                },
            )
            .await?;
        if !wait {
            return Ok((version.job.id, None));
        }
        self.completions.wait(version.job.id, self.timeout).await?;
        let job = self.owner.template_version(version.id).await?.job;
        ensure!(
            job.status == ProvisionerJobStatus::Succeeded,
            "importing {name} failed: {}",
            job.error
        );
        let template = self
            .owner
            .create_template(
                "default",
                &CreateTemplateRequest {
                    name: name.into(),
                    template_version_id: version.id,
                    ..Default::default()
                },
            )
            .await?;
        Ok((version.job.id, Some(template)))
    }

    /// Creates `count` workspaces of `template` through the API (a few at a time) and waits
    /// for their first builds.
    pub async fn workspaces(
        &self,
        template: Uuid,
        prefix: &str,
        count: usize,
    ) -> anyhow::Result<Vec<Workspace>> {
        let created: Vec<anyhow::Result<Workspace>> = futures::stream::iter(0..count)
            .map(|i| async move {
                let ws = self
                    .owner
                    .create_workspace(
                        "me",
                        &CreateWorkspaceRequest {
                            template_id: Some(template),
                            name: format!("{prefix}{i}"),
                            ..Default::default()
                        },
                    )
                    .await?;
                self.completions
                    .wait(ws.latest_build.job.id, self.timeout)
                    .await?;
                Ok(ws)
            })
            .buffer_unordered(8)
            .collect()
            .await;
        created.into_iter().collect()
    }

    pub async fn organization(&self) -> anyhow::Result<Uuid> {
        Ok(self.owner.organization("default").await?.id)
    }

    /// Waits until no job is running or pending except those whose tags no daemon has.
    pub async fn quiesce(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let busy: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM provisioner_jobs
                 WHERE completed_at IS NULL AND (started_at IS NOT NULL OR tags_key = $1)",
            )
            .bind(untagged_key())
            .fetch_one(&self.pool)
            .await?;
            if busy == 0 {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "{busy} jobs still active after {:?}",
                self.timeout
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        let grace = Duration::from_secs(10);
        if let Some(daemons) = self.daemons {
            daemons.stop(grace).await.context("stopping the daemons")?;
        }
        self.server
            .stop(grace)
            .await
            .context("stopping coder server")
    }
}

/// The canonical key of an untagged organization job (what the bench's daemons accept).
pub fn untagged_key() -> String {
    use coderd_core::provisioners::tags;
    tags::key(&tags::normalize(Default::default(), None))
}
