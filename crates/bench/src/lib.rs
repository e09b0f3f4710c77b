#![doc = include_str!("../README.md")]

pub mod completions;
pub mod conditions;
pub mod config;
pub mod deploy;
pub mod graphile;
pub mod procs;
pub mod report;
pub mod scenarios;
pub mod seed;
pub mod stats;
pub mod suite;

pub use config::{Config, Sizes};
pub use report::{Report, Row, Verdict};
pub use suite::{Only, run, run_only};
