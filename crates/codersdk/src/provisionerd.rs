//! The provisioner daemon protocol: what a daemon and coderd say to each other over the daemon's
//! one connection (a WebSocket to `/api/v2/organizations/{org}/provisionerdaemons/serve` with
//! JSON text frames, or an in-memory channel for daemons built into `coder server`).
//!
//! The conversation:
//! 1. coderd accepts the connection and sends [`ServerMessage::Welcome`] with the daemon's
//!    stable id (registration is an upsert on organization, name and owner).
//! 2. An idle daemon sends [`DaemonMessage::Ready`]; coderd pushes [`ServerMessage::Job`] as
//!    soon as a matching job exists. A daemon holds one job at a time.
//! 3. While running, the daemon sends [`DaemonMessage::Update`] with new logs at least every
//!    [`HEARTBEAT_INTERVAL`] (the update is the job's heartbeat); coderd may push
//!    [`ServerMessage::Cancel`] at any time.
//! 4. The daemon ends the job with [`DaemonMessage::Complete`] or [`DaemonMessage::Fail`] — or,
//!    stopping before the job changed anything, hands it back with [`DaemonMessage::Release`]
//!    (1.1) — and keeps resending it (after reconnects too) until coderd answers
//!    [`ServerMessage::Finished`] — sent only once the result is committed.
//! 5. (1.2) A daemon that will be idle after its result says so in it (`ready`): coderd then
//!    claims the next job in the transaction that records the result and sends it right after
//!    `Finished`, so the daemon sends no `Ready` and waits no second round trip. When coderd
//!    answers `JobGone` instead, the daemon says `Ready` as before.
//! 6. (1.3) A stopping daemon that said it was idle (by `Ready` or a `ready` result) withdraws
//!    that with [`DaemonMessage::Stopping`] and exits only once coderd answers
//!    [`ServerMessage::Stopped`]. coderd may have claimed a job for it already — committed, so
//!    the job reads `running` — that is still on its way; it arrives before `Stopped`, and the
//!    daemon hands it back. Without this, such a job stayed with a daemon that had exited.
//!
//! Adding optional fields is backward compatible; anything else bumps [`PROTOCOL_VERSION`].

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::proto::{ExternalAuthProviderResource, Resource, RichParameter, TemplateFeatures};

/// Major.minor; a daemon and coderd with different majors refuse each other.
pub const PROTOCOL_VERSION: &str = "1.3";
/// A running job's update (logs or not) is sent at least this often; it is the job's heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// Logs are flushed at least this often while a job runs.
pub const LOG_FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Header carrying the pre-shared key of PSK-authenticated daemons.
pub const PSK_HEADER: &str = "Coder-Provisioner-Daemon-PSK";
/// Header carrying a provisioner key.
pub const KEY_HEADER: &str = "Coder-Provisioner-Daemon-Key";

/// Query parameters of the serve endpoint: who the daemon is and what it can run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeParams {
    pub name: String,
    /// Engines this daemon runs (`echo`, `terraform`), comma separated on the wire.
    pub provisioners: String,
    /// The daemon's tags as a JSON object.
    pub tags: String,
    pub version: String,
    pub protocol_version: String,
}

/// Messages from a daemon to coderd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DaemonMessage {
    /// Idle: send me a job when there is one.
    Ready,
    /// Progress of the held job; also its heartbeat.
    Update {
        job_id: Uuid,
        #[serde(default)]
        logs: Vec<JobLog>,
    },
    /// The job's result. `logs` are its last lines, recorded with the result: a job that ends
    /// between two flushes then costs coderd one transaction, not two.
    Complete {
        job_id: Uuid,
        result: Box<JobResult>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        logs: Vec<JobLog>,
        /// (1.2) The daemon is idle once this is recorded: the result doubles as `Ready`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ready: bool,
    },
    Fail {
        job_id: Uuid,
        failure: JobFailure,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        logs: Vec<JobLog>,
        /// (1.2) As in `Complete`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ready: bool,
    },
    /// The daemon stops before the job changed anything (its shutdown grace ran out, or coderd
    /// sent the job as it was stopping): back to the queue, for another daemon to run from the
    /// start. `logs` are the lines of the attempt.
    Release {
        job_id: Uuid,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        logs: Vec<JobLog>,
    },
    /// (1.3) The daemon is stopping: it takes back its `Ready` and wants no job. coderd answers
    /// [`ServerMessage::Stopped`] after any job it sent before.
    Stopping,
}

