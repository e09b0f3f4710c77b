//! The TCP ports listening inside the workspace, for the dashboard: read from the kernel's
//! socket tables (`/proc/net/tcp` and `tcp6`, sockets in LISTEN state), each port named after
//! the process holding its socket where `/proc/<pid>/fd` is readable. The agent's own sockets
//! (`ssh -R` listeners) are left out, and so are ports below 9, which Coder reserves for its
//! agent; which common non-HTTP ports to hide is coderd's choice, not the agent's.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::Path;

use codersdk::agentsdk::{ListeningPort, ListeningPorts, write_frame};
use tokio::io::AsyncWriteExt;
use tokio_yamux::StreamHandle;

use super::{accept, refuse};

/// Coder's `AgentMinimumListeningPort`: ports below are reserved for the agent.
const MINIMUM_PORT: u16 = 9;
/// `TCP_LISTEN` in the kernel's `st` column.
const LISTEN: &str = "0A";

pub(super) async fn answer(mut stream: StreamHandle) {
    let scan = tokio::task::spawn_blocking(|| listening_ports(Path::new("/proc")))
        .await
        .map_err(io::Error::other)
        .and_then(|scanned| scanned);
    let ports = match scan {
        Ok(ports) => ports,
        Err(error) => {
            return refuse(
                stream,
                format!("cannot read the workspace's sockets: {error}"),
            )
            .await;
        }
    };
    if accept(&mut stream).await.is_ok() && write_frame(&mut stream, &ports).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

/// The listening ports under `proc` (a procfs mount), once each, in port order.
pub(crate) fn listening_ports(proc: &Path) -> io::Result<ListeningPorts> {
    let mut sockets = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        match std::fs::read_to_string(proc.join(table)) {
            Ok(text) => sockets.extend(parse_table(&text)),
            // A kernel without IPv6 has no tcp6 table.
            Err(e) if e.kind() == io::ErrorKind::NotFound && table == "net/tcp6" => {}
            Err(e) => return Err(e),
        }
    }
    let owners = socket_owners(proc);
    let own = std::process::id();
    let mut ports = BTreeMap::new();
    for (port, inode) in sockets {
        let owner = owners.get(&inode);
        // Per socket, not per port: another process listening on the same port (say on
        // IPv6 while the agent holds IPv4) is still a workspace service.
        if port < MINIMUM_PORT || owner.is_some_and(|o| o.pids.contains(&own)) {
            continue;
        }
        let name = owner.map(|o| o.name.clone()).unwrap_or_default();
        let entry = ports.entry(port).or_insert_with(String::new);
        if entry.is_empty() {
            *entry = name;
        }
    }
    Ok(ListeningPorts {
        ports: ports
            .into_iter()
            .map(|(port, process_name)| ListeningPort {
                process_name,
                network: "tcp".into(),
                port,
            })
            .collect(),
    })
}

/// The command lines (arguments joined by spaces) of the processes listening on `port`.
pub(crate) fn listener_cmdlines(proc: &Path, port: u16) -> Vec<String> {
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(proc.join(table)) {
            inodes.extend(
                parse_table(&text)
                    .into_iter()
                    .filter(|(p, _)| *p == port)
                    .map(|(_, inode)| inode),
            );
        }
    }
    if inodes.is_empty() {
        return Vec::new();
    }
    let owners = socket_owners(proc);
    inodes
        .iter()
        .filter_map(|inode| owners.get(inode))
        .flat_map(|owner| &owner.pids)
        .filter_map(|pid| std::fs::read(proc.join(pid.to_string()).join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .collect()
}

/// `(port, inode)` of every listening socket in one `/proc/net/tcp*` table.
fn parse_table(text: &str) -> Vec<(u16, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields.get(3) != Some(&LISTEN) {
                return None;
            }
            let (_, port) = fields.get(1)?.rsplit_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let inode = fields.get(9)?.parse().ok()?;
            Some((port, inode))
        })
        .collect()
}

/// Who holds a socket: every process with it open, and the first one's name.
#[derive(Debug, Default)]
struct Owner {
    pids: Vec<u32>,
    name: String,
}

/// Socket inodes → the processes holding them, from `/proc/<pid>/fd/*` links
/// (`socket:[<inode>]`). Processes of other users are unreadable and simply not found.
fn socket_owners(proc: &Path) -> HashMap<u64, Owner> {
    let mut owners: HashMap<u64, Owner> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return owners;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let mut name = None;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            else {
                continue;
            };
            let name = name.get_or_insert_with(|| {
                std::fs::read_to_string(entry.path().join("comm"))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_default()
            });
            let owner = owners.entry(inode).or_default();
            if owner.pids.is_empty() {
                owner.name = name.clone();
            }
            owner.pids.push(pid);
        }
    }
    owners
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listening_sockets_are_parsed() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A3C2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1
";
        assert_eq!(parse_table(table), [(8080, 4242)]);
        let table6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(parse_table(table6), [(3000, 77)]);
    }

    #[test]
    fn the_agents_own_sockets_are_left_out() -> anyhow::Result<()> {
        let own = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = own.local_addr()?.port();
        let ports = listening_ports(Path::new("/proc"))?;
        assert!(
            ports.ports.iter().all(|p| p.port != port),
            "{port} is the agent's own: {ports:?}"
        );
        Ok(())
    }
}
