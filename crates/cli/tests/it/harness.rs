//! Running the `coder` binary the way a user does: its own config directory, no inherited
//! CODER_* settings.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use codersdk::Client;
use codersdk::provisioners::ProvisionerDaemon;
use codersdk::users::{CreateFirstUserRequest, LoginWithPasswordRequest};
use codersdk::workspaces::Workspace;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use provisionerd::engines::echo::EchoTemplate;
use testutil::{PASSWORD, TestDb, eventually};
use url::Url;

pub const CODER: &str = env!("CARGO_BIN_EXE_coder");

/// A `coder` invocation with a private config directory.
pub struct Coder {
    pub config: tempfile::TempDir,
}

impl Coder {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            config: tempfile::Builder::new()
                .prefix("coder-cli-")
                .tempdir_in("/tmp")?,
        })
    }

    pub fn config_dir(&self) -> &Path {
        self.config.path()
    }

    pub fn command(&self) -> Command {
        command_with_config(self.config.path().to_path_buf())
    }

    /// Runs to completion and returns the output, whatever the exit status.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        Ok(self.command().args(args).stdin(Stdio::null()).output()?)
    }

    /// Runs and fails the test with both streams when the command fails.
    pub fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run(args)?;
        anyhow::ensure!(
            out.status.success(),
            "coder {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Runs with `input` on stdin.
    pub fn with_stdin(&self, args: &[&str], input: &str) -> anyhow::Result<Output> {
        let mut cmd = self.command();
        cmd.args(args);
        run_with_stdin(cmd, input)
    }
}

/// Runs `cmd` to completion with `input` on its stdin.
pub fn run_with_stdin(mut cmd: Command, input: &str) -> anyhow::Result<Output> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?
        .write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

pub fn command_with_config(config: PathBuf) -> Command {
    binary_with_config(Path::new(CODER), config)
}

/// Like [`command_with_config`], running the `coder` binary at `binary`.
pub fn binary_with_config(binary: &Path, config: PathBuf) -> Command {
    let mut cmd = Command::new(binary);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CODER_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CODER_CONFIG_DIR", config);
    cmd.env("NO_COLOR", "1");
    cmd
}

