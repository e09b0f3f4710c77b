//! Percentiles of one run's samples, and the median (min–max) of a figure over several runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Latency percentiles of one run, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; `None` without samples (a run that measured nothing must not
    /// look like a fast one).
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let index = ((p / 100.0) * ms.len() as f64).ceil() as usize;
            ms[index.clamp(1, ms.len()) - 1]
        };
        Some(Self {
            count: ms.len(),
            p50: rank(50.0),
            p90: rank(90.0),
            p95: rank(95.0),
            p99: rank(99.0),
            max: ms[ms.len() - 1],
        })
    }
}

/// One figure over several runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Summary {
    /// `None` when no run produced the figure.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            runs: n,
        })
    }
}

/// Durations between two wall-clock stamps, negative ones (clock steps) clamped to zero.
pub fn between(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> Duration {
    (to - from).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let p = Percentiles::of(&samples).expect("samples");
        assert_eq!(
            (p.count, p.p50, p.p90, p.p99, p.max),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        let one = Percentiles::of(&[Duration::from_millis(7)]).expect("one");
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
        assert!(Percentiles::of(&[]).is_none());
    }

    #[test]
    fn summaries_take_the_median_run() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).expect("values");
        assert_eq!((s.median, s.min, s.max, s.runs), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(&[1.0, 4.0]).map(|s| s.median), Some(2.5));
        assert!(Summary::of(&[]).is_none());
    }
}
