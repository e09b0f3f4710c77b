//! The private PostgreSQL cluster `coder server` runs when no database URL is given.
//!
//! The cluster lives in a directory of ours (normally `<config dir>/postgres`), is initialised on
//! first use, reused on every later start and stopped on shutdown. It listens only on a Unix
//! socket in a directory only its owner can enter, so two servers never collide on a port and
//! nobody else can connect. PostgreSQL refuses to run as root; when we are root the cluster runs
//! as the unprivileged `postgres` system user instead.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Gid, Pid, Uid, User};
use sha2::{Digest, Sha256};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

/// The superuser initdb creates; trust authentication is safe because only the socket's owner
/// (and root) can reach the socket.
const SUPERUSER: &str = "coder";
const PORT: u16 = 5432;
/// Longest socket path the kernel accepts (`sun_path` is 108 bytes including the NUL).
const MAX_SOCKET_PATH: usize = 107;
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // The usual case in a container image, which carries no PostgreSQL: the URL is the answer.
    #[error(
        "no PostgreSQL to use: --postgres-url (CODER_PG_CONNECTION_URL) is not set, and the \
         server binaries for an embedded database (initdb, postgres) were not found in \
         `pg_config --bindir`, /usr/lib/postgresql/*/bin or PATH; point \
         CODER_PG_CONNECTION_URL at your PostgreSQL (13 or newer), or install the binaries \
         (Debian: `apt-get install postgresql`)"
    )]
    BinariesNotFound,
    #[error(
        "PostgreSQL server binaries (initdb, postgres) are not in {}; install them (Debian: \
         `apt-get install postgresql`), point --postgres-bin-dir elsewhere, or pass --postgres-url",
        .0.display()
    )]
    BinariesNotIn(PathBuf),
    #[error(
        "running as root, the embedded PostgreSQL must run as the unprivileged system user \
         `postgres`, which does not exist; create it (Debian's `postgresql` package does) or pass \
         --postgres-url"
    )]
    NoUnprivilegedUser,
    #[error("{action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("initdb failed ({status}): {output}")]
    Initdb { status: String, output: String },
    #[error("PostgreSQL did not become ready within {0:?}; its log says:\n{1}")]
    NotReady(Duration, String),
    #[error("PostgreSQL exited during start-up ({0}); its log says:\n{1}")]
    Exited(String, String),
    #[error("preparing the database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("looking up system user: {0}")]
    UserLookup(#[from] nix::Error),
}

/// How to set up the cluster.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the cluster lives (data directory, socket, log).
    pub root_dir: PathBuf,
    /// Turning fsync off is only acceptable for throwaway test clusters.
    pub fsync: bool,
    pub max_connections: u32,
    /// Where `initdb` and `postgres` are; searched for when absent.
    pub bin_dir: Option<PathBuf>,
}

impl Options {
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_dir: root_dir.into(),
            fsync: true,
            max_connections: 200,
            bin_dir: None,
        }
    }
}

/// Who the cluster's processes run as.
#[derive(Debug, Clone)]
struct RunAs {
    name: String,
    uid: Uid,
    gid: Gid,
}

/// A running cluster. Dropping it leaves the cluster running; call [`EmbeddedPostgres::stop`].
#[derive(Debug)]
pub struct EmbeddedPostgres {
    root_dir: PathBuf,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    pid: Pid,
    /// Whether this process started the postmaster (otherwise it adopted a running one).
    started_here: bool,
}