/// Messages from coderd to a daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Welcome {
        daemon_id: Uuid,
        daemon_name: String,
        protocol_version: String,
    },
    Job(Box<AcquiredJob>),
    /// Stop the job: interrupt the engine, then report it failed (with any state).
    Cancel {
        job_id: Uuid,
    },
    /// The job's result is stored (or the job no longer belongs to this daemon); stop resending.
    Finished {
        job_id: Uuid,
    },
    /// An update or result referred to a job this daemon does not hold (failed by coderd for a
    /// missed heartbeat, for instance): abandon it.
    JobGone {
        job_id: Uuid,
        reason: String,
    },
    /// (1.3) The answer to [`DaemonMessage::Stopping`]: no job follows it on this connection.
    Stopped,
}

/// A job handed to a daemon: everything needed to run it without asking coderd anything else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcquiredJob {
    pub job_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub provisioner: String,
    /// The template's tar archive. `Bytes`, so coderd hands a daemon the archive it keeps in
    /// its cache without copying it.
    #[serde(
        serialize_with = "base64_bytes::serialize",
        deserialize_with = "base64_archive"
    )]
    pub template_source_archive: bytes::Bytes,
    pub kind: JobKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JobKind {
    /// Parse a new template version: variables, parameters, start and stop resources.
    TemplateImport {
        metadata: Metadata,
        #[serde(default)]
        user_variable_values: Vec<VariableValue>,
    },
    /// Apply a workspace transition.
    WorkspaceBuild {
        workspace_build_id: Uuid,
        workspace_name: String,
        /// Provisioner state of the workspace's previous build (empty for the first).
        #[serde(with = "base64_bytes", default)]
        state: Vec<u8>,
        #[serde(default)]
        rich_parameter_values: Vec<RichParameterValue>,
        #[serde(default)]
        variable_values: Vec<VariableValue>,
        metadata: Metadata,
        /// The owner's secrets the template version declares (`coder_secret`), decrypted for
        /// this job only; the engine hands them to the provider and never logs them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<BuildSecret>,
        /// The owner's tokens for the external auth providers the template version names
        /// (`coder_external_auth`), refreshed for this job; empty for a provider not linked.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        external_auth_providers: Vec<crate::externalauth::ExternalAuthProviderToken>,
        /// The owner's git SSH key (`coder_workspace_owner`'s `ssh_public_key` and
        /// `ssh_private_key`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner_ssh_key: Option<crate::externalauth::AgentGitSshKey>,
    },
}

/// One of the workspace owner's secrets, as a build receives it: the provider reads it from
/// `CODER_SECRET_ENV_<env_name>` and/or `CODER_SECRET_FILE_<hex of file_path>`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSecret {
    #[serde(default)]
    pub env_name: String,
    #[serde(default)]
    pub file_path: String,
    pub value: String,
}

impl std::fmt::Debug for BuildSecret {
    // Jobs are logged when things go wrong; a secret's value must not be.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildSecret")
            .field("env_name", &self.env_name)
            .field("file_path", &self.file_path)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// Facts about the workspace and its owner that the engine exposes to templates (the `CODER_*`
/// environment of the terraform provider).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub coder_url: String,
    pub workspace_transition: Transition,
    pub workspace_name: String,
    pub workspace_owner: String,
    pub workspace_owner_id: String,
    pub workspace_owner_email: String,
    pub workspace_owner_name: String,
    /// A short-lived token of the owner, for templates that call the API as them.
    pub workspace_owner_session_token: String,
    pub workspace_id: String,
    pub workspace_build_id: String,
    pub template_id: String,
    pub template_name: String,
    pub template_version: String,
    pub workspace_owner_groups: Vec<String>,
    /// Whether the build makes a prebuilt workspace or claims one. Absent from the messages of
    /// daemons and coderds that predate it, hence the default.
    pub prebuilt_workspace_build_stage: PrebuiltWorkspaceBuildStage,
    /// The Coder Task the workspace runs (`CODER_TASK_ID`), empty for other workspaces.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// The task's prompt (`CODER_TASK_PROMPT`), which the `coder_task` data source and the
    /// `coder_ai_task` resource expose to the template.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task_prompt: String,
}

/// Coder's `PrebuiltWorkspaceBuildStage`: what a build means for prebuilt workspaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrebuiltWorkspaceBuildStage {
    /// An ordinary build.
    #[default]
    None,
    /// A build of a prebuilt workspace, before anyone claims it.
    Create,
    /// The build that hands a prebuilt workspace to the user who claimed it: its agents keep
    /// their tokens, so the running agents carry on.
    Claim,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transition {
    #[default]
    Start,
    Stop,
    Delete,
}

