//! coderd's notion of "now" for schedule decisions (deadlines, next autostarts, the lifecycle
//! executor's ticks). The deployment's settings carry one; tests replace it to stand at a DST
//! change or an hour past a deadline without waiting.

use std::sync::Arc;

use chrono::{DateTime, Utc};

#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>);

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self(Arc::new(Utc::now))
    }

    /// A clock that reads `now` (tests: a fixed or shifted time).
    pub fn from_fn(now: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now())
    }
}