impl EmbeddedPostgres {
    /// Initialises the cluster if needed, then starts it (or adopts one already running in the
    /// same directory, e.g. left behind by a crashed server) and waits until it accepts
    /// connections.
    pub async fn start(options: Options) -> Result<Self, Error> {
        let bin_dir = match &options.bin_dir {
            Some(dir) if has_server_binaries(dir) => dir.clone(),
            Some(dir) => return Err(Error::BinariesNotIn(dir.clone())),
            None => find_bin_dir().ok_or(Error::BinariesNotFound)?,
        };
        let run_as = run_as()?;
        let root_dir = choose_root_dir(&options.root_dir, run_as.as_ref())?;
        if root_dir != options.root_dir {
            tracing::info!(
                configured = %options.root_dir.display(),
                using = %root_dir.display(),
                "the embedded PostgreSQL's user cannot reach the configured directory; using another"
            );
        }
        if let Some(user) = &run_as {
            tracing::info!(
                user = %user.name,
                "running as root: the embedded PostgreSQL runs as an unprivileged system user"
            );
        }
        create_private_dir(&root_dir, run_as.as_ref())?;
        let data_dir = root_dir.join("data");
        let socket_dir = socket_dir_for(&root_dir);
        create_private_dir(&socket_dir, run_as.as_ref())?;

        if !data_dir.join("PG_VERSION").exists() {
            initdb(&bin_dir, &data_dir, run_as.as_ref()).await?;
        }

        if let Some(pid) = running_postmaster(&data_dir) {
            tracing::info!(pid = pid.as_raw(), data_dir = %data_dir.display(), "adopting running embedded PostgreSQL");
            let pg = Self {
                root_dir,
                data_dir,
                socket_dir,
                pid,
                started_here: false,
            };
            pg.wait_ready(None).await?;
            return Ok(pg);
        }

        let log_path = root_dir.join("postgres.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|source| Error::Io {
                action: "opening",
                path: log_path.clone(),
                source,
            })?;
        let log_err = log.try_clone().map_err(|source| Error::Io {
            action: "opening",
            path: log_path.clone(),
            source,
        })?;
        if let Some(user) = &run_as {
            chown(&log_path, user)?;
        }

        let mut cmd = std::process::Command::new(bin_dir.join("postgres"));
        cmd.arg("-D")
            .arg(&data_dir)
            .arg("-k")
            .arg(&socket_dir)
            .arg("-p")
            .arg(PORT.to_string())
            .args(["-c", "listen_addresses="])
            .args(["-c", "unix_socket_permissions=0700"])
            .args([
                "-c",
                &format!("max_connections={}", options.max_connections),
            ])
            .args([
                "-c",
                &format!("fsync={}", if options.fsync { "on" } else { "off" }),
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: a Ctrl-C in the terminal must reach coderd only, which then
            // shuts PostgreSQL down in order.
            .process_group(0);
        if let Some(user) = &run_as {
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        let started = Instant::now();
        let mut child = tokio::process::Command::from(cmd)
            .kill_on_drop(false)
            .spawn()
            .map_err(|source| Error::Io {
                action: "starting postgres in",
                path: data_dir.clone(),
                source,
            })?;
        let raw_pid = child.id().map(|p| p as i32).unwrap_or_default();
        let pg = Self {
            root_dir,
            data_dir,
            socket_dir,
            pid: Pid::from_raw(raw_pid),
            started_here: true,
        };
        pg.wait_ready(Some(&mut child)).await?;
        // The child is reaped by the kernel's init once we exit; keep no handle so that dropping
        // `EmbeddedPostgres` never kills the database under a still-running shutdown.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            data_dir = %pg.data_dir.display(),
            "embedded PostgreSQL ready"
        );
        Ok(pg)
    }

    /// Options to connect as the cluster's superuser to `database`.
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .socket(&self.socket_dir)
            .port(PORT)
            .username(SUPERUSER)
            .database(database)
    }

    /// A `postgres://` URL for the same connection, for tools such as psql.
    pub fn url(&self, database: &str) -> String {
        let host: String =
            url::form_urlencoded::byte_serialize(self.socket_dir.to_string_lossy().as_bytes())
                .collect();
        format!("postgres://{SUPERUSER}@{host}:{PORT}/{database}")
    }

