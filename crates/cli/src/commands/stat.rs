//! `coder stat`: the resource use of the machine it runs on — meant for inside a workspace,
//! where templates call `coder stat cpu|mem|disk` from their agents' metadata scripts. The
//! host's figures come from `/proc` and `statvfs`, a container's from its cgroup (v2).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

/// How long the CPU is watched for its use.
const CPU_SAMPLE: Duration = Duration::from_millis(100);
const CGROUP: &str = "/sys/fs/cgroup";

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct StatArgs {
    #[command(subcommand)]
    pub command: Option<StatCommand>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = TableFormat::Table)]
    pub output: TableFormat,
    /// Columns to show.
    #[arg(short, long, value_delimiter = ',', default_values = [
        "host cpu", "host memory", "home disk", "container cpu", "container memory"
    ])]
    pub column: Vec<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum StatCommand {
    /// Show CPU usage, in cores.
    Cpu {
        /// The host's CPU rather than the container's.
        #[arg(long)]
        host: bool,
        #[arg(short, long, value_enum, default_value_t = TextFormat::Text)]
        output: TextFormat,
    },
    /// Show memory usage.
    Mem {
        /// The host's memory rather than the container's.
        #[arg(long)]
        host: bool,
        /// The unit's prefix.
        #[arg(long, value_enum, default_value_t = Prefix::Gi)]
        prefix: Prefix,
        #[arg(short, long, value_enum, default_value_t = TextFormat::Text)]
        output: TextFormat,
    },
    /// Show disk usage of a path's file system.
    Disk {
        #[arg(long, default_value = "/")]
        path: PathBuf,
        #[arg(long, value_enum, default_value_t = Prefix::Gi)]
        prefix: Prefix,
        #[arg(short, long, value_enum, default_value_t = TextFormat::Text)]
        output: TextFormat,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TextFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum Prefix {
    Ki,
    Mi,
    Gi,
    Ti,
}

impl Prefix {
    fn scale(self) -> f64 {
        match self {
            Self::Ki => 1024.0,
            Self::Mi => 1024.0 * 1024.0,
            Self::Gi => 1024.0 * 1024.0 * 1024.0,
            Self::Ti => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Ki => "Ki",
            Self::Mi => "Mi",
            Self::Gi => "Gi",
            Self::Ti => "Ti",
        }
    }
}

/// Coder's `clistat.Result`: `used` of `total` (none when unlimited), in `unit`.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub total: Option<f64>,
    pub unit: &'static str,
    pub used: f64,
    #[serde(skip)]
    prefix: Option<Prefix>,
}

impl Usage {
    fn scaled(mut self, prefix: Prefix) -> Self {
        self.prefix = Some(prefix);
        self
    }

    /// `1.23/4 cores (31%)`, `2.5/7.8 GiB (32%)`, `0.2 cores` without a total.
    pub fn text(&self) -> String {
        let scale = self.prefix.map_or(1.0, Prefix::scale);
        let unit = match self.prefix {
            Some(prefix) => format!("{}{}", prefix.name(), self.unit),
            None => self.unit.to_string(),
        };
        let used = round(self.used / scale);
        match self.total {
            Some(total) if total > 0.0 => format!(
                "{used}/{} {unit} ({:.0}%)",
                round(total / scale),
                self.used / total * 100.0
            ),
            _ => format!("{used} {unit}"),
        }
    }
}

/// Coder's rounding: fewer decimals for larger figures.
fn round(value: f64) -> String {
    let decimals = match value.abs() {
        v if v < 1.0 => 3,
        v if v < 10.0 => 2,
        v if v < 100.0 => 1,
        _ => 0,
    };
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

pub async fn run(args: StatArgs) -> anyhow::Result<()> {
    match args.command {
        Some(StatCommand::Cpu { host, output }) => {
            // Outside a container the host's figures are the only ones, as in Coder.
            let usage = if host || !in_container() {
                host_cpu().await?
            } else {
                container_cpu().await?
            };
            print(&usage, output)
        }
        Some(StatCommand::Mem {
            host,
            prefix,
            output,
        }) => {
            let usage = if host || !in_container() {
                host_memory()?
            } else {
                container_memory()?
            };
            print(&usage.scaled(prefix), output)
        }
        Some(StatCommand::Disk {
            path,
            prefix,
            output,
        }) => print(&disk(&path)?.scaled(prefix), output),
        None => table(&args.column, args.output).await,
    }
}

fn print(usage: &Usage, format: TextFormat) -> anyhow::Result<()> {
    match format {
        TextFormat::Text => println!("{}", usage.text()),
        TextFormat::Json => println!("{}", serde_json::to_string_pretty(usage)?),
    }
    Ok(())
}

async fn table(columns: &[String], format: TableFormat) -> anyhow::Result<()> {
    let in_container = in_container();
    let mut cells = Vec::new();
    let mut json = serde_json::Map::new();
    for column in columns {
        let usage = match column.as_str() {
            "host cpu" => Some(host_cpu().await?),
            "host memory" => Some(host_memory()?.scaled(Prefix::Gi)),
            "home disk" => {
                let home = dirs::home_dir().unwrap_or_else(|| PathBuf::from("/"));
                Some(disk(&home)?.scaled(Prefix::Gi))
            }
            "container cpu" if in_container => Some(container_cpu().await?),
            "container memory" if in_container => Some(container_memory()?.scaled(Prefix::Gi)),
            "container cpu" | "container memory" => None,
            other => anyhow::bail!(
                "unknown column {other:?}: host cpu, host memory, home disk, container cpu, \
                 container memory"
            ),
        };
        cells.push(usage.as_ref().map(Usage::text).unwrap_or_default());
        json.insert(
            column.replace(' ', "_"),
            serde_json::to_value(&usage).context("a usage")?,
        );
    }
    match format {
        TableFormat::Table => {
            let headers: Vec<&str> = columns.iter().map(String::as_str).collect();
            crate::output::print_table(&headers, vec![cells]);
        }
        TableFormat::Json => println!("{}", serde_json::to_string_pretty(&json)?),
    }
    Ok(())
}

/// Cores busy over a short sample, of all the machine's cores.
async fn host_cpu() -> anyhow::Result<Usage> {
    let (busy_before, total_before) = proc_stat()?;
    tokio::time::sleep(CPU_SAMPLE).await;
    let (busy_after, total_after) = proc_stat()?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let elapsed = (total_after - total_before).max(1) as f64;
    let used = (busy_after - busy_before) as f64 / elapsed * cores;
    Ok(Usage {
        total: Some(cores),
        unit: "cores",
        used,
        prefix: None,
    })
}

/// Busy and total jiffies of all CPUs (`/proc/stat`'s first line).
fn proc_stat() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .context("/proc/stat is empty")?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait are the 4th and 5th figures.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

fn host_memory() -> anyhow::Result<Usage> {
    let info = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<f64>()
            .ok()
            .map(|kib| kib * 1024.0)
    };
    let total = field("MemTotal:").context("no MemTotal in /proc/meminfo")?;
    let available = field("MemAvailable:").context("no MemAvailable in /proc/meminfo")?;
    Ok(Usage {
        total: Some(total),
        unit: "B",
        used: total - available,
        prefix: None,
    })
}

fn disk(path: &Path) -> anyhow::Result<Usage> {
    let stat = nix::sys::statvfs::statvfs(path)
        .with_context(|| format!("reading the file system of {}", path.display()))?;
    let block = stat.fragment_size() as f64;
    let total = stat.blocks() as f64 * block;
    let free = stat.blocks_free() as f64 * block;
    Ok(Usage {
        total: Some(total),
        unit: "B",
        used: total - free,
        prefix: None,
    })
}

/// Whether this process runs in a container with a cgroup of its own (v2): its limits are the
/// container's, not the host's.
fn in_container() -> bool {
    Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || std::fs::read_to_string("/proc/1/cgroup").is_ok_and(|c| c.trim() != "0::/")
}

fn cgroup(name: &str) -> anyhow::Result<String> {
    let path = Path::new(CGROUP).join(name);
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .with_context(|| {
            format!(
                "reading {} (is this a cgroup v2 container?)",
                path.display()
            )
        })
}

/// Cores the container used over a short sample, of its quota (none when unlimited).
async fn container_cpu() -> anyhow::Result<Usage> {
    let usage_usec = || -> anyhow::Result<u64> {
        cgroup("cpu.stat")?
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse().ok())
            .context("no usage_usec in cpu.stat")
    };
    let before = usage_usec()?;
    let started = std::time::Instant::now();
    tokio::time::sleep(CPU_SAMPLE).await;
    let used = (usage_usec()? - before) as f64 / started.elapsed().as_micros().max(1) as f64;
    let total = cgroup("cpu.max").ok().and_then(|max| {
        let (quota, period) = max.split_once(' ')?;
        Some(quota.parse::<f64>().ok()? / period.parse::<f64>().ok()?)
    });
    Ok(Usage {
        total,
        unit: "cores",
        used,
        prefix: None,
    })
}

fn container_memory() -> anyhow::Result<Usage> {
    let used: f64 = cgroup("memory.current")?
        .parse()
        .context("memory.current is not a number")?;
    let total = cgroup("memory.max").ok().and_then(|m| m.parse().ok());
    Ok(Usage {
        total,
        unit: "B",
        used,
        prefix: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_coders() {
        let cpu = Usage {
            total: Some(4.0),
            unit: "cores",
            used: 1.234,
            prefix: None,
        };
        assert_eq!(cpu.text(), "1.23/4 cores (31%)");
        let mem = Usage {
            total: Some(8.0 * 1024.0 * 1024.0 * 1024.0),
            unit: "B",
            used: 2.5 * 1024.0 * 1024.0 * 1024.0,
            prefix: None,
        }
        .scaled(Prefix::Gi);
        assert_eq!(mem.text(), "2.5/8 GiB (31%)");
        let unlimited = Usage {
            total: None,
            unit: "cores",
            used: 0.2,
            prefix: None,
        };
        assert_eq!(unlimited.text(), "0.2 cores");
        assert_eq!(round(123.456), "123");
        assert_eq!(round(0.5), "0.5");
    }
}
