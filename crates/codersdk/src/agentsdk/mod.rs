//! The workspace agent protocol: what `coder agent` and coderd say to each other.
//!
//! An agent keeps **one** connection to coderd: a WebSocket to [`RPC_PATH`], authenticated with
//! its token (`Coder-Session-Token`), carrying a yamux session. Every yamux stream starts with a
//! [`StreamHeader`] frame that says what the stream is:
//! * streams the agent opens carry one API call each ([`StreamHeader::Rpc`]): the request in the
//!   header, then one [`Response`] frame back;
//! * streams coderd opens carry client connections into the workspace (SSH, TCP forwarding),
//!   so they reuse the same authenticated connection.
//!
//! Frames are a 4-byte big-endian length and that many bytes of JSON, at most [`MAX_FRAME`].

mod client;
mod pipe;
mod transport;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use client::{AgentConnection, drive, yamux_config};
pub use pipe::pipe;
pub use transport::{WsIo, exchange, read_frame, reply, write_frame};

/// The agent's connection endpoint.
pub const RPC_PATH: &str = "/api/v2/workspaceagents/me/rpc";
/// Version of this protocol; majors must match.
pub const API_VERSION: &str = "1.0";
/// Largest frame either side accepts.
pub const MAX_FRAME: usize = 4 << 20;
/// Largest metadata value kept; longer values are cut and flagged.
pub const MAX_METADATA_VALUE: usize = 2048;
/// Agent logs kept per agent; later lines are dropped and the agent flagged.
pub const MAX_AGENT_LOGS_BYTES: i32 = 1 << 20;

/// The first frame of every yamux stream.
///
/// Streams coderd opens (every variant but [`StreamHeader::Rpc`]) are answered by the agent with
/// one [`StreamOpen`] frame before any payload byte, so a client learns at once why a stream
/// cannot open (nothing listening, no such PTY command) instead of seeing it close.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamHeader {
    /// An API call from the agent.
    Rpc(Request),
    /// coderd forwards a client's TCP connection to `port` on the agent's loopback. Payload:
    /// raw bytes both ways.
    Tcp { port: u16 },
    /// coderd forwards a client's UDP "connection" to `port` on the agent's loopback. Payload:
    /// datagrams both ways, each a 2-byte big-endian length and that many bytes. The agent
    /// gives each stream a socket of its own and ends a stream that carried no datagram
    /// either way for 2 minutes.
    Udp { port: u16 },
    /// coderd forwards a client's SSH connection to the agent's SSH server. Payload: the SSH
    /// protocol, raw. The server accepts any SSH authentication (coderd authorised the
    /// stream); its ed25519 host key is derived from the workspace id and agent name, so it
    /// stays the same across agent restarts and rebuilds.
    Ssh,
    /// A reconnecting PTY (the web terminal): attach to the PTY `id`, creating it (running
    /// `command`, or the user's login shell when empty) if the agent has none by that id.
    /// Payload: agent → coderd raw terminal output (first the PTY's buffered output, at most
    /// the last 64 KiB, then live); coderd → agent frames (see [`write_frame`]) of
    /// [`PtyInput`]. The agent ends the stream when the PTY's command exits; a PTY without
    /// attachments lives on for 5 minutes.
    Pty {
        id: Uuid,
        width: u16,
        height: u16,
        #[serde(default)]
        command: String,
    },
    /// The TCP ports listening inside the workspace: the agent answers one
    /// [`ListeningPorts`] frame after its [`StreamOpen`] and closes the stream. The agent's
    /// own sockets and ports below 9 are left out; hiding common non-HTTP ports is coderd's.
    ListeningPorts,
    /// Round-trip probe: the agent echoes every byte it reads.
    Ping,
}

/// The agent's first frame on a stream coderd opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StreamOpen {
    Ok,
    /// The stream is closed after this frame; `reason` is shown to the client as is (for
    /// example "nothing is listening on port 8080 in the workspace").
    Refused {
        reason: String,
    },
}

/// One client message to a reconnecting PTY, as Coder's web terminal sends it
/// (`ReconnectingPTYRequest`): input bytes, a resize, or both. A zero size means "unchanged".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PtyInput {
    pub data: String,
    pub height: u16,
    pub width: u16,
}

