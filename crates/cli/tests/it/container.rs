//! The OCI image (`scripts/image.sh`) run with podman the way the README says: the seed's
//! `provisionerd start` in a container building a real terraform workspace for a server on the
//! host, and `coder server` in a container on the test PostgreSQL.
//!
//! Each test builds the image from the test's `coder` binary into podman storage of its own
//! (a temporary directory), with the project's podman configuration
//! (`scripts/podman/containers.conf`), so nothing of the machine's podman is touched.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::workspaces::WorkspaceStatus;
use sha2::{Digest, Sha256};
use testutil::{PASSWORD, TestDb, eventually};

use crate::harness::{CODER, Coder, Deployment, free_port};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A template for the tagged container daemon: it shows a digest of a variable that only the
/// daemon's environment sets (`TF_VAR_cloud_secret`), and its machine takes as long to build
/// as a parameter says (terraform's local-exec runs the image's /bin/sh).
const TEMPLATE: &str = r#"
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = "~> 2.0"
    }
  }
}

variable "cloud_secret" {
  type    = string
  default = "unset"
}

data "coder_workspace" "me" {}

data "coder_parameter" "build_seconds" {
  name    = "build_seconds"
  type    = "number"
  default = 0
}

resource "terraform_data" "machine" {
  count = data.coder_workspace.me.start_count
  provisioner "local-exec" {
    command = "echo building as $(id -un) for ${data.coder_parameter.build_seconds.value}s; sleep ${data.coder_parameter.build_seconds.value}"
  }
}

resource "coder_metadata" "machine" {
  count       = data.coder_workspace.me.start_count
  resource_id = terraform_data.machine[0].id
  item {
    key   = "secret_sha256"
    value = sha256(var.cloud_secret)
  }
}

output "secret_sha256" {
  value = sha256(var.cloud_secret)
}
"#;

/// podman with the project's configuration and storage of its own.
struct Podman {
    dir: tempfile::TempDir,
    image: String,
}

impl Podman {
    /// Builds the image; `None` when podman is missing and the environment allows skipping.
    fn with_image() -> anyhow::Result<Option<Self>> {
        let missing: Vec<&str> = ["podman", "buildah"]
            .into_iter()
            .filter(|tool| !on_path(tool))
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "{} not on PATH; the container tests need Debian's podman and buildah \
                 (scripts/setup.sh --tests installs them)",
                missing.join(" and ")
            );
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            if !ci && std::env::var("CODER_CONTAINER_TESTS_OPTIONAL").as_deref() == Ok("1") {
                eprintln!("{message}; skipping because CODER_CONTAINER_TESTS_OPTIONAL=1");
                return Ok(None);
            }
            bail!("{message}; or set CODER_CONTAINER_TESTS_OPTIONAL=1 (outside CI) to skip");
        }
        let dir = tempfile::Builder::new()
            .prefix("coder-podman-")
            .tempdir_in("/tmp")?;
        std::fs::write(
            dir.path().join("storage.conf"),
            format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n",
                dir.path().display()
            ),
        )?;
        let podman = Self {
            dir,
            image: "localhost/coder-test:latest".into(),
        };
        let started = Instant::now();
        let out = podman
            .configured(Command::new(format!("{REPO}/scripts/image.sh")))
            // Level 1: the test checks the image works, not how small its agent download is.
            .args([
                "--binary",
                CODER,
                "--tag",
                &podman.image,
                "--zstd-level",
                "1",
            ])
            .output()?;
        ensure!(
            out.status.success(),
            "scripts/image.sh failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "image built in {:.1}s: {}",
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
        Ok(Some(podman))
    }

    fn configured(&self, mut cmd: Command) -> Command {
        cmd.env(
            "CONTAINERS_CONF",
            format!("{REPO}/scripts/podman/containers.conf"),
        )
        .env(
            "CONTAINERS_STORAGE_CONF",
            self.dir.path().join("storage.conf"),
        )
        .stdin(Stdio::null());
        cmd
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.configured(Command::new("podman"));
        cmd.args(args);
        cmd
    }

    fn output(&self, args: &[&str]) -> anyhow::Result<Output> {
        Ok(self.command(args).output()?)
    }

    /// `podman run --rm --name <name> <args>`, its output going to `<log>.out` / `<log>.err`.
    fn spawn(&self, name: &str, log: &Path, args: &[&str]) -> anyhow::Result<Container> {
        let child = self
            .command(&["run", "--rm", "--name", name])
            .args(args)
            .stdout(std::fs::File::create(log.with_extension("out"))?)
            .stderr(std::fs::File::create(log.with_extension("err"))?)
            .spawn()?;
        Ok(Container {
            child,
            name: name.into(),
            log: log.to_path_buf(),
        })
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // The storage is this test's own: whatever is left in it goes.
        let _ = self.output(&["rm", "--all", "--force", "--time", "0"]);
        let _ = self.output(&["rmi", "--all", "--force"]);
    }
}

