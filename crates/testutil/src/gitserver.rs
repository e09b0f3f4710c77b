//! A git server on loopback for the external auth tests: nginx in front of `git http-backend`
//! (through fcgiwrap), with every request first put to the test OpenID provider's
//! `/_test/git-auth` by nginx's `auth_request`. A clone or push therefore works exactly with the
//! access tokens the provider would accept at that moment (issued by it, not expired, not
//! revoked, their grant still standing), sent as git sends them for the provider kinds Coder
//! knows: `oauth2:<token>` (GitLab), `x-token-auth:<token>` (Bitbucket), `x-access-token:<token>`
//! or `<token>:` (GitHub). Everything is Debian's (`nginx`, `fcgiwrap`, git), installed by
//! `scripts/setup.sh --tests`; nothing is configured system-wide: the configuration, logs, pid
//! file, temp paths, FastCGI socket and repositories live in one temp directory, and both servers
//! run as the current user (root or not).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use url::Url;

/// nginx's configuration; the `@NAME@` placeholders are filled in by [`GitServer::start`].
/// `master_process off` keeps nginx one process running as whoever started it (a master started
/// as root would run its workers as `nobody`, who cannot enter the temp directory). nginx passes
/// the provider's `WWW-Authenticate` on a 401 itself, which git needs before it sends credentials.
const NGINX_CONF: &str = r#"daemon off;
master_process off;
pid "@DIR@/nginx.pid";
error_log "@DIR@/error.log" info;
events {
  worker_connections 256;
}
http {
  log_format git '$remote_addr "$remote_user" "$request" $status';
  access_log "@DIR@/access.log" git;
  client_body_temp_path "@DIR@/tmp/body";
  proxy_temp_path "@DIR@/tmp/proxy";
  fastcgi_temp_path "@DIR@/tmp/fastcgi";
  uwsgi_temp_path "@DIR@/tmp/uwsgi";
  scgi_temp_path "@DIR@/tmp/scgi";
  client_max_body_size 0;
  server {
    listen 127.0.0.1:@PORT@;
    location = /_git_auth {
      internal;
      proxy_pass @AUTH_URL@;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
    }
    location / {
      auth_request /_git_auth;
      fastcgi_pass "unix:@DIR@/fcgiwrap.sock";
      fastcgi_param SCRIPT_FILENAME "@BACKEND@";
      fastcgi_param GIT_PROJECT_ROOT "@DIR@/repos";
      fastcgi_param GIT_HTTP_EXPORT_ALL "";
      fastcgi_param GIT_CONFIG_NOSYSTEM 1;
      fastcgi_param GIT_CONFIG_GLOBAL /dev/null;
      fastcgi_param PATH_INFO $uri;
      fastcgi_param QUERY_STRING $query_string;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param CONTENT_TYPE $content_type;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param REMOTE_ADDR $remote_addr;
      fastcgi_param REMOTE_USER $remote_user;
      fastcgi_param SERVER_PROTOCOL $server_protocol;
    }
  }
}
"#;

/// nginx and fcgiwrap serving bare repositories; both are killed (with their process groups)
/// and the directory removed when dropped.
pub struct GitServer {
    /// `http://127.0.0.1:<port>/`; the repository `name` is at `<url><name>.git`.
    pub url: Url,
    dir: tempfile::TempDir,
    nginx: Child,
    fcgiwrap: Child,
}

impl GitServer {
    /// Starts the server, asking the provider at `idp` (a `TestIdp`'s issuer) about every
    /// request. Not having nginx, fcgiwrap or git-http-backend installed is a failure, never a
    /// skip.
    pub async fn start(idp: &Url) -> anyhow::Result<Self> {
        let nginx_bin = program("nginx").context(
            "nginx is not installed (scripts/setup.sh --tests installs Debian's nginx and fcgiwrap)",
        )?;
        let fcgiwrap_bin = program("fcgiwrap").context(
            "fcgiwrap is not installed (scripts/setup.sh --tests installs Debian's nginx and fcgiwrap)",
        )?;
        let backend = http_backend().await?;
        let auth_url = idp.join("/_test/git-auth")?;

        let dir = tempfile::Builder::new().prefix("coder-rs-git-").tempdir()?;
        std::fs::create_dir_all(dir.path().join("repos"))?;
        std::fs::create_dir_all(dir.path().join("tmp"))?;
        let dir_str = dir
            .path()
            .to_str()
            .context("the temp directory's path is not UTF-8")?
            .to_string();
        let backend_str = backend
            .to_str()
            .context("git-http-backend's path is not UTF-8")?
            .to_string();

        // fcgiwrap runs git-http-backend for nginx; `-f` sends its stderr to nginx's error log.
        let socket = dir.path().join("fcgiwrap.sock");
        let mut fcgiwrap = Command::new(&fcgiwrap_bin)
            .arg("-f")
            .args(["-c", "4"])
            .arg("-s")
            .arg(format!("unix:{dir_str}/fcgiwrap.sock"))
            .current_dir(dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("fcgiwrap.log"))?)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", fcgiwrap_bin.display()))?;
        let mut ready = false;
        for _ in 0..400 {
            if socket.exists() {
                ready = true;
                break;
            }
            if let Some(status) = fcgiwrap.try_wait()? {
                bail!(
                    "fcgiwrap exited ({status}): {}",
                    read_log(&dir.path().join("fcgiwrap.log"))
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if !ready {
            kill_group(&mut fcgiwrap);
            bail!("fcgiwrap did not create {} within 10 s", socket.display());
        }

        // nginx on a port the kernel just handed out and released; should another process take
        // it in between, nginx exits and another port is tried.
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let conf = NGINX_CONF
                .replace("@DIR@", &dir_str)
                .replace("@PORT@", &port.to_string())
                .replace("@AUTH_URL@", auth_url.as_str())
                .replace("@BACKEND@", &backend_str);
            let conf_path = dir.path().join("nginx.conf");
            std::fs::write(&conf_path, conf)?;
            let _ = std::fs::remove_file(dir.path().join("nginx.pid"));
            let mut nginx = Command::new(&nginx_bin)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(&conf_path)
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("nginx.log"))?)
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting {}", nginx_bin.display()))?;
            // nginx writes its pid file once its listening socket is bound.
            let pid = nginx.id().context("nginx's pid")?.to_string();
            let mut started = false;
            for _ in 0..400 {
                let written =
                    std::fs::read_to_string(dir.path().join("nginx.pid")).unwrap_or_default();
                if written.trim() == pid {
                    started = true;
                    break;
                }
                if nginx.try_wait()?.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            if started {
                return Ok(Self {
                    url: Url::parse(&format!("http://127.0.0.1:{port}/"))?,
                    dir,
                    nginx,
                    fcgiwrap,
                });
            }
            kill_group(&mut nginx);
            last_error = format!(
                "{}{}",
                read_log(&dir.path().join("nginx.log")),
                read_log(&dir.path().join("error.log"))
            );
            if !last_error.contains("Address already in use") {
                break;
            }
        }
        kill_group(&mut fcgiwrap);
        bail!("nginx did not start: {last_error}")
    }

