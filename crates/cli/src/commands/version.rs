//! `coder version`: what Coder's IDE clients read to decide which flags this CLI takes (only
//! `version`; they compare it with the server's `/api/v2/buildinfo` and download the server's
//! CLI when the two differ).

use serde::Serialize;

/// The project's source, which buildinfo names as its `external_url` too.
pub const SOURCE_URL: &str = "https://github.com/coder-rs/coder-rs";

#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Coder's `buildinfo.BuildInfo` as its CLI prints it.
#[derive(Debug, Serialize)]
struct Info {
    version: &'static str,
    /// Go's zero time, as Coder's own builds without a stamped time report: reproducible builds
    /// here stamp none.
    build_time: &'static str,
    external_url: &'static str,
    /// This binary carries the server.
    slim: bool,
    agpl: bool,
    boring_crypto: bool,
}

pub fn run(args: VersionArgs) -> anyhow::Result<()> {
    let info = Info {
        version: codersdk::version::VERSION,
        build_time: "0001-01-01T00:00:00Z",
        external_url: SOURCE_URL,
        slim: false,
        agpl: false,
        boring_crypto: false,
    };
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        Format::Text => println!(
            "Coder {}\n{}\n\nFull build of Coder, supports the server subcommand.",
            info.version, info.external_url
        ),
    }
    Ok(())
}