pub struct Server {
    pub child: Child,
    pub url: Url,
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts `coder server` with its config in `config` (embedded PostgreSQL unless `extra` has
/// `--postgres-url`) and waits until it answers.
pub async fn start_with(config: &Path, extra: &[&str]) -> anyhow::Result<Server> {
    start_binary(Path::new(CODER), config, extra).await
}

/// [`start_with`], running the `coder` binary at `binary`.
pub async fn start_binary(binary: &Path, config: &Path, extra: &[&str]) -> anyhow::Result<Server> {
    start_binary_with_env(binary, config, extra, &[]).await
}

/// [`start_binary`] with `env` added to the server's environment.
pub async fn start_binary_with_env(
    binary: &Path,
    config: &Path,
    extra: &[&str],
    env: &[(String, String)],
) -> anyhow::Result<Server> {
    let given = extra
        .iter()
        .position(|a| *a == "--http-address")
        .and_then(|i| extra.get(i + 1))
        .and_then(|addr| addr.rsplit(':').next())
        .and_then(|port| port.parse::<u16>().ok());
    let port = match given {
        Some(port) => port,
        None => free_port()?,
    };
    let address = format!("127.0.0.1:{port}");
    let own_address: &[&str] = if given.is_some() {
        &[]
    } else {
        &["--http-address", &address]
    };
    // Appended to: a server restarted on the same address keeps its predecessor's log.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(config.join(format!("server-{port}.log")))?;
    let child = binary_with_config(binary, config.to_path_buf())
        .arg("server")
        .args(own_address)
        .args(
            if extra.iter().any(|a| a.starts_with("--provisioner-daemons")) {
                &[][..]
            } else {
                &["--provisioner-daemons", "0"][..]
            },
        )
        .args(extra)
        // Tests make many calls a minute as one user; a test of the limit passes the flag.
        .env("CODER_API_RATE_LIMIT", "-1")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let url = Url::parse(&format!("http://127.0.0.1:{port}"))?;
    let client = Client::new(url.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.build_info().await.is_err() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "server did not start; see {}",
            config.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Server { child, url })
}

impl Server {
    /// SIGTERM, then wait for a clean exit.
    pub fn stop(mut self) -> anyhow::Result<()> {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::ensure!(status.success(), "server exited with {status}");
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// `coder server` with embedded PostgreSQL and no built-in daemons.
pub async fn start(config: &Path) -> anyhow::Result<Server> {
    start_with(config, &[]).await
}

/// A deployment in its own processes: `coder server` on a throwaway database, and an owner.
pub struct Deployment {
    pub _db: TestDb,
    pub dir: tempfile::TempDir,
    pub server: Option<Server>,
    pub owner: Client,
    pub token: String,
}

impl Deployment {
    pub async fn new(extra: &[&str]) -> anyhow::Result<Self> {
        Self::with_env(extra, &[]).await
    }

    /// [`Deployment::new`] with `env` added to the server's environment.
    pub async fn with_env(extra: &[&str], env: &[(String, String)]) -> anyhow::Result<Self> {
        let db = TestDb::new().await?;
        let dir = tempfile::Builder::new()
            .prefix("coder-e2e-")
            .tempdir_in("/tmp")?;
        let url = db.url();
        let mut args = vec!["--postgres-url", url.as_str()];
        args.extend_from_slice(extra);
        let server = start_binary_with_env(Path::new(CODER), dir.path(), &args, env).await?;
        let client = Client::new(server.url.clone());
        client
            .create_first_user(&CreateFirstUserRequest {
                email: "admin@example.com".into(),
                username: "admin".into(),
                password: PASSWORD.into(),
                ..Default::default()
            })
            .await?;
        let token = client
            .login_with_password(&LoginWithPasswordRequest {
                email: "admin@example.com".into(),
                password: PASSWORD.into(),
            })
            .await?
            .session_token;
        Ok(Self {
            owner: client.with_token(&token),
            token,
            server: Some(server),
            _db: db,
            dir,
        })
    }

    pub fn url(&self) -> String {
        self.owner.url().as_str().trim_end_matches('/').to_string()
    }

    /// Starts `coder server` again (after the test stopped it) on the same address and
    /// database, with `extra` flags.
    pub async fn start_server_again(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        let url = self.owner.url();
        let address = url
            .host_str()
            .zip(url.port())
            .map(|(host, port)| format!("{host}:{port}"))
            .ok_or_else(|| anyhow::anyhow!("the server's address"))?;
        let database = self._db.url();
        let mut args = vec!["--postgres-url", &database, "--http-address", &address];
        args.extend_from_slice(extra);
        self.server = Some(start_with(self.dir.path(), &args).await?);
        Ok(())
    }

    /// A `coder` command acting as `token` on this deployment.
    pub fn coder(&self, token: &str) -> Command {
        let mut cmd = crate::harness::command_with_config(self.dir.path().join("cli"));
        cmd.env("CODER_URL", self.url())
            .env("CODER_SESSION_TOKEN", token)
            .stdin(Stdio::null());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Ok(self.coder(&self.token).args(args).output()?)
    }

    pub fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        self.ok_as(&self.token, args)
    }

    /// Runs as `token`'s user and fails with both streams when the command fails.
    pub fn ok_as(&self, token: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = self.coder(token).args(args).output()?;
        anyhow::ensure!(
            out.status.success(),
            "coder {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Runs as the owner with `input` on stdin (answers to the command's questions).
    pub fn with_stdin(&self, args: &[&str], input: &str) -> anyhow::Result<std::process::Output> {
        let mut cmd = self.coder(&self.token);
        cmd.args(args);
        run_with_stdin(cmd, input)
    }

    /// Starts `coder provisionerd start` with `args`, logging to a file in the test directory.
    pub fn provisionerd(&self, token: &str, name: &str, args: &[&str]) -> anyhow::Result<Child> {
        let mut all = vec!["--provisioner-types", "echo"];
        all.extend_from_slice(args);
        self.spawn_provisionerd(token, name, &all)
    }

    /// Starts `coder provisionerd start --name <name>` with exactly `args` (terraform by
    /// default), logging to `provisionerd-<name>.log` in the test directory.
    pub fn spawn_provisionerd(
        &self,
        token: &str,
        name: &str,
        args: &[&str],
    ) -> anyhow::Result<Child> {
        let log = std::fs::File::create(self.dir.path().join(format!("provisionerd-{name}.log")))?;
        Ok(self
            .coder(token)
            .args(["provisionerd", "start", "--name", name])
            .args(args)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?)
    }

    pub fn template_dir(
        &self,
        name: &str,
        template: &EchoTemplate,
    ) -> anyhow::Result<std::path::PathBuf> {
        let dir = self.dir.path().join("templates").join(name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("echo.json"), serde_json::to_vec_pretty(template)?)?;
        Ok(dir)
    }

    pub async fn daemon_named(&self, name: &str) -> anyhow::Result<Option<ProvisionerDaemon>> {
        Ok(self
            .owner
            .provisioner_daemons("coder")
            .await?
            .into_iter()
            .find(|d| d.name == name))
    }

    pub async fn wait_daemon(&self, name: &str) -> anyhow::Result<()> {
        eventually(
            Duration::from_secs(30),
            &format!("daemon {name} connected"),
            || async {
                Ok(self
                    .daemon_named(name)
                    .await?
                    .is_some_and(|d| d.status.as_str() != "offline"))
            },
        )
        .await
        .map_err(|e| e.context(self.log_tails()))
    }

    /// The last lines of every log in the deployment's directory (the server's and each
    /// daemon's): a daemon that never connects says why only there, and the directory is gone
    /// once the test fails.
    fn log_tails(&self) -> String {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return "no logs".to_string();
        };
        let mut logs: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs.iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                format!("--- {} (last 40 lines)\n{tail}", path.display())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A member's session token (created through the CLI, logged in through the API).
    pub async fn member_token(&self, name: &str) -> anyhow::Result<String> {
        let email = format!("{name}@example.com");
        self.ok(&[
            "users",
            "create",
            "--username",
            name,
            "--email",
            &email,
            "--password",
            PASSWORD,
        ])?;
        Ok(self
            .owner
            .clone()
            .with_token("")
            .login_with_password(&LoginWithPasswordRequest {
                email,
                password: PASSWORD.into(),
            })
            .await?
            .session_token)
    }

    /// The template named `name`.
    pub async fn template(&self, name: &str) -> anyhow::Result<codersdk::templates::Template> {
        self.owner
            .all_templates()
            .await?
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| anyhow::anyhow!("no template {name:?}"))
    }

    pub fn workspace(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = anyhow::Result<Workspace>> + '_ {
        let name = name.to_string();
        async move { Ok(self.owner.workspace_by_owner_and_name("me", &name).await?) }
    }
}

pub fn stop_gracefully(mut child: Child) -> anyhow::Result<std::process::ExitStatus> {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        anyhow::ensure!(Instant::now() < deadline, "process did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
