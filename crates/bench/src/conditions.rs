//! The conditions a run was measured under: machine, PostgreSQL and its durability, build,
//! commit and date. Absolute figures mean little without them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Conditions {
    pub date: String,
    pub commit: String,
    pub profile: String,
    /// `release` or `debug` (of the bench; the `coder` binary is reported by path).
    pub build: String,
    pub coder_bin: String,
    pub cpu: String,
    pub cores: usize,
    pub ram_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the run started: the machine is shared.
    pub load_at_start: String,
    pub postgres: String,
    /// fsync, synchronous_commit, wal_sync_method, shared_buffers.
    pub durability: String,
    pub node: String,
    pub daemons: usize,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Conditions {
    /// What can be known before anything starts.
    pub fn of_machine(profile: &str, coder_bin: &std::path::Path, daemons: usize) -> Self {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let ram_kib: f64 = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let node = std::process::Command::new("node")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "absent".into());
        Self {
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
            commit,
            profile: profile.into(),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .into(),
            coder_bin: coder_bin.display().to_string(),
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            ram_gib: (ram_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            kernel: read("/proc/sys/kernel/osrelease").trim().into(),
            load_at_start: read("/proc/loadavg")
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .into(),
            postgres: String::new(),
            durability: String::new(),
            node,
            daemons,
        }
    }

    /// Adds the database's version and durability settings.
    pub async fn with_database(&mut self, pool: &sqlx::PgPool) -> anyhow::Result<()> {
        self.postgres = sqlx::query_scalar("SELECT version()")
            .fetch_one(pool)
            .await?;
        let settings: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, setting || coalesce(unit, '') FROM pg_settings
             WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers',
                            'full_page_writes')
             ORDER BY name",
        )
        .fetch_all(pool)
        .await?;
        self.durability = settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(())
    }

    pub fn summary(&self) -> String {
        format!(
            "coder-bench {} ({} build) at {} on commit {}\nmachine: {} cores ({}), {} GiB RAM, \
             Linux {}, load {} at start\nPostgreSQL: {}\ndurability: {}\nnode: {}; {} external \
             echo daemons; coder: {}",
            self.profile,
            self.build,
            self.date,
            self.commit,
            self.cores,
            self.cpu,
            self.ram_gib,
            self.kernel,
            self.load_at_start,
            self.postgres,
            self.durability,
            self.node,
            self.daemons,
            self.coder_bin
        )
    }

    pub fn markdown(&self) -> String {
        format!(
            "Measured {} (profile `{}`, {} build, commit `{}`) on {} cores ({}), {} GiB RAM, \
             Linux {}, 1-minute load {} at start; {}; {}; node {}; {} external echo daemons.",
            self.date,
            self.profile,
            self.build,
            self.commit,
            self.cores,
            self.cpu,
            self.ram_gib,
            self.kernel,
            self.load_at_start,
            self.postgres.split(" on ").next().unwrap_or(&self.postgres),
            self.durability,
            self.node,
            self.daemons
        )
    }
}
