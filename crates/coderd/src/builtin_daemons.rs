//! Daemons built into `coder server`: the same `provisionerd` runner as external daemons,
//! connected to this process's daemon sessions through in-memory channels instead of a
//! WebSocket. They serve the default organization, untagged, like Coder's.

use std::sync::Arc;
use std::time::Duration;

use codersdk::provisionerd::{ServeParams, Tags};
use provisionerd::{ConnectError, Connection, Connector, DaemonConfig, Engine};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use coderd_core::provisioners::dispatch::Capability;
use coderd_core::provisioners::session::{self, SessionIo};
use coderd_core::provisioners::tags;
use coderd_core::state::AppState;
use coderd_store::{self as store, NewDaemon};

/// How long built-in daemons may finish a running job when the server stops.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// Connects a built-in daemon to this coderd.
pub struct BuiltinConnector {
    state: AppState,
    stop: CancellationToken,
}

impl Connector for BuiltinConnector {
    async fn connect(&self, params: &ServeParams) -> Result<Connection, ConnectError> {
        // Before the first user exists there is no organization to serve; wait for it quietly
        // instead of failing into the runner's backoff.
        let org = loop {
            match self.state.store.default_organization().await {
                Ok(org) => break org,
                Err(store::Error::NotFound) => {}
                Err(e) => return Err(ConnectError::Transient(e.to_string())),
            }
            tokio::select! {
                () = self.stop.cancelled() => return Err(ConnectError::Transient("server is stopping".into())),
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        };
        let daemon_tags = tags::normalize(Tags::new(), None);
        let provisioners: Vec<String> =
            params.provisioners.split(',').map(str::to_string).collect();
        let row = self
            .state
            .store
            .upsert_daemon(&NewDaemon {
                organization_id: org.id,
                name: params.name.clone(),
                owner_key: String::new(),
                provisioners: provisioners.clone(),
                tags: serde_json::to_value(&daemon_tags).unwrap_or_default(),
                version: params.version.clone(),
                api_version: params.protocol_version.clone(),
                key_id: None,
            })
            .await
            .map_err(|e| ConnectError::Transient(e.to_string()))?;
        let capability = Capability {
            org: org.id,
            provisioners,
            keys: tags::acceptable_keys(&daemon_tags),
        };
        let (daemon_end, server_end) = Connection::pair(64);
        // The session ends when the daemon hangs up, which it does only after finishing or
        // failing its job: so no server-wide shutdown token here.
        tokio::spawn(session::run(
            self.state.clone(),
            row,
            capability,
            SessionIo {
                incoming: server_end.incoming,
                outgoing: server_end.outgoing,
            },
            CancellationToken::new(),
        ));
        Ok(daemon_end)
    }
}

/// Starts `count` built-in daemons running `engines`; they stop (finishing or failing their
/// jobs) when `stop` is cancelled. `port` is the one this coderd serves on.
///
/// A daemon is known by its name, so the names carry the port as well as the host: replicas on
/// one host would otherwise share their daemons' rows, and one replica's session would take
/// the job another replica's daemon of that name runs for its own, then fail it when its own
/// daemon said it was idle. A restarted coderd keeps its port, so its daemons still find (and
/// fail) the jobs their predecessors held.
pub fn start(
    state: &AppState,
    count: u32,
    port: u16,
    engines: &[(&str, Arc<dyn Engine>)],
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    (0..count)
        .map(|n| {
            let mut config = DaemonConfig::new(format!("{host}-{port}-built-in-{n}"));
            for (name, engine) in engines {
                config = config.with_engine(*name, engine.clone());
            }
            config.shutdown_grace = SHUTDOWN_GRACE;
            let connector = BuiltinConnector {
                state: state.clone(),
                stop: stop.clone(),
            };
            let stop = stop.clone();
            tokio::spawn(async move {
                if let Err(e) = provisionerd::run(connector, config, stop).await {
                    tracing::error!(error = %e, "built-in provisioner daemon stopped");
                }
            })
        })
        .collect()
}