    /// The bare repository `name` on disk (`name` may contain `/`, as `org/repo`).
    pub fn repo_path(&self, name: &str) -> PathBuf {
        self.dir.path().join("repos").join(format!("{name}.git"))
    }

    /// The clone URL of the repository `name`.
    pub fn repo_url(&self, name: &str) -> anyhow::Result<Url> {
        Ok(self.url.join(&format!("{name}.git"))?)
    }

    /// Creates the bare repository `name` (pushes allowed) holding one commit on `main` with
    /// these `(path, contents)` files; returns its clone URL.
    pub async fn create_repo(&self, name: &str, files: &[(&str, &str)]) -> anyhow::Result<Url> {
        ensure!(
            !name.is_empty()
                && name
                    .split('/')
                    .all(|part| !part.is_empty() && part != "." && part != "..")
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)),
            "invalid repository name {name:?}"
        );
        let bare = self.repo_path(name);
        ensure!(!bare.exists(), "repository {name} exists already");
        let work = tempfile::Builder::new()
            .prefix("work-")
            .tempdir_in(self.dir.path())?;
        git(work.path(), ["init", "-q", "-b", "main"]).await?;
        for (path, contents) in files {
            let file = work.path().join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&file, contents)?;
        }
        git(work.path(), ["add", "-A"]).await?;
        git(
            work.path(),
            [
                "-c",
                "user.name=coder-rs tests",
                "-c",
                "user.email=tests@coder-rs.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "Initial commit",
            ],
        )
        .await?;
        std::fs::create_dir_all(&bare)?;
        git(&bare, ["init", "-q", "--bare", "-b", "main"]).await?;
        git(&bare, ["config", "http.receivepack", "true"]).await?;
        git(
            work.path(),
            [
                OsStr::new("push"),
                OsStr::new("-q"),
                bare.as_os_str(),
                OsStr::new("main"),
            ],
        )
        .await?;
        self.repo_url(name)
    }

    /// Runs git inside the bare repository `name` (`rev-parse main`, `show main:README.md`, ...)
    /// and returns its trimmed standard output.
    pub async fn git(&self, name: &str, args: &[&str]) -> anyhow::Result<String> {
        git(&self.repo_path(name), args).await
    }

    /// nginx's access log: one line per request, `addr "user" "request" status`.
    pub fn access_log(&self) -> String {
        read_log(&self.dir.path().join("access.log"))
    }

    /// nginx's error log (with git-http-backend's stderr).
    pub fn error_log(&self) -> String {
        read_log(&self.dir.path().join("error.log"))
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        kill_group(&mut self.nginx);
        kill_group(&mut self.fcgiwrap);
    }
}

/// Kills a child started with `process_group(0)` and everything in its group (fcgiwrap's
/// preforked workers and the git processes they run).
fn kill_group(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.start_kill();
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `name` on `PATH`, or in the sbin directories a non-root `PATH` leaves out (Debian installs
/// nginx and fcgiwrap in /usr/sbin).
fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The git-http-backend of the git on `PATH`, or Debian's.
async fn http_backend() -> anyhow::Result<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(out) = Command::new("git").arg("--exec-path").output().await
        && out.status.success()
    {
        let exec_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        candidates.push(PathBuf::from(exec_path).join("git-http-backend"));
    }
    candidates.push(PathBuf::from("/usr/lib/git-core/git-http-backend"));
    candidates
        .into_iter()
        .find(|candidate| candidate.is_file())
        .context("git-http-backend is not installed (scripts/setup.sh installs Debian's git)")
}

/// Runs git in `cwd` without the machine's or user's configuration; its trimmed stdout.
async fn git<I, S>(cwd: &Path, args: I) -> anyhow::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let shown = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("git")
        .args(&args)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running git {shown}"))?;
    if !out.status.success() {
        bail!(
            "git {shown} in {}: {}: {}",
            cwd.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
