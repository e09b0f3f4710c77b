//! What to run and how big: the full suite, `--quick`, and the tiny profile the CI test uses.

use std::path::PathBuf;
use std::time::Duration;

/// How much of each scenario to do. Every loop in the suite is bounded by these counts and
/// durations.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Measured runs per scenario (after one warm-up run where the scenario has one).
    pub runs: usize,
    pub warmup: bool,
    /// External `coder provisionerd` processes.
    pub daemons: usize,
    /// P1: jobs created per run, at this steady rate.
    pub pickup_jobs: usize,
    pub pickup_rate: f64,
    /// P2/P3: closed-loop window per run and the workspaces cycling start/stop.
    pub build_window: Duration,
    pub build_workspaces: usize,
    /// P3: pending jobs no daemon matches.
    pub poison_jobs: usize,
    /// P2b (and both baselines): queued jobs drained per run.
    pub bare_jobs: usize,
    /// P4: workspaces present, request rate and duration per run.
    pub api_workspaces: usize,
    pub api_rate: f64,
    pub api_duration: Duration,
    /// P4b: the rates the read mix is stepped through (until one's p95 passes 30 ms), and how
    /// long each step lasts.
    pub capacity_rates: Vec<f64>,
    pub capacity_window: Duration,
    /// P5: workspaces present when listing all of them.
    pub list_workspaces: usize,
    /// P12: people with 90 days of usage the insights report on, and requests timed per route.
    pub insights_users: usize,
    pub insights_requests: usize,
    /// `coder server` restarts on an existing embedded cluster.
    pub startup_runs: usize,
    /// P7: sequential start/stop terraform builds measured (after the first build).
    pub terraform_builds: usize,
    /// P8: simulated agents, and their steady-state window.
    pub agents: usize,
    pub agent_window: Duration,
    /// P8b: the large fleet, same cadence and window.
    pub large_fleet: usize,
    /// P11: measured `coder create --wait` runs (after a warm-up).
    pub creates: usize,
    /// Issue 11: sequential template imports of archives of this size.
    pub upload_imports: usize,
    pub upload_bytes: usize,
    /// Issue 12 (P9, P10): bytes per bulk transfer through the relay and its baselines,
    /// timed connections and keystrokes per path, and idle streams held for coderd's memory.
    pub relay_bytes: u64,
    pub relay_connects: usize,
    pub relay_keystrokes: usize,
    pub relay_streams: usize,
    /// Issue 13 (the app proxy): bytes of the large download through the proxy and directly,
    /// sequential small GETs per path and run, and keep-alive connections and window for
    /// requests/s.
    pub app_bytes: u64,
    pub app_requests: usize,
    pub app_connections: usize,
    pub app_window: Duration,
    /// Time limit for any single wait (a job to finish, a process to answer).
    pub timeout: Duration,
}

impl Sizes {
    /// The suite the goals are judged by (~6–8 minutes on the reference machine).
    pub fn full() -> Self {
        Self {
            runs: 3,
            warmup: true,
            daemons: 8,
            pickup_jobs: 150,
            pickup_rate: 25.0,
            build_window: Duration::from_secs(20),
            build_workspaces: 64,
            poison_jobs: 50_000,
            bare_jobs: 3_000,
            api_workspaces: 2_000,
            api_rate: 350.0,
            api_duration: Duration::from_secs(15),
            capacity_rates: vec![350.0, 500.0, 700.0, 1000.0, 1400.0, 2000.0, 2800.0],
            capacity_window: Duration::from_secs(8),
            list_workspaces: 10_000,
            insights_users: 1_000,
            insights_requests: 40,
            startup_runs: 5,
            terraform_builds: 20,
            agents: 2_000,
            agent_window: Duration::from_secs(60),
            large_fleet: 10_000,
            creates: 5,
            upload_imports: 100,
            upload_bytes: 9 << 20,
            relay_bytes: 1 << 30,
            relay_connects: 20,
            relay_keystrokes: 500,
            relay_streams: 1_000,
            app_bytes: 1 << 30,
            app_requests: 5_000,
            app_connections: 16,
            app_window: Duration::from_secs(5),
            timeout: Duration::from_secs(60),
        }
    }

    /// Same scenarios and scales where they define the goal (8 daemons, 50,000 poisoned jobs,
    /// 350 req/s, 10,000 workspaces), shorter windows and fewer runs; P8 with 200 agents and
    /// P8b with 1,000 (the ramp-up and window of 2,000 and 10,000 do not fit); the relay's transfers and the app proxy's download
    /// of 256 MiB, not 1 GiB.
    pub fn quick() -> Self {
        Self {
            runs: 2,
            pickup_jobs: 50,
            build_window: Duration::from_secs(4),
            bare_jobs: 400,
            api_duration: Duration::from_secs(3),
            capacity_window: Duration::from_secs(3),
            startup_runs: 2,
            terraform_builds: 4,
            agents: 200,
            agent_window: Duration::from_secs(8),
            large_fleet: 1_000,
            creates: 2,
            upload_imports: 30,
            relay_bytes: 256 << 20,
            relay_connects: 10,
            relay_keystrokes: 200,
            app_bytes: 256 << 20,
            app_requests: 2_000,
            app_window: Duration::from_secs(2),
            ..Self::full()
        }
    }

    /// A few seconds of everything: proves the suite runs and its figures are sane, nothing
    /// about speed.
    pub fn tiny() -> Self {
        Self {
            runs: 1,
            warmup: false,
            daemons: 2,
            pickup_jobs: 8,
            pickup_rate: 10.0,
            build_window: Duration::from_secs(1),
            build_workspaces: 4,
            poison_jobs: 500,
            bare_jobs: 40,
            api_workspaces: 30,
            api_rate: 50.0,
            api_duration: Duration::from_secs(1),
            capacity_rates: vec![50.0, 100.0],
            capacity_window: Duration::from_secs(1),
            list_workspaces: 60,
            insights_users: 20,
            insights_requests: 5,
            startup_runs: 1,
            terraform_builds: 2,
            agents: 20,
            agent_window: Duration::from_secs(3),
            large_fleet: 40,
            creates: 1,
            upload_imports: 3,
            upload_bytes: 1 << 20,
            relay_bytes: 4 << 20,
            relay_connects: 2,
            relay_keystrokes: 20,
            relay_streams: 20,
            app_bytes: 4 << 20,
            app_requests: 50,
            app_connections: 4,
            app_window: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
        }
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub sizes: Sizes,
    /// Name of the profile, recorded with the results (`full`, `quick`, `tiny`).
    pub profile: String,
    /// The `coder` binary to benchmark.
    pub coder_bin: PathBuf,
    /// Where clusters, configs and logs go; a temporary directory when unset.
    pub work_dir: Option<PathBuf>,
    /// Run graphile-worker (needs `node` and `npm`); when false its rows say why not.
    pub graphile: bool,
    /// graphile-worker version to install from npm.
    pub graphile_version: String,
}

impl Config {
    pub fn new(profile: &str, sizes: Sizes, coder_bin: PathBuf) -> Self {
        Self {
            sizes,
            profile: profile.into(),
            coder_bin,
            work_dir: None,
            graphile: true,
            graphile_version: "0.17.3".into(),
        }
    }
}
