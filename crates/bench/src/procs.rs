//! The processes a run starts: its own PostgreSQL cluster (durable), `coder server`, and external
//! `coder provisionerd` daemons. Children are killed if the bench dies; a normal end stops them
//! gracefully.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use coderd_store::postgres::embedded::{EmbeddedPostgres, Options};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::process::{Child, Command};
use url::Url;

/// The database every process of the run uses.
pub const DATABASE: &str = "coder";

/// A directory the embedded cluster's user can traverse: as root the cluster runs as
/// `postgres`, which must reach it.
pub fn open_dir(path: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path.to_path_buf())
}

/// The run's PostgreSQL: coderd's embedded-cluster code with fsync on, so every commit the
/// suite measures is durable.
pub struct Cluster {
    pg: EmbeddedPostgres,
}

impl Cluster {
    pub async fn start(dir: &Path) -> anyhow::Result<Self> {
        let mut options = Options::new(open_dir(dir)?);
        options.fsync = true;
        options.max_connections = 300;
        let pg = EmbeddedPostgres::start(options)
            .await
            .context("starting the benchmark's PostgreSQL")?;
        pg.ensure_database(DATABASE).await?;
        Ok(Self { pg })
    }

    pub fn options(&self) -> PgConnectOptions {
        self.pg
            .connect_options(DATABASE)
            .disable_statement_logging()
    }

    pub fn url(&self) -> String {
        self.pg.url(DATABASE)
    }

    /// The socket directory, for clients that take a host path (node-postgres).
    pub fn socket_dir(&self) -> anyhow::Result<String> {
        self.options()
            .get_socket()
            .map(|p| p.to_string_lossy().into_owned())
            .context("the embedded cluster has no socket directory")
    }

    pub async fn pool(&self, connections: u32) -> anyhow::Result<sqlx::PgPool> {
        Ok(PgPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(self.options())
            .await?)
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        Ok(self.pg.stop().await?)
    }
}