/// A container started with `podman run --rm`, stopped (forcibly) when dropped.
struct Container {
    child: Child,
    name: String,
    log: PathBuf,
}

impl Container {
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default()
    }

    /// Waits for the container to exit on its own.
    fn wait(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            ensure!(
                Instant::now() < deadline,
                "container {} still runs after {within:?}; stderr:\n{}",
                self.name,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// How many values in the database contain `needle`: every column of every table, bytea
/// (terraform state) included.
async fn occurrences(db: &TestDb, needle: &str) -> anyhow::Result<i64> {
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = 'public'",
    )
    .fetch_all(&db.pool)
    .await?;
    let mut found = 0;
    for (table, column, kind) in columns {
        let condition = if kind == "bytea" {
            format!(r#"position(convert_to($1, 'UTF8') in "{column}") > 0"#)
        } else {
            format!(r#"strpos("{column}"::text, $1) > 0"#)
        };
        let (count,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            r#"SELECT count(*) FROM "{table}" WHERE {condition}"#
        )))
        .bind(needle)
        .fetch_one(&db.pool)
        .await?;
        found += count;
    }
    Ok(found)
}

/// The seed's command, word for word, plus the test's own environment variables and name.
fn seed_daemon(
    podman: &Podman,
    d: &Deployment,
    name: &str,
    token: &str,
    env: &[&str],
) -> anyhow::Result<Container> {
    let url = format!("CODER_URL={}", d.url());
    let token = format!("CODER_SESSION_TOKEN={token}");
    let mut args = vec!["--network", "host", "-e", &url, "-e", &token];
    for var in env {
        args.extend(["-e", var]);
    }
    args.extend([
        "--entrypoint",
        "/opt/coder",
        &podman.image,
        "provisionerd",
        "start",
        "--tag",
        "environment=on_prem",
    ]);
    podman.spawn(name, &d.dir.path().join(name), &args)
}

/// Waits until a daemon with the on_prem tag is connected; returns its name.
async fn wait_daemon_connected(d: &Deployment) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let daemons = d.owner.provisioner_daemons("coder").await?;
        if let Some(daemon) = daemons.into_iter().find(|daemon| {
            daemon.tags.get("environment").map(String::as_str) == Some("on_prem")
                && daemon.status.as_str() != "offline"
        }) {
            return Ok(daemon.name);
        }
        ensure!(
            Instant::now() < deadline,
            "no on_prem daemon connected within a minute"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_provisionerd_command_builds_through_the_image() -> anyhow::Result<()> {
    if crate::terraform::terraform()?.is_none() {
        return Ok(());
    }
    let Some(podman) = Podman::with_image()? else {
        return Ok(());
    };
    let d = Deployment::new(&["--provisioner-daemons=0"]).await?;

    // A wrong token: the daemon gives up at once and says why.
    let mut refused = seed_daemon(&podman, &d, "wrong-token", "not-a-session-token", &[])?;
    let status = refused.wait(Duration::from_secs(60))?;
    let stderr = refused.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("the provisioner daemon stopped")
            && stderr.contains("coderd rejected the daemon's credentials"),
        "{stderr}"
    );

    // The seed's command, with a credential for terraform that only the container has.
    let secret = format!("container-only-{}", uuid::Uuid::new_v4().simple());
    let secret_var = format!("TF_VAR_cloud_secret={secret}");
    let started = Instant::now();
    let mut daemon = seed_daemon(&podman, &d, "on-prem-1", &d.token, &[&secret_var])?;
    let first = wait_daemon_connected(&d).await?;
    eprintln!(
        "container start to daemon connected: {:.2}s",
        started.elapsed().as_secs_f64()
    );

    let dir = d.dir.path().join("templates/on-prem");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.tf"), TEMPLATE)?;
    d.ok(&[
        "templates",
        "push",
        "on-prem",
        "-d",
        dir.to_str().context("utf-8 path")?,
        "--provisioner-tag",
        "environment=on_prem",
        "--yes",
    ])?;
    let out = d.ok(&["create", "quick", "-t", "on-prem", "--yes"])?;
    assert!(out.contains("building as coder for 0s"), "{out}");
    let ws = d.workspace("quick").await?;
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    let metadata = &ws
        .latest_build
        .resources
        .iter()
        .find(|r| r.name == "machine")
        .context("the machine resource")?
        .metadata;
    assert_eq!(metadata.len(), 1, "{metadata:?}");
    assert_eq!(metadata[0].key, "secret_sha256");
    assert_eq!(
        metadata[0].value,
        sha256_hex(&secret),
        "terraform saw the variable only the container had"
    );

    // `podman stop` in the middle of a build: the daemon finishes the job within its grace,
    // then exits 0; the build succeeds.
    let slow = d
        .coder(&d.token)
        .args([
            "create",
            "slow",
            "-t",
            "on-prem",
            "--parameter",
            "build_seconds=8",
            "--yes",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    eventually(
        Duration::from_secs(60),
        "the slow build sleeping",
        || async {
            let Ok(ws) = d.workspace("slow").await else {
                return Ok(false);
            };
            let logs = d.owner.workspace_build_logs(ws.latest_build.id).await?;
            Ok(logs
                .iter()
                .any(|l| l.output.contains("building as coder for 8s")))
        },
    )
    .await?;
    let stop = podman.output(&["stop", "--time", "60", &daemon.name])?;
    ensure!(
        stop.status.success(),
        "podman stop: {}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let status = daemon.wait(Duration::from_secs(10))?;
    assert!(status.success(), "{status}: {}", daemon.stderr());
    let out = slow.wait_with_output()?;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ws = d.workspace("slow").await?;
    assert_eq!(ws.latest_build.status, WorkspaceStatus::Running);
    assert_eq!(ws.latest_build.job.status, ProvisionerJobStatus::Succeeded);
    let logs = d.owner.workspace_build_logs(ws.latest_build.id).await?;
    assert!(
        logs.iter()
            .any(|l| l.output.contains("The provisioner daemon is shutting down")),
        "{logs:#?}"
    );
    let daemons = d.owner.provisioner_daemons("coder").await?;
    assert!(
        daemons
            .iter()
            .any(|daemon| daemon.name == first && daemon.status.as_str() != "busy"),
        "{daemons:#?}"
    );

    // A second signal stops the running job at once: it fails, saying why, with its state
    // kept, and the daemon still exits 0.
    let mut daemon = seed_daemon(&podman, &d, "on-prem-2", &d.token, &[])?;
    let mut interrupted = d
        .coder(&d.token)
        .args([
            "create",
            "interrupted",
            "-t",
            "on-prem",
            "--parameter",
            "build_seconds=300",
            "--yes",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    eventually(
        Duration::from_secs(60),
        "the long build sleeping",
        || async {
            let Ok(ws) = d.workspace("interrupted").await else {
                return Ok(false);
            };
            let logs = d.owner.workspace_build_logs(ws.latest_build.id).await?;
            Ok(logs
                .iter()
                .any(|l| l.output.contains("building as coder for 300s")))
        },
    )
    .await?;
    for _ in 0..2 {
        let kill = podman.output(&["kill", "--signal", "TERM", &daemon.name])?;
        ensure!(
            kill.status.success(),
            "podman kill: {}",
            String::from_utf8_lossy(&kill.stderr)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let status = daemon.wait(Duration::from_secs(60))?;
    assert!(status.success(), "{status}: {}", daemon.stderr());
    assert!(!interrupted.wait()?.success());
    let ws = d.workspace("interrupted").await?;
    assert_eq!(ws.latest_build.job.status, ProvisionerJobStatus::Failed);
    assert_eq!(
        ws.latest_build.job.error,
        "the provisioner daemon is shutting down"
    );

    // The credential reached terraform and nothing of coderd: not its database (the digest
    // is there, so the search does find what is stored), not its log.
    let db_digest = occurrences(&d._db, &sha256_hex(&secret)).await?;
    assert!(db_digest > 0, "the search finds the stored digest");
    assert_eq!(occurrences(&d._db, &secret).await?, 0);
    for entry in std::fs::read_dir(d.dir.path())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log")
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("server-"))
        {
            let log = std::fs::read_to_string(&path)?;
            assert!(!log.is_empty());
            assert!(!log.contains(&secret), "{} has the secret", path.display());
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_runs_in_the_image_on_an_external_postgres() -> anyhow::Result<()> {
    let Some(podman) = Podman::with_image()? else {
        return Ok(());
    };
    let dir = tempfile::Builder::new()
        .prefix("coder-server-image-")
        .tempdir_in("/tmp")?;

    // Without a database URL the image (which has no PostgreSQL server) says what to do.
    let mut bare = podman.spawn(
        "no-postgres",
        &dir.path().join("no-postgres"),
        &[&podman.image],
    )?;
    let status = bare.wait(Duration::from_secs(60))?;
    let stderr = bare.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("CODER_PG_CONNECTION_URL") && !stderr.contains("panicked"),
        "{stderr}"
    );

    // The test cluster listens on a Unix socket only its owner may open; a TCP port forwarded
    // to it stands in for a PostgreSQL server on the network.
    let db = TestDb::new().await?;
    let pg_url = match forward_to_socket(&db).await? {
        Some(port) => format!(
            "postgres://{}@127.0.0.1:{port}/{}",
            db.options.get_username(),
            db.name
        ),
        None => db.url(),
    };
    let config = dir.path().join("config");
    std::fs::create_dir(&config)?;
    nix::unistd::chown(
        &config,
        Some(nix::unistd::Uid::from_raw(1000)),
        Some(nix::unistd::Gid::from_raw(1000)),
    )?;
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut server = podman.spawn(
        "server",
        &dir.path().join("server"),
        &[
            "--network",
            "host",
            "-e",
            &format!("CODER_PG_CONNECTION_URL={pg_url}"),
            "-e",
            &format!("CODER_HTTP_ADDRESS=127.0.0.1:{port}"),
            "-e",
            &format!("CODER_ACCESS_URL={url}"),
            "-v",
            &format!("{}:/home/coder/.config", config.display()),
            &podman.image,
        ],
    )?;
    let http = reqwest::Client::new();
    eventually(Duration::from_secs(60), "the server's /healthz", || async {
        Ok(http
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == reqwest::StatusCode::OK))
    })
    .await
    .with_context(|| server.stderr())?;
    eprintln!(
        "server container start to /healthz 200: {:.2}s",
        started.elapsed().as_secs_f64()
    );

    let coder = Coder::new()?;
    coder.ok(&[
        "login",
        &url,
        "--first-user-username",
        "admin",
        "--first-user-email",
        "admin@example.com",
        "--first-user-password",
        PASSWORD,
    ])?;
    let users = coder.ok(&["users", "list"])?;
    assert!(users.contains("admin@example.com"), "{users}");

    let stop = podman.output(&["stop", "--time", "30", "server"])?;
    ensure!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let status = server.wait(Duration::from_secs(10))?;
    assert!(status.success(), "{status}: {}", server.stderr());
    Ok(())
}

/// Listens on a free loopback port and forwards each connection to the test database's socket;
/// `None` when the database is reached over TCP already (`CODER_TEST_DATABASE_URL`).
async fn forward_to_socket(db: &TestDb) -> anyhow::Result<Option<u16>> {
    let Some(dir) = db.options.get_socket() else {
        return Ok(None);
    };
    let socket = dir.join(format!(".s.PGSQL.{}", db.options.get_port()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let socket = socket.clone();
            tokio::spawn(async move {
                if let Ok(mut unix) = tokio::net::UnixStream::connect(&socket).await {
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                }
            });
        }
    });
    Ok(Some(port))
}
