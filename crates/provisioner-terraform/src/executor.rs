//! The daemon's terraform: its settings (which binary, which provider executable, where to
//! cache), the files they imply (a filesystem mirror holding our `coder/coder` provider, a
//! shared plugin cache, the CLI config pointing at both), and running a job with them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use codersdk::provisionerd::{AcquiredJob, JobFailure, JobResult, LogLevel};
use tokio_util::sync::CancellationToken;

use crate::command::{Command, Output, Runner};
use crate::environment::DaemonEnv;
use crate::error::{Error, SetupError};
use crate::version::{self, MINIMUM_VERSION, Version};

/// How long terraform may take to stop after it was interrupted, by default.
pub const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(15);

/// Where the executor writes a job's output (the provisioner daemon's log buffer).
pub trait JobLogs: Send + Sync {
    fn log(&self, level: LogLevel, stage: &str, output: &str);

    /// Called once, just before a build starts changing infrastructure (`terraform apply`).
    /// Until then a stopped job changed nothing and another daemon can run it from the start;
    /// after, only this run's state knows what exists.
    fn applying(&self) {}
}

/// How a daemon runs terraform.
#[derive(Clone)]
pub struct Settings {
    /// The terraform binary: a path, or a name looked up in the `PATH` of `base_env`.
    pub terraform: PathBuf,
    /// The executable that serves the `coder/coder` provider (the `coder` binary, which
    /// recognises being started by terraform as a plugin).
    pub provider: PathBuf,
    /// Holds the provider mirror, the plugin cache and the CLI config, under `terraform/`.
    pub cache_dir: PathBuf,
    /// The environment terraform starts from (the daemon's own; `CODER_*` variables are
    /// dropped from it).
    pub base_env: Vec<(OsString, OsString)>,
    /// How long terraform may take to stop after it was interrupted before it is killed.
    pub interrupt_grace: Duration,
}

impl std::fmt::Debug for Settings {
    // The environment holds whatever credentials the daemon was given.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("terraform", &self.terraform)
            .field("provider", &self.provider)
            .field("cache_dir", &self.cache_dir)
            .field(
                "base_env",
                &format_args!("{} variables", self.base_env.len()),
            )
            .field("interrupt_grace", &self.interrupt_grace)
            .finish()
    }
}

impl Settings {
    /// `terraform` from `PATH`, the default grace, and this process's environment as the base
    /// (read once, here).
    pub fn new(provider: impl Into<PathBuf>, cache_dir: impl Into<PathBuf>) -> Self {
        Self {
            terraform: PathBuf::from("terraform"),
            provider: provider.into(),
            cache_dir: cache_dir.into(),
            base_env: std::env::vars_os().collect(),
            interrupt_grace: DEFAULT_INTERRUPT_GRACE,
        }
    }
}

/// A daemon's terraform, ready to run jobs (one instance may run several at once).
#[derive(Debug)]
pub struct Terraform {
    terraform: PathBuf,
    /// `<cache_dir>/terraform`: where the startup check runs terraform.
    root: PathBuf,
    env: DaemonEnv,
    interrupt_grace: Duration,
    /// The last binary `terraform version` accepted, so later jobs need not ask again.
    checked: Mutex<Option<Checked>>,
    /// Terraform's checksum of our `coder/coder` package in the mirror, which every job's lock
    /// file pins (see [`crate::lockfile`]).
    coder_provider_hash: String,
}

/// A terraform binary found recent enough, and how its file looked then: a binary replaced
/// in place (an upgrade) has another size, modification time or inode, and is asked again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Checked {
    binary: PathBuf,
    stamp: FileStamp,
    version: Version,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

