//! Workspace schedules as pure time arithmetic, shared by the API (validating schedules,
//! `next_start_at`), the store (deadlines written when a start build completes) and the
//! lifecycle executor: Coder's weekly cron strings ([`cron`]), and deadlines from a TTL and a
//! template's autostop requirement ([`autostop`]). Nothing here reads a clock: every function
//! takes the time it reasons about; [`clock`] is the deployment's injectable "now" that callers
//! read it from.

pub mod autostop;
pub mod clock;
pub mod cron;
#[cfg(test)]
mod props;

pub use autostop::{Autostop, TemplatePolicy, autostop, effective_ttl_ms};
pub use cron::{ALL_DAYS, Schedule, ScheduleError, bitmap_to_days, days_to_bitmap};