impl Transition {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Delete => "delete",
        }
    }
}

impl std::str::FromStr for Transition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "start" => Ok(Self::Start),
            "stop" => Ok(Self::Stop),
            "delete" => Ok(Self::Delete),
            other => Err(format!("unknown transition {other:?}")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariableValue {
    pub name: String,
    pub value: String,
    #[serde(default)]
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RichParameterValue {
    pub name: String,
    pub value: String,
}

/// A template variable (`variable` block) as the import found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateVariable {
    pub name: String,
    pub description: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub default_value: String,
    pub required: bool,
    pub sensitive: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogSource {
    #[default]
    ProvisionerDaemon,
    Provisioner,
}

impl LogSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProvisionerDaemon => "provisioner_daemon",
            Self::Provisioner => "provisioner",
        }
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "trace" => Ok(Self::Trace),
            "debug" => Ok(Self::Debug),
            "info" => Ok(Self::Info),
            "warn" => Ok(Self::Warn),
            "error" => Ok(Self::Error),
            other => Err(format!("unknown log level {other:?}")),
        }
    }
}

/// One line of job output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLog {
    pub created_at: DateTime<Utc>,
    pub source: LogSource,
    pub level: LogLevel,
    pub stage: String,
    pub output: String,
}

/// How long one stage of a job took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    pub stage: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub resource: String,
}

/// What a successful job produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JobResult {
    TemplateImport {
        #[serde(default)]
        start_resources: Vec<Resource>,
        #[serde(default)]
        stop_resources: Vec<Resource>,
        #[serde(default)]
        rich_parameters: Vec<RichParameter>,
        #[serde(default)]
        external_auth_providers: Vec<ExternalAuthProviderResource>,
        #[serde(default)]
        variables: Vec<TemplateVariable>,
        #[serde(default)]
        readme: String,
        #[serde(default)]
        timings: Vec<Timing>,
        /// Presets, AI tasks and external agents of the start plan.
        #[serde(flatten)]
        features: TemplateFeatures,
    },
    WorkspaceBuild {
        #[serde(with = "base64_bytes", default)]
        state: Vec<u8>,
        #[serde(default)]
        resources: Vec<Resource>,
        #[serde(default)]
        timings: Vec<Timing>,
        /// AI tasks and external agents of the applied state (presets stay empty).
        #[serde(flatten)]
        features: TemplateFeatures,
    },
}

/// Why a job failed, and the state to keep if the engine got that far (a failed apply may still
/// have created resources).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFailure {
    pub error: String,
    #[serde(default)]
    pub error_code: String,
    #[serde(with = "base64_opt", default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Vec<u8>>,
    /// The job stopped because it was cancelled.
    #[serde(default)]
    pub canceled: bool,
    #[serde(default)]
    pub timings: Vec<Timing>,
}

impl JobFailure {
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            ..Self::default()
        }
    }
}

/// Tags as a sorted map, so their JSON form is canonical.
pub type Tags = BTreeMap<String, String>;

/// Tag keys every job and daemon has.
pub const TAG_SCOPE: &str = "scope";
pub const TAG_OWNER: &str = "owner";
pub const SCOPE_ORGANIZATION: &str = "organization";
pub const SCOPE_USER: &str = "user";

impl ServerMessage {
    /// About how many bytes this message takes as JSON: a job carries its archive as base64,
    /// and writing it into a buffer of the right size spares growing (and copying) one of
    /// several megabytes.
    pub fn json_len_hint(&self) -> usize {
        match self {
            ServerMessage::Job(job) => job.template_source_archive.len().div_ceil(3) * 4 + 4096,
            _ => 256,
        }
    }
}

fn base64_archive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bytes::Bytes, D::Error> {
    base64_bytes::deserialize(d).map(bytes::Bytes::from)
}

mod base64_bytes {
    use super::*;

    /// Encodes while writing (`collect_str`), without a base64 copy of the whole input.
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&base64::display::Base64Display::new(
            bytes,
            &base64::engine::general_purpose::STANDARD,
        ))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

mod base64_opt {
    use super::*;