    /// Creates `name` unless it exists (the cluster starts with only `postgres`).
    pub async fn ensure_database(&self, name: &str) -> Result<(), Error> {
        let mut conn = sqlx::PgConnection::connect_with(&self.connect_options("postgres")).await?;
        let exists = sqlx::query_scalar!(
            r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "exists!""#,
            name
        )
        .fetch_one(&mut conn)
        .await?;
        if !exists {
            // Identifiers cannot be bound parameters; quote it.
            let quoted = format!("\"{}\"", name.replace('"', "\"\""));
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {quoted}")))
                .execute(&mut conn)
                .await?;
        }
        Ok(conn.close().await?)
    }

    pub fn root_dir(&self) -> &Path {
        &self.root_dir
    }

    pub fn started_here(&self) -> bool {
        self.started_here
    }

    /// Fast shutdown: disconnects clients, checkpoints, exits. Falls back to an immediate
    /// shutdown when the fast one takes too long.
    pub async fn stop(self) -> Result<(), Error> {
        if kill(self.pid, Signal::SIGINT).is_err() {
            return Ok(());
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while process_alive(self.pid) {
            if Instant::now() > deadline {
                tracing::warn!("embedded PostgreSQL did not stop in time; forcing it");
                let _ = kill(self.pid, Signal::SIGQUIT);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::info!("embedded PostgreSQL stopped");
        Ok(())
    }

    async fn wait_ready(&self, mut child: Option<&mut tokio::process::Child>) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let options = self.connect_options("postgres").disable_statement_logging();
        loop {
            if let Ok(conn) = sqlx::PgConnection::connect_with(&options).await {
                let _ = conn.close().await;
                return Ok(());
            }
            if let Some(child) = child.as_deref_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(Error::Exited(status.to_string(), self.log_tail()));
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady(READY_TIMEOUT, self.log_tail()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.root_dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// The directory holding `initdb` and `postgres`: `pg_config --bindir`, then the newest
/// `/usr/lib/postgresql/<version>/bin`, then PATH.
pub fn find_bin_dir() -> Option<PathBuf> {
    let has_server = |dir: &Path| has_server_binaries(dir);
    if let Ok(out) = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| has_server(dir)))
}

fn has_server_binaries(dir: &Path) -> bool {
    dir.join("postgres").is_file() && dir.join("initdb").is_file()
}

fn run_as() -> Result<Option<RunAs>, Error> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    let user = User::from_name("postgres")?.ok_or(Error::NoUnprivilegedUser)?;
    Ok(Some(RunAs {
        name: user.name,
        uid: user.uid,
        gid: user.gid,
    }))
}

/// The configured directory if the cluster's user can reach it; otherwise (root whose home the
/// `postgres` user cannot enter) a directory under /var/lib keyed by the configured path, so that
/// servers with different config directories still get different clusters.
fn choose_root_dir(configured: &Path, run_as: Option<&RunAs>) -> Result<PathBuf, Error> {
    let Some(user) = run_as else {
        return Ok(configured.to_path_buf());
    };
    if ancestors_traversable(configured, user) {
        return Ok(configured.to_path_buf());
    }
    let absolute = std::path::absolute(configured).unwrap_or_else(|_| configured.to_path_buf());
    let digest = Sha256::digest(absolute.as_os_str().as_encoded_bytes());
    Ok(PathBuf::from("/var/lib/coder/embedded-postgres").join(&hex::encode(digest)[..16]))
}

/// Whether `user` may walk from `/` down to `dir` (every existing ancestor searchable).
fn ancestors_traversable(dir: &Path, user: &RunAs) -> bool {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute
        .ancestors()
        .skip(1)
        .filter_map(|p| std::fs::metadata(p).ok())
        .all(|meta| {
            let mode = meta.mode();
            if meta.uid() == user.uid.as_raw() {
                mode & 0o100 != 0
            } else if meta.gid() == user.gid.as_raw() {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            }
        })
}

/// The socket directory: inside the cluster directory unless that makes the socket path too long
/// for the kernel, then a short directory under /tmp derived from it.
fn socket_dir_for(root_dir: &Path) -> PathBuf {
    let preferred = root_dir.join("run");
    let socket_len = preferred.join(format!(".s.PGSQL.{PORT}")).as_os_str().len();
    if socket_len <= MAX_SOCKET_PATH {
        return preferred;
    }
    let digest = Sha256::digest(root_dir.as_os_str().as_encoded_bytes());
    PathBuf::from(format!("/tmp/coder-pg-{}", &hex::encode(digest)[..12]))
}

fn create_private_dir(dir: &Path, run_as: Option<&RunAs>) -> Result<(), Error> {
    let io = |action| {
        move |source| Error::Io {
            action,
            path: dir.to_path_buf(),
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("creating"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io("restricting permissions of"))?;
    if let Some(user) = run_as {
        chown(dir, user)?;
    }
    Ok(())
}

fn chown(path: &Path, user: &RunAs) -> Result<(), Error> {
    std::os::unix::fs::chown(path, Some(user.uid.as_raw()), Some(user.gid.as_raw())).map_err(
        |source| Error::Io {
            action: "changing owner of",
            path: path.to_path_buf(),
            source,
        },
    )
}

async fn initdb(bin_dir: &Path, data_dir: &Path, run_as: Option<&RunAs>) -> Result<(), Error> {
    tracing::info!(data_dir = %data_dir.display(), "initialising embedded PostgreSQL cluster");
    let mut cmd = std::process::Command::new(bin_dir.join("initdb"));
    cmd.arg("-D")
        .arg(data_dir)
        .args([
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
        ])
        .stdin(Stdio::null());
    if let Some(user) = run_as {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        // initdb resolves the current directory; ours may be unreadable for the postgres user.
        cmd.current_dir("/");
    }
    let out = tokio::process::Command::from(cmd)
        .output()
        .await
        .map_err(|source| Error::Io {
            action: "running initdb for",
            path: data_dir.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(data_dir);
        return Err(Error::Initdb {
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(())
}

/// The postmaster already serving `data_dir`, if `postmaster.pid` names a live process.
fn running_postmaster(data_dir: &Path) -> Option<Pid> {
    let contents = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    let pid = Pid::from_raw(contents.lines().next()?.trim().parse().ok()?);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let is_postgres = String::from_utf8_lossy(&cmdline).contains("postgres");
    (is_postgres && process_alive(pid)).then_some(pid)
}

fn process_alive(pid: Pid) -> bool {
    // A zombie still accepts signal 0; it is gone for our purposes.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = state
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    !zombie && kill(pid, None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_move_the_socket_to_tmp() {
        let short = Path::new("/tmp/x");
        assert_eq!(socket_dir_for(short), short.join("run"));
        let long = PathBuf::from(format!("/tmp/{}", "d".repeat(120)));
        let dir = socket_dir_for(&long);
        assert!(dir.to_string_lossy().starts_with("/tmp/coder-pg-"));
        assert_eq!(dir, socket_dir_for(&long), "derived deterministically");
    }

    #[test]
    fn unreachable_config_dirs_get_a_stable_fallback() {
        let nobody = RunAs {
            name: "nobody".into(),
            uid: Uid::from_raw(65534),
            gid: Gid::from_raw(65534),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let configured = locked.join("postgres");
        let chosen = choose_root_dir(&configured, Some(&nobody)).expect("choose");
        assert!(chosen.starts_with("/var/lib/coder/embedded-postgres"));
        assert_eq!(
            chosen,
            choose_root_dir(&configured, Some(&nobody)).expect("again")
        );
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        if ancestors_traversable(&open, &nobody) {
            assert_eq!(
                choose_root_dir(&open.join("pg"), Some(&nobody)).expect("open"),
                open.join("pg")
            );
        }
    }
}
