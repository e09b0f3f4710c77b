//! The general API rate limit (Coder's `CODER_API_RATE_LIMIT`): so many requests a minute per
//! user, or per client address for requests without a valid session. A GCRA bucket per key from
//! the `governor` crate (a minute's worth as a burst, refilled evenly), in memory per replica as
//! Coder's is; keys whose buckets are full again are pruned every minute, so memory follows the
//! clients of the last minutes. Routes with a stricter limit of their own (password login) or
//! that are one long-lived connection of a daemon or agent are exempt: see [`exempt`].

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The header an owner sends to skip the limit (load tests, automation), as in Coder.
pub const BYPASS_HEADER: &str = "X-Coder-Bypass-Ratelimit";

/// Whom a request is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    User(Uuid),
    Address(IpAddr),
}

/// A request over the limit, and when the next one may come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: Duration,
}

pub struct ApiLimit {
    per_minute: u32,
    limiter: DefaultKeyedRateLimiter<Key>,
}

impl std::fmt::Debug for ApiLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiLimit")
            .field("per_minute", &self.per_minute)
            .field("keys", &self.limiter.len())
            .finish()
    }
}

impl ApiLimit {
    /// `None` when the limit is off (no limit configured, or a limit of zero).
    pub fn new(per_minute: Option<u32>) -> Option<Arc<Self>> {
        let n = NonZeroU32::new(per_minute?)?;
        Some(Arc::new(Self {
            per_minute: n.get(),
            limiter: RateLimiter::keyed(Quota::per_minute(n)),
        }))
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Counts one request for `key`.
    pub fn check(&self, key: Key) -> Result<(), Limited> {
        self.limiter.check_key(&key).map_err(|n| Limited {
            retry_after: n.wait_time_from(DefaultClock::default().now()),
        })
    }

    /// Coder's refusal text.
    pub fn message(&self) -> String {
        format!(
            "You've been rate limited for sending more than {} requests in 1m0s.",
            self.per_minute
        )
    }

    /// Forgets full buckets every minute until `stop`.
    pub fn prune_until(self: Arc<Self>, stop: CancellationToken) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {
                        self.limiter.retain_recent();
                        self.limiter.shrink_to_fit();
                    }
                }
            }
        });
    }
}

/// Paths under `/api/v2` the general limit does not count: password login (its own, stricter
/// per-address and per-account limits answer floods there, before any hashing), and the single
/// long-lived connections of workspace agents and provisioner daemons (throttling them would
/// break workspaces, and each is one request however long it lives).
pub fn exempt(path: &str) -> bool {
    path == "/users/login"
        || path.starts_with("/workspaceagents/me/")
        || (path.starts_with("/organizations/") && path.ends_with("/provisionerdaemons/serve"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_has_its_own_minute() {
        assert!(ApiLimit::new(None).is_none());
        assert!(ApiLimit::new(Some(0)).is_none());
        let limit = ApiLimit::new(Some(3)).expect("on");
        let (alice, bob) = (Key::User(Uuid::new_v4()), Key::User(Uuid::new_v4()));
        for _ in 0..3 {
            assert!(limit.check(alice).is_ok());
        }
        let refused = limit.check(alice).expect_err("over");
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(20),
            "{refused:?}"
        );
        assert!(limit.check(bob).is_ok());
        assert!(limit.check(Key::Address([127, 0, 0, 1].into())).is_ok());
        assert!(limit.message().contains("more than 3 requests"));
    }

    #[test]
    fn daemon_agent_and_login_paths_are_exempt() {
        for path in [
            "/users/login",
            "/workspaceagents/me/rpc",
            "/organizations/default/provisionerdaemons/serve",
        ] {
            assert!(exempt(path), "{path}");
        }
        for path in [
            "/users/me",
            "/workspaceagents/abc/pty",
            "/organizations/default/provisionerdaemons",
            "/users/login/x",
        ] {
            assert!(!exempt(path), "{path}");
        }
    }
}