impl Terraform {
    /// Installs the provider into the mirror under `settings.cache_dir` and writes the CLI
    /// config. Daemons may share a cache directory: both files are replaced atomically.
    pub fn new(settings: Settings) -> Result<Self, SetupError> {
        let root = settings.cache_dir.join("terraform");
        let mirror = root.join("mirror");
        let plugins = root.join("plugins");
        let cli_config = root.join("cli.tfrc");
        let setup = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SetupError { path, source }
        };
        std::fs::create_dir_all(&plugins).map_err(setup(&plugins))?;
        let entry = terraform_provider_coder::install_into_mirror(&mirror, &settings.provider)
            .map_err(setup(&mirror))?;
        let package = entry.parent().unwrap_or(&mirror);
        let coder_provider_hash = crate::lockfile::package_hash(package).map_err(setup(package))?;
        let config = terraform_provider_coder::cli_config(&mirror, Some(&plugins));
        let staging = root.join(format!(".cli.tfrc.{}", std::process::id()));
        std::fs::write(&staging, config).map_err(setup(&staging))?;
        std::fs::rename(&staging, &cli_config).map_err(setup(&cli_config))?;
        Ok(Self {
            terraform: settings.terraform,
            root,
            env: DaemonEnv::new(&settings.base_env, &cli_config, &plugins),
            interrupt_grace: settings.interrupt_grace,
            checked: Mutex::new(None),
            coder_provider_hash,
        })
    }

    /// The terraform binary as configured (a path, or a name looked up in `PATH`).
    pub fn binary(&self) -> &Path {
        &self.terraform
    }

    /// Finds terraform and checks that it is recent enough, as every job does first: for a
    /// daemon to say at startup that its terraform is unusable.
    pub async fn check(&self) -> Result<(PathBuf, Version), Error> {
        let logs = Discard;
        let cancel = CancellationToken::new();
        let mut runner = self.runner(&self.root, &logs, &cancel);
        self.checked_version(&mut runner, "Checking terraform")
            .await
    }

    /// Runs a job whose template is extracted in `workdir`.
    pub async fn run(
        &self,
        job: &AcquiredJob,
        workdir: &Path,
        logs: &dyn JobLogs,
        cancel: &CancellationToken,
    ) -> Result<JobResult, JobFailure> {
        crate::job::run(self, job, workdir, logs, cancel).await
    }

    pub(crate) fn daemon_env(&self) -> &DaemonEnv {
        &self.env
    }

    pub(crate) fn coder_provider_hash(&self) -> &str {
        &self.coder_provider_hash
    }

    /// A runner for a job's commands; [`Self::checked_version`] points it at the terraform
    /// binary it found.
    pub(crate) fn runner<'a>(
        &'a self,
        workdir: &'a Path,
        logs: &'a dyn JobLogs,
        cancel: &'a CancellationToken,
    ) -> Runner<'a> {
        Runner {
            binary: self.terraform.clone(),
            workdir,
            logs,
            cancel,
            grace: self.interrupt_grace,
            timings: Vec::new(),
        }
    }

    /// The terraform binary, found in `PATH` when given by name.
    fn resolve(&self) -> Result<PathBuf, Error> {
        version::resolve(&self.terraform, self.env.path()).ok_or_else(|| {
            let searched = if self.terraform.components().count() > 1 {
                format!("{} is not an executable file", self.terraform.display())
            } else {
                let path = self
                    .env
                    .path()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("no {:?} in PATH ({path})", self.terraform)
            };
            Error::NotFound { searched }
        })
    }

    /// `terraform version -json`, refusing versions older than [`MINIMUM_VERSION`]; asked
    /// once per binary (a terraform process costs 50–100 ms of every job otherwise).
    pub(crate) async fn checked_version(
        &self,
        runner: &mut Runner<'_>,
        log_stage: &str,
    ) -> Result<(PathBuf, Version), Error> {
        let binary = self.resolve()?;
        runner.binary = binary.clone();
        let stamp = FileStamp::of(&binary);
        if let Some(stamp) = &stamp {
            let cached = self
                .checked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(checked) = cached
                && checked.binary == binary
                && checked.stamp == *stamp
            {
                return Ok((binary, checked.version));
            }
        }
        let command = Command {
            args: vec!["version".into(), "-json".into()],
            shown: "terraform version -json".into(),
            log_stage,
            timing_stage: "init",
            output: Output::Capture,
        };
        let env = self.env.for_version();
        let stdout = runner.run(&command, &env).await?;
        let found = version::parse_version_output(&String::from_utf8_lossy(&stdout)).map_err(
            |message| Error::Version {
                binary: binary.clone(),
                message,
            },
        )?;
        if found < MINIMUM_VERSION {
            return Err(Error::TooOld { binary, found });
        }
        if let Some(stamp) = stamp {
            *self.checked.lock().unwrap_or_else(PoisonError::into_inner) = Some(Checked {
                binary: binary.clone(),
                stamp,
                version: found,
            });
        }
        Ok((binary, found))
    }
}

/// Logs nobody reads (the startup check).
struct Discard;

impl JobLogs for Discard {
    fn log(&self, _level: LogLevel, _stage: &str, _output: &str) {}
}
