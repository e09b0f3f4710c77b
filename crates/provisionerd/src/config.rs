//! What a daemon is (name, tags, the engines it runs) and how it behaves (work directory, limits,
//! shutdown grace).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codersdk::provisionerd::{PROTOCOL_VERSION, ServeParams, Tags};

use crate::engine::Engine;
use crate::error::DaemonError;
use crate::extract::ArchiveLimits;

/// How long a running job may keep going after shutdown was requested, by default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// How long an engine may take to stop after it was cancelled, by default.
pub const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct DaemonConfig {
    /// The daemon's identity towards coderd; keep it across restarts to keep the registration.
    pub name: String,
    pub tags: Tags,
    /// Engines by provisioner type; the keys are the provisioners the daemon advertises.
    pub engines: BTreeMap<String, Arc<dyn Engine>>,
    /// Each job gets a fresh directory under this one, removed when the job ends.
    pub work_root: PathBuf,
    /// How long a running job may finish after shutdown is requested before it is cancelled.
    pub shutdown_grace: Duration,
    /// How long an engine may take to stop once cancelled before its task is aborted; the job
    /// is reported failed either way.
    pub cancel_timeout: Duration,
    pub archive_limits: ArchiveLimits,
    /// The daemon's build version, shown by coderd.
    pub version: String,
}

impl std::fmt::Debug for DaemonConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonConfig")
            .field("name", &self.name)
            .field("tags", &self.tags)
            .field("engines", &self.engines.keys().collect::<Vec<_>>())
            .field("work_root", &self.work_root)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("cancel_timeout", &self.cancel_timeout)
            .field("archive_limits", &self.archive_limits)
            .field("version", &self.version)
            .finish()
    }
}

impl DaemonConfig {
    /// A daemon with no engines yet, default limits and timeouts, and work directories under
    /// the system's temporary directory.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tags: Tags::new(),
            engines: BTreeMap::new(),
            work_root: std::env::temp_dir(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            archive_limits: ArchiveLimits::default(),
            version: codersdk::version::VERSION.to_string(),
        }
    }

    pub fn with_engine(mut self, provisioner: impl Into<String>, engine: Arc<dyn Engine>) -> Self {
        self.engines.insert(provisioner.into(), engine);
        self
    }

    /// Who the daemon says it is when it connects.
    pub fn serve_params(&self) -> ServeParams {
        ServeParams {
            name: self.name.clone(),
            provisioners: self
                .engines
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(","),
            // A map of strings always serialises.
            tags: serde_json::to_string(&self.tags).unwrap_or_else(|_| "{}".into()),
            version: self.version.clone(),
            protocol_version: PROTOCOL_VERSION.to_string(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), DaemonError> {
        if self.name.trim().is_empty() {
            return Err(DaemonError::Config("the daemon needs a name".into()));
        }
        if self.engines.is_empty() {
            return Err(DaemonError::Config(
                "the daemon has no provisioner engines".into(),
            ));
        }
        if let Some(bad) = self
            .engines
            .keys()
            .find(|k| k.is_empty() || k.contains(','))
        {
            return Err(DaemonError::Config(format!(
                "invalid provisioner type {bad:?}"
            )));
        }
        if let Some(key) = self
            .tags
            .iter()
            .find(|(k, v)| k.is_empty() || k.contains('\0') || v.contains('\0'))
            .map(|(k, _)| k)
        {
            return Err(DaemonError::Config(format!("invalid tag {key:?}")));
        }
        Ok(())
    }
}

/// `<hostname>-<random suffix>`: unique per process, so call it once and keep the result for
/// the life of the process (reconnects must present the same name).
pub fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "provisionerd".into());
    let suffix: u32 = rand::random_range(0..0x10000);
    format!("{host}-{suffix:04x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::echo::EchoEngine;

    #[test]
    fn serve_params_describe_the_daemon() {
        let mut config = DaemonConfig::new("d1")
            .with_engine("terraform", Arc::new(EchoEngine))
            .with_engine("echo", Arc::new(EchoEngine));
        config.tags.insert("scope".into(), "organization".into());
        let params = config.serve_params();
        assert_eq!(params.provisioners, "echo,terraform");
        assert_eq!(params.tags, r#"{"scope":"organization"}"#);
        assert_eq!(params.protocol_version, PROTOCOL_VERSION);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn validation_names_the_problem() {
        let err = DaemonConfig::new("d1").validate();
        assert!(matches!(err, Err(DaemonError::Config(m)) if m.contains("no provisioner")));
        let err = DaemonConfig::new(" ")
            .with_engine("echo", Arc::new(EchoEngine))
            .validate();
        assert!(matches!(err, Err(DaemonError::Config(m)) if m.contains("name")));
    }

    #[test]
    fn default_names_differ_per_call() {
        let a = default_name();
        assert!(a.contains('-'), "{a}");
        assert!((0..8).any(|_| default_name() != a));
    }
}