/// A `coder` command with nothing inherited from the caller's `CODER_*` settings.
pub fn coder(bin: &Path, config_dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CODER_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CODER_CONFIG_DIR", config_dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

fn log_to(cmd: &mut Command, path: &Path) -> anyhow::Result<()> {
    let log =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    cmd.stdout(log.try_clone()?).stderr(log);
    Ok(())
}

/// A running `coder server`.
pub struct Server {
    child: Child,
    pub pid: Pid,
    pub url: Url,
    pub log: PathBuf,
}

impl Server {
    /// Starts `coder server` on a free loopback port with `args`, and waits until `/healthz`
    /// answers. Returns the server and how long that took.
    pub async fn start(
        bin: &Path,
        config_dir: &Path,
        args: &[&str],
        timeout: Duration,
    ) -> anyhow::Result<(Self, Duration)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let address = format!("127.0.0.1:{port}");
        let log = config_dir.join(format!("server-{port}.log"));
        let mut cmd = coder(bin, config_dir);
        let relay_url = format!("http://{address}");
        cmd.arg("server")
            .args(["--http-address", &address])
            // Benchmarks start replicas on one database: each is reached at its own address.
            .args(["--derp-server-relay-url", &relay_url])
            .args(["--cache-dir", &config_dir.join("cache").to_string_lossy()])
            // Load is the point: the API rate limit would measure itself.
            .env("CODER_API_RATE_LIMIT", "-1")
            .args(args);
        log_to(&mut cmd, &log)?;
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = Pid::from_raw(child.id().context("coder server exited at once")? as i32);
        let url: Url = format!("http://{address}").parse()?;
        let health = url.join("/healthz")?;
        let http = reqwest::Client::new();
        loop {
            if let Ok(resp) = http.get(health.clone()).send().await
                && resp.status().is_success()
            {
                break;
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "coder server exited ({status}) before answering; its log ({}) says:\n{}",
                    log.display(),
                    tail(&log)
                );
            }
            ensure!(
                started.elapsed() < timeout,
                "coder server did not answer /healthz within {timeout:?}; see {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let ready = started.elapsed();
        Ok((
            Self {
                child,
                pid,
                url,
                log,
            },
            ready,
        ))
    }

    pub fn memory(&self) -> anyhow::Result<Memory> {
        Memory::of(self.pid)
    }

    pub fn cpu(&self) -> anyhow::Result<Duration> {
        cpu_time(self.pid)
    }

    /// Graceful stop (SIGINT, as Ctrl-C), killed after `timeout`.
    pub async fn stop(mut self, timeout: Duration) -> anyhow::Result<()> {
        stop_child(&mut self.child, self.pid, timeout).await
    }
}

/// External provisioner daemons, each its own `coder provisionerd start` process.
pub struct Daemons {
    children: Vec<(Child, Pid)>,
}

impl Daemons {
    /// Starts `count` daemons of `kind` (`echo`, `terraform`) named `<prefix><n>`,
    /// authenticated with `token`, and returns once coderd lists all of them as idle.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        server: &codersdk::Client,
        token: &str,
        (kind, prefix): (&str, &str),
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let mut children = Vec::with_capacity(count);
        for i in 0..count {
            let name = format!("{prefix}{i}");
            let mut cmd = coder(bin, dir);
            cmd.env("CODER_URL", server.url().as_str())
                .env("CODER_SESSION_TOKEN", token)
                .args(["provisionerd", "start", "--provisioner-types", kind])
                .args(["--name", &name])
                .args(["--cache-dir", &dir.join(&name).to_string_lossy()]);
            log_to(&mut cmd, &dir.join(format!("provisionerd-{name}.log")))?;
            let child = cmd.spawn().context("starting coder provisionerd")?;
            let pid =
                Pid::from_raw(child.id().context("coder provisionerd exited at once")? as i32);
            children.push((child, pid));
        }
        let daemons = Self { children };
        let deadline = Instant::now() + timeout;
        loop {
            let listed = server.provisioner_daemons("default").await?;
            let idle = listed
                .iter()
                .filter(|d| {
                    d.name.starts_with(prefix)
                        && d.status == codersdk::provisioners::ProvisionerDaemonStatus::Idle
                })
                .count();
            if idle >= count {
                return Ok(daemons);
            }
            ensure!(
                Instant::now() < deadline,
                "only {idle} of {count} provisioner daemons connected within {timeout:?}; see {}",
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(mut self, timeout: Duration) -> anyhow::Result<()> {
        for (child, pid) in &mut self.children {
            stop_child(child, *pid, timeout).await?;
        }
        Ok(())
    }
}

async fn stop_child(child: &mut Child, pid: Pid, timeout: Duration) -> anyhow::Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    let _ = kill(pid, Signal::SIGINT);
    if tokio::time::timeout(timeout, child.wait()).await.is_err() {
        child.kill().await?;
    }
    Ok(())
}

/// Resident memory of a process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Memory {
    /// VmRSS, MiB.
    pub rss_mib: f64,
    /// VmHWM (peak RSS), MiB.
    pub hwm_mib: f64,
    /// RssAnon: the part of VmRSS that is the process's own (heap, stacks), MiB.
    pub anon_mib: f64,
    /// RssFile: the part that is pages of mapped files, mostly the executable's, MiB. Clean
    /// and shared: the kernel can drop them under pressure and read them back.
    pub file_mib: f64,
}

impl Memory {
    pub fn of(pid: Pid) -> anyhow::Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        Self::parse(&status).context("no VmRSS/VmHWM in /proc/<pid>/status")
    }

    fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| -> Option<f64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib / 1024.0)
        };
        Some(Self {
            rss_mib: field("VmRSS:")?,
            hwm_mib: field("VmHWM:")?,
            anon_mib: field("RssAnon:").unwrap_or(0.0),
            file_mib: field("RssFile:").unwrap_or(0.0),
        })
    }
}

/// CPU time a process has used so far (user + system), from `/proc/<pid>/stat`.
pub fn cpu_time(pid: Pid) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).context("no utime/stime in /proc/<pid>/stat")?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?
        .filter(|hz| *hz > 0)
        .context("sysconf(CLK_TCK) gave no value")?;
    Ok(Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// utime + stime, in clock ticks. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(") ")?;
    // `rest` starts at field 3 (state); utime and stime are fields 14 and 15.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Raises this process's soft limit on open files to `want` (or the hard limit, if lower):
/// simulated agents hold one socket each, and `coder server`, a child, inherits the limit.
/// Returns the soft limit in force.
pub fn raise_nofile(want: u64) -> anyhow::Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = want.min(hard);
    if soft >= target {
        return Ok(soft);
    }
    setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    Ok(target)
}

/// The last lines of a log, for error messages.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_and_peak() {
        let status = "Name:\tcoder\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n\
                      RssAnon:\t    2048 kB\nRssFile:\t    8192 kB\n";
        let m = Memory::parse(status).expect("parsed");
        assert_eq!((m.rss_mib, m.hwm_mib), (10.0, 20.0));
        assert_eq!((m.anon_mib, m.file_mib), (2.0, 8.0));
        assert!(Memory::parse("Name:\tx\n").is_none());
        assert!(Memory::of(Pid::this()).expect("own status").rss_mib > 0.0);
    }

    #[test]
    fn reads_cpu_ticks() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 17 0 0 20 0 1 0 5";
        assert_eq!(parse_cpu_ticks(stat), Some(267));
        assert!(parse_cpu_ticks("42 (x").is_none());
        assert!(cpu_time(Pid::this()).is_ok());
    }
}
