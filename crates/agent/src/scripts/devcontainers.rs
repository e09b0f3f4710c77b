//! Dev containers (`coder_devcontainer`): Coder's agent starts them with the Dev Containers
//! CLI and a container engine, and runs a sub-agent inside each. This agent does not run dev
//! containers, and the machines coder-rs targets have no container engine; so instead of
//! ignoring them it says, under each container's log source (shown with the agent's logs)
//! and in its own log, that the container cannot start and why.

use std::path::{Path, PathBuf};

use codersdk::agentsdk::ManifestDevcontainer;

use crate::reporter::{Reporter, log_line};

/// Container engines the Dev Containers CLI can drive.
const ENGINES: [&str; 2] = ["docker", "podman"];

/// The first container engine on `path` (a `PATH` value), if any.
fn find_engine(path: Option<&str>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path).find_map(|dir| {
        ENGINES
            .iter()
            .map(|engine| dir.join(engine))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why `container` does not start in this workspace.
fn why_not(container: &ManifestDevcontainer, engine: Option<&Path>) -> String {
    let what = format!(
        "dev container {:?} ({}) cannot start",
        container.name, container.workspace_folder
    );
    match engine {
        None => format!(
            "{what}: it needs a container engine in the workspace and none was found (looked \
             for {} on PATH)",
            ENGINES.join(" and ")
        ),
        Some(engine) => format!(
            "{what}: this agent does not run dev containers (found {}, but coder-rs has no \
             dev container support yet)",
            engine.display()
        ),
    }
}

/// Reports every dev container of the manifest as not started.
pub(crate) fn report_devcontainers(
    reporter: &Reporter,
    containers: &[ManifestDevcontainer],
    path: Option<&str>,
) {
    if containers.is_empty() {
        return;
    }
    let engine = find_engine(path);
    for container in containers {
        let message = why_not(container, engine.as_deref());
        tracing::error!(devcontainer = %container.name, "{message}");
        reporter.push_log(container.log_source_id, log_line("error", message));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use codersdk::agentsdk::Request;

    use super::*;
    use crate::reporter::tests::FakePeer;

    fn container() -> ManifestDevcontainer {
        ManifestDevcontainer {
            id: uuid::Uuid::new_v4(),
            log_source_id: uuid::Uuid::new_v4(),
            name: "repo".into(),
            workspace_folder: "/workspace/repo".into(),
            config_path: String::new(),
            subagent_id: None,
        }
    }

    #[tokio::test]
    async fn a_missing_engine_is_reported_under_the_containers_log_source() -> anyhow::Result<()> {
        let empty = tempfile::tempdir()?;
        let reporter = Reporter::new(Duration::from_millis(10), Duration::from_secs(1));
        let c = container();
        report_devcontainers(&reporter, std::slice::from_ref(&c), empty.path().to_str());
        let calls = FakePeer::default().flushed(&reporter).await?;
        let logs: Vec<_> = calls
            .into_iter()
            .filter_map(|call| match call {
                Request::BatchCreateLogs(batch) => Some(batch),
                _ => None,
            })
            .collect();
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].log_source_id, c.log_source_id);
        assert_eq!(logs[0].logs[0].level, "error");
        assert_eq!(
            logs[0].logs[0].output,
            "dev container \"repo\" (/workspace/repo) cannot start: it needs a container engine \
             in the workspace and none was found (looked for docker and podman on PATH)"
        );
        Ok(())
    }

    #[test]
    fn an_engine_on_path_is_named() -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let docker = dir.path().join("docker");
        std::fs::write(&docker, "#!/bin/sh\n")?;
        std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755))?;
        let found = find_engine(dir.path().to_str());
        assert_eq!(found.as_deref(), Some(docker.as_path()));
        assert!(why_not(&container(), found.as_deref()).contains("does not run dev containers"));
        Ok(())
    }
}
