//! `--output table|json` for commands that list or show things.

use comfy_table::presets::NOTHING;
use comfy_table::{Cell, Table};
use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// A row-oriented view of a value: column headings and each row's cells.
pub trait Tabular {
    fn headers() -> &'static [&'static str];
    fn row(&self) -> Vec<String>;
}

pub fn print_list<T: Serialize + Tabular>(format: Format, items: &[T]) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(items)?),
        Format::Table => print_table(T::headers(), items.iter().map(T::row).collect()),
    }
    Ok(())
}

/// A table of cells under `headers` (for commands whose columns the user picks).
pub fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(headers.iter().map(|h| Cell::new(h.to_uppercase())));
    for row in rows {
        table.add_row(row);
    }
    println!("{}", table.trim_fmt());
}

pub fn print_one<T: Serialize + Tabular>(format: Format, item: &T) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(item)?);
            Ok(())
        }
        Format::Table => print_list(format, std::slice::from_ref(item)),
    }
}

pub fn time(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}