    pub fn serialize<S: serde::Serializer>(
        bytes: &Option<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => super::base64_bytes::serialize(b, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| {
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(serde::de::Error::custom)
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_json_fits_its_length_hint() {
        for len in [0, 1, 2, 3, 1 << 20, (1 << 20) + 1] {
            let msg = ServerMessage::Job(Box::new(AcquiredJob {
                job_id: Uuid::nil(),
                created_at: DateTime::<Utc>::UNIX_EPOCH,
                provisioner: "echo".into(),
                template_source_archive: vec![7; len].into(),
                kind: JobKind::TemplateImport {
                    metadata: Metadata::default(),
                    user_variable_values: vec![],
                },
            }));
            let json = serde_json::to_vec(&msg).expect("serialize");
            let hint = msg.json_len_hint();
            assert!(
                json.len() <= hint && hint - json.len() < 8192,
                "{len}: {} vs {hint}",
                json.len()
            );
        }
    }

    #[test]
    fn messages_round_trip_with_binary_fields() {
        let msg = ServerMessage::Job(Box::new(AcquiredJob {
            job_id: Uuid::nil(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            provisioner: "echo".into(),
            template_source_archive: vec![0, 159, 146, 150].into(),
            kind: JobKind::WorkspaceBuild {
                workspace_build_id: Uuid::nil(),
                workspace_name: "ws".into(),
                state: b"state".to_vec(),
                rich_parameter_values: vec![],
                variable_values: vec![],
                metadata: Metadata::default(),
                secrets: vec![BuildSecret {
                    env_name: "TOKEN".into(),
                    file_path: String::new(),
                    value: "v4lue".into(),
                }],
                external_auth_providers: vec![crate::externalauth::ExternalAuthProviderToken {
                    id: "github".into(),
                    access_token: "gho-t0ken".into(),
                }],
                owner_ssh_key: Some(crate::externalauth::AgentGitSshKey {
                    public_key: "ssh-ed25519 AAAA".into(),
                    private_key: "pr1vate".into(),
                }),
            },
        }));
        let json = serde_json::to_string(&msg).expect("serialize");
        assert!(json.contains(r#""type":"job""#), "{json}");
        assert!(json.contains(r#""env_name":"TOKEN""#), "{json}");
        for secret in ["v4lue", "gho-t0ken", "pr1vate"] {
            assert!(
                !format!("{msg:?}").contains(secret),
                "credentials stay out of Debug"
            );
        }
        assert!(
            json.contains(r#""template_source_archive":"AJ+Slg==""#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<ServerMessage>(&json).expect("parse"),
            msg
        );

        let fail = DaemonMessage::Fail {
            job_id: Uuid::nil(),
            failure: JobFailure {
                state: Some(vec![1, 2, 3]),
                ..JobFailure::new("boom")
            },
            logs: vec![],
            ready: true,
        };
        let json = serde_json::to_string(&fail).expect("serialize");
        assert!(json.contains(r#""ready":true"#), "{json}");
        assert_eq!(
            serde_json::from_str::<DaemonMessage>(&json).expect("parse"),
            fail
        );

        let stopping = serde_json::to_string(&DaemonMessage::Stopping).expect("serialize");
        assert_eq!(stopping, r#"{"type":"stopping"}"#);
        let stopped = serde_json::to_string(&ServerMessage::Stopped).expect("serialize");
        assert_eq!(stopped, r#"{"type":"stopped"}"#);
    }

    #[test]
    fn template_features_travel_flat_and_may_be_absent() {
        use crate::proto::{AiTask, Preset};
        let result = JobResult::TemplateImport {
            start_resources: vec![],
            stop_resources: vec![],
            rich_parameters: vec![],
            external_auth_providers: vec![],
            variables: vec![],
            readme: String::new(),
            timings: vec![],
            features: TemplateFeatures {
                presets: vec![Preset {
                    name: "fast".into(),
                    default: true,
                    ..Preset::default()
                }],
                ai_tasks: vec![AiTask {
                    id: "t".into(),
                    app_id: "a".into(),
                }],
                has_ai_tasks: true,
                has_external_agents: false,
                secrets: vec![],
            },
        };
        let json = serde_json::to_value(&result).expect("serialize");
        assert_eq!(json["presets"][0]["name"], "fast");
        assert_eq!(json["has_ai_tasks"], true);
        assert_eq!(
            serde_json::from_value::<JobResult>(json).expect("parse"),
            result
        );
        // A daemon from before these facts sends none of them.
        let old: JobResult =
            serde_json::from_str(r#"{"type":"workspace_build","state":"","resources":[]}"#)
                .expect("parse");
        assert!(matches!(
            old,
            JobResult::WorkspaceBuild { features, .. } if features == TemplateFeatures::default()
        ));
    }
}
