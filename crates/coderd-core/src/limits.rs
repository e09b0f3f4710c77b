//! Abuse limits on password logins: attempts are counted per client IP and per account (the
//! email asked for, whether or not such an account exists, so a refusal tells nothing), and
//! an attempt over either limit is refused *before* its password is hashed — a flood of wrong
//! passwords costs coderd a map lookup each, not an Argon2 run. Limits are GCRA buckets from
//! the `governor` crate: a burst, then one attempt back every period. They are kept per
//! replica, in memory (as Coder's are); idle keys are pruned every minute.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::sync::CancellationToken;

/// A burst of attempts, then one more every `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginQuota {
    pub burst: u32,
    pub period: Duration,
}

/// The deployment's login limits (`None`: that limit is off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimitSettings {
    pub per_ip: Option<LoginQuota>,
    pub per_account: Option<LoginQuota>,
}

impl Default for LoginLimitSettings {
    /// Coder's 60 logins a minute per client, and a tighter budget per account that a slow
    /// attack spread over many addresses still runs into.
    fn default() -> Self {
        Self {
            per_ip: Some(LoginQuota {
                burst: 60,
                period: Duration::from_secs(1),
            }),
            per_account: Some(LoginQuota {
                burst: 20,
                period: Duration::from_secs(15),
            }),
        }
    }
}

impl LoginLimitSettings {
    /// No limits (`CODER_RATE_LIMIT_DISABLE_ALL`).
    pub fn disabled() -> Self {
        Self {
            per_ip: None,
            per_account: None,
        }
    }
}

/// An attempt over a limit, and when the next one may come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: Duration,
}

/// The running limiters.
pub struct LoginLimits {
    per_ip: Option<DefaultKeyedRateLimiter<IpAddr>>,
    per_account: Option<DefaultKeyedRateLimiter<String>>,
}

impl std::fmt::Debug for LoginLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLimits")
            .field("per_ip", &self.per_ip.as_ref().map(|l| l.len()))
            .field("per_account", &self.per_account.as_ref().map(|l| l.len()))
            .finish()
    }
}

fn limiter<K: std::hash::Hash + Eq + Clone>(
    quota: Option<LoginQuota>,
) -> Option<DefaultKeyedRateLimiter<K>> {
    let quota = quota?;
    let burst = NonZeroU32::new(quota.burst.max(1)).unwrap_or(NonZeroU32::MIN);
    let quota = Quota::with_period(quota.period.max(Duration::from_millis(1)))?.allow_burst(burst);
    Some(RateLimiter::keyed(quota))
}

impl LoginLimits {
    pub fn new(settings: LoginLimitSettings) -> Self {
        Self {
            per_ip: limiter(settings.per_ip),
            per_account: limiter(settings.per_account),
        }
    }

    /// Counts one login attempt from `ip` for `email`; refused when either is over its limit.
    /// An address over its limit does not spend the account's budget.
    pub fn attempt(&self, ip: Option<IpAddr>, email: &str) -> Result<(), Limited> {
        let now = DefaultClock::default().now();
        if let (Some(limiter), Some(ip)) = (&self.per_ip, ip) {
            limiter.check_key(&ip).map_err(|n| Limited {
                retry_after: n.wait_time_from(now),
            })?;
        }
        if let Some(limiter) = &self.per_account {
            limiter
                .check_key(&email.trim().to_lowercase())
                .map_err(|n| Limited {
                    retry_after: n.wait_time_from(now),
                })?;
        }
        Ok(())
    }

    /// Forgets keys whose buckets are full again, every minute until `stop`: memory follows
    /// the attackers of the last minutes, not of all time.
    pub fn prune_until(self: std::sync::Arc<Self>, stop: CancellationToken) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {
                        if let Some(l) = &self.per_ip {
                            l.retain_recent();
                            l.shrink_to_fit();
                        }
                        if let Some(l) = &self.per_account {
                            l.retain_recent();
                            l.shrink_to_fit();
                        }
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(burst: u32, secs: u64) -> Option<LoginQuota> {
        Some(LoginQuota {
            burst,
            period: Duration::from_secs(secs),
        })
    }

    #[test]
    fn each_address_and_each_account_has_its_own_budget() {
        let limits = LoginLimits::new(LoginLimitSettings {
            per_ip: quota(3, 60),
            per_account: quota(5, 60),
        });
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        for _ in 0..3 {
            assert!(limits.attempt(Some(a), "x@corp.example").is_ok());
        }
        let refused = limits
            .attempt(Some(a), "y@corp.example")
            .expect_err("ip over");
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(60)
        );
        // Another address spends the same account's budget: 2 left of 5, case-insensitively.
        assert!(limits.attempt(Some(b), "X@corp.example ").is_ok());
        assert!(limits.attempt(Some(b), "x@corp.example").is_ok());
        assert!(
            limits.attempt(Some(b), "x@corp.example").is_err(),
            "account over"
        );
        // Address b is spent too (3 attempts); another account from a fresh address passes.
        let c: IpAddr = [10, 0, 0, 3].into();
        assert!(
            limits.attempt(Some(c), "z@corp.example").is_ok(),
            "other accounts unaffected"
        );
        // Without a known address only the account limit applies.
        assert!(limits.attempt(None, "w@corp.example").is_ok());

        let off = LoginLimits::new(LoginLimitSettings::disabled());
        for _ in 0..1000 {
            assert!(off.attempt(Some(a), "x@corp.example").is_ok());
        }
    }
}