/// A TCP port listening inside the workspace (Coder's `WorkspaceAgentListeningPort`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListeningPort {
    pub process_name: String,
    /// Always `tcp` for now.
    pub network: String,
    pub port: u16,
}

/// The answer to [`StreamHeader::ListeningPorts`] (Coder's
/// `WorkspaceAgentListeningPortsResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ListeningPorts {
    pub ports: Vec<ListeningPort>,
}

/// API calls, agent → coderd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Request {
    GetManifest,
    /// Lifecycle transitions in the order they happened (a reconnecting agent sends what it
    /// could not report before).
    UpdateLifecycle {
        changes: Vec<LifecycleChange>,
    },
    UpdateStartup(StartupInfo),
    BatchCreateLogs(LogBatch),
    BatchUpdateMetadata {
        values: Vec<MetadataValue>,
    },
    UpdateStats(Stats),
    /// Script runs that ended, for the build's timeline (Coder's `ScriptCompleted`, batched).
    ScriptsCompleted {
        timings: Vec<ScriptTiming>,
    },
    /// Apps whose health changed (`initializing`, `healthy` or `unhealthy`).
    BatchUpdateAppHealths {
        updates: Vec<AppHealthUpdate>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppHealthUpdate {
    pub id: Uuid,
    pub health: String,
}

/// One run of a script, as the build's timeline shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptTiming {
    pub script_id: Uuid,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// The script's exit status; -1 when it was killed or never started.
    pub exit_code: i32,
    pub stage: ScriptStage,
    pub status: ScriptStatus,
}

/// Why a script ran (Coder's `WorkspaceAgentScriptTimingStage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptStage {
    Start,
    Stop,
    Cron,
}

impl ScriptStage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Cron => "cron",
        }
    }
}

/// How a script run ended (Coder's `WorkspaceAgentScriptTimingStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptStatus {
    Ok,
    ExitFailure,
    TimedOut,
    PipesLeftOpen,
}

impl ScriptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ExitFailure => "exit_failure",
            Self::TimedOut => "timed_out",
            Self::PipesLeftOpen => "pipes_left_open",
        }
    }
}

/// Replies, coderd → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Manifest(Box<Manifest>),
    Ok,
    Logs {
        /// Logs beyond the per-agent cap are dropped; stop sending them.
        limit_exceeded: bool,
    },
    Stats {
        /// When to send the next stats report.
        report_interval_seconds: u64,
    },
    Error {
        message: String,
    },
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleState {
    #[default]
    Created,
    Starting,
    StartTimeout,
    StartError,
    Ready,
    ShuttingDown,
    ShutdownTimeout,
    ShutdownError,
    Off,
}

impl LifecycleState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Starting => "starting",
            Self::StartTimeout => "start_timeout",
            Self::StartError => "start_error",
            Self::Ready => "ready",
            Self::ShuttingDown => "shutting_down",
            Self::ShutdownTimeout => "shutdown_timeout",
            Self::ShutdownError => "shutdown_error",
            Self::Off => "off",
        }
    }

    /// Position in the lifecycle: states only move forward.
    pub fn rank(self) -> u8 {
        match self {
            Self::Created => 0,
            Self::Starting => 1,
            Self::StartTimeout | Self::StartError | Self::Ready => 2,
            Self::ShuttingDown => 3,
            Self::ShutdownTimeout | Self::ShutdownError | Self::Off => 4,
        }
    }
}

impl std::str::FromStr for LifecycleState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "created" => Self::Created,
            "starting" => Self::Starting,
            "start_timeout" => Self::StartTimeout,
            "start_error" => Self::StartError,
            "ready" => Self::Ready,
            "shutting_down" => Self::ShuttingDown,
            "shutdown_timeout" => Self::ShutdownTimeout,
            "shutdown_error" => Self::ShutdownError,
            "off" => Self::Off,
            other => return Err(format!("unknown lifecycle state {other:?}")),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleChange {
    pub state: LifecycleState,
    pub changed_at: DateTime<Utc>,
}

