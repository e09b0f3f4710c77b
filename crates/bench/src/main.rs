//! `coder-bench`: parses flags, runs the suite, prints the table, writes JSON and docs.

use std::path::PathBuf;

use anyhow::Context;
use bench::{Config, Only, Sizes};
use clap::Parser;

/// Benchmarks of coder-rs against its goals (P1–P10), with baselines measured in
/// the same run. Starts its own PostgreSQL, `coder server` and provisioner daemons.
#[derive(Parser)]
#[command(name = "coder-bench")]
struct Args {
    /// Shorter windows and fewer runs (under 2 minutes); same scales where goals define them.
    #[arg(long, conflicts_with = "tiny")]
    quick: bool,
    /// Seconds of everything: checks the suite works, says nothing about speed.
    #[arg(long)]
    tiny: bool,
    /// The `coder` binary to benchmark [default: `coder` next to this program].
    #[arg(long, value_name = "PATH")]
    coder_bin: Option<PathBuf>,
    /// Also write the results as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the results into this file between its coder-bench markers.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "docs/benchmarks.md")]
    write_docs: Option<PathBuf>,
    /// Keep clusters, configs and logs here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Skip the graphile-worker baseline (its rows say so).
    #[arg(long)]
    no_graphile: bool,
    /// Measure nothing: render a report saved with --json (table, and docs with --write-docs).
    #[arg(long, value_name = "PATH")]
    render: Option<PathBuf>,
    /// Run only this scenario (its rows alone: not written into the docs' table).
    #[arg(long, value_enum, conflicts_with_all = ["render", "write_docs"])]
    only: Option<Only>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (profile, sizes) = if args.tiny {
        ("tiny", Sizes::tiny())
    } else if args.quick {
        ("quick", Sizes::quick())
    } else {
        ("full", Sizes::full())
    };
    let coder_bin = match args.coder_bin {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .context("cannot locate coder-bench's directory")?
            .join("coder"),
    };
    let mut config = Config::new(profile, sizes, coder_bin);
    config.work_dir = args.work_dir;
    config.graphile = !args.no_graphile;
    let report = match (&args.render, args.only) {
        (Some(path), _) => bench::Report::read_json(path)?,
        (None, Some(only)) => bench::run_only(&config, only).await?,
        (None, None) => bench::run(&config).await?,
    };
    println!("{}", report.table());
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    if let Some(path) = &args.write_docs {
        report.write_docs(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