/// What the agent tells coderd about itself once connected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartupInfo {
    pub version: String,
    pub expanded_directory: String,
    pub operating_system: String,
    pub architecture: String,
    pub subsystems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBatch {
    pub log_source_id: Uuid,
    pub logs: Vec<AgentLog>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLog {
    pub created_at: DateTime<Utc>,
    /// `info` for stdout, `error` for stderr, or any of trace/debug/info/warn/error.
    pub level: String,
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataValue {
    pub key: String,
    pub collected_at: DateTime<Utc>,
    /// Seconds the collection took.
    #[serde(default)]
    pub age: i64,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub error: String,
}

/// What the agent observed since its last report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    pub connections_by_proto: BTreeMap<String, i64>,
    pub connection_count: i64,
    pub rx_bytes: i64,
    pub tx_bytes: i64,
    pub session_count_ssh: i64,
    pub session_count_vscode: i64,
    pub session_count_jetbrains: i64,
    pub session_count_reconnecting_pty: i64,
}

impl Stats {
    pub fn sessions(&self) -> i64 {
        self.session_count_ssh
            + self.session_count_vscode
            + self.session_count_jetbrains
            + self.session_count_reconnecting_pty
    }
}

/// Everything an agent needs to set up its workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    pub agent_id: Uuid,
    pub agent_name: String,
    pub owner_name: String,
    pub workspace_id: Uuid,
    pub workspace_name: String,
    pub template_name: String,
    pub environment_variables: BTreeMap<String, String>,
    pub directory: String,
    pub motd_file: String,
    pub scripts: Vec<ManifestScript>,
    pub metadata: Vec<MetadataDescription>,
    pub apps: Vec<crate::workspaces::WorkspaceApp>,
    pub access_url: String,
    /// Dev containers the template declares for this agent (`coder_devcontainer`).
    pub devcontainers: Vec<ManifestDevcontainer>,
}

/// A dev container the agent should start, with the log source its messages go to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManifestDevcontainer {
    pub id: Uuid,
    pub log_source_id: Uuid,
    pub name: String,
    pub workspace_folder: String,
    /// Path of `devcontainer.json`; empty for the default location.
    pub config_path: String,
    /// The sub-agent recorded for the container, which the agent would start inside it.
    pub subagent_id: Option<Uuid>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManifestScript {
    pub id: Uuid,
    pub log_source_id: Uuid,
    pub display_name: String,
    pub script: String,
    pub cron: String,
    pub run_on_start: bool,
    pub run_on_stop: bool,
    pub start_blocks_login: bool,
    /// 0 means no timeout.
    pub timeout_seconds: i64,
    /// Where the agent writes the script's output (relative paths are under its log directory).
    pub log_path: String,
    /// Terraform address of the `coder_script`; empty for an agent's legacy startup and
    /// shutdown scripts.
    pub resource_address: String,
    /// Scripts of the same phase, by `resource_address`, this one waits for.
    pub dependencies: Vec<crate::proto::ScriptDependency>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetadataDescription {
    pub key: String,
    pub display_name: String,
    pub script: String,
    pub interval_seconds: i64,
    pub timeout_seconds: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_ranks_only_move_forward() {
        let order = [
            LifecycleState::Created,
            LifecycleState::Starting,
            LifecycleState::Ready,
            LifecycleState::ShuttingDown,
            LifecycleState::Off,
        ];
        assert!(order.windows(2).all(|w| w[0].rank() < w[1].rank()));
        for s in order {
            assert_eq!(s.as_str().parse::<LifecycleState>(), Ok(s));
        }
    }

    #[test]
    fn headers_round_trip() {
        let h = StreamHeader::Rpc(Request::UpdateLifecycle {
            changes: vec![LifecycleChange {
                state: LifecycleState::Ready,
                changed_at: DateTime::<Utc>::UNIX_EPOCH,
            }],
        });
        let json = serde_json::to_string(&h).expect("serialize");
        assert_eq!(
            serde_json::from_str::<StreamHeader>(&json).expect("parse"),
            h
        );
    }
}
