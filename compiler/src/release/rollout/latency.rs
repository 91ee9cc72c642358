//! A version's answer latencies as a histogram of geometric buckets, 10% wide: what the
//! local front counts and what the Analytics Engine query groups by (docs/rollout.md, "The
//! queries it sends"), so both drivers give the controller the same shape.
//!
//! Bucket 0 holds answers under 1 ms; bucket `b ≥ 1` holds `[1.1^(b-1), 1.1^b)` ms; the last
//! bucket ([`TOP`]) holds everything from `1.1^(TOP-1)` ms (about 60 s) up. The bucket of a
//! latency is `floor(ln(ms) / ln(1.1)) + 1`, a formula SQL can compute too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The ratio of a bucket's upper edge to its lower edge.
pub const RATIO: f64 = 1.1;
/// The last bucket: 1.1^115 ms is about 57 s.
pub const TOP: u16 = 116;

/// The bucket of a latency in milliseconds (a negative or NaN latency counts as 0 ms).
pub fn bucket(ms: f64) -> u16 {
    if ms.is_nan() || ms < 1.0 {
        return 0;
    }
    let b = (ms.ln() / RATIO.ln()).floor() + 1.0;
    if b >= f64::from(TOP) {
        TOP
    } else {
        b as u16
    }
}

/// The bucket's edges in ms: `[lower, upper)`; the last bucket's upper edge is infinite.
pub fn edges(b: u16) -> (f64, f64) {
    match b {
        0 => (0.0, 1.0),
        b if b >= TOP => (RATIO.powi(i32::from(TOP) - 1), f64::INFINITY),
        b => (RATIO.powi(i32::from(b) - 1), RATIO.powi(i32::from(b))),
    }
}

/// Answers per bucket (absent buckets are empty).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Histogram(pub BTreeMap<u16, u64>);

impl Histogram {
    pub fn of(latencies_ms: impl IntoIterator<Item = f64>) -> Histogram {
        let mut h = Histogram::default();
        for ms in latencies_ms {
            h.add(ms);
        }
        h
    }

    pub fn add(&mut self, ms: f64) {
        *self.0.entry(bucket(ms)).or_default() += 1;
    }

    pub fn count(&self) -> u64 {
        self.0.values().sum()
    }

    /// The `q` quantile (0..=1), read as the upper edge of the bucket it falls in — never an
    /// underestimate; `None` without answers. The last bucket reads as its lower edge.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&b, &k) in &self.0 {
            seen += k;
            if seen >= rank {
                let (lo, hi) = edges(b);
                return Some(if hi.is_finite() { hi } else { lo });
            }
        }
        None
    }

    /// Answers certainly slower than `limit_ms`: in buckets whose lower edge is at or above it.
    pub fn above(&self, limit_ms: f64) -> u64 {
        self.0
            .iter()
            .filter(|(&b, _)| edges(b).0 >= limit_ms)
            .map(|(_, &k)| k)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ten_percent_wide_and_cover_every_latency() {
        assert_eq!(bucket(0.2), 0);
        assert_eq!(bucket(f64::NAN), 0);
        assert_eq!(bucket(1.0), 1);
        assert_eq!(bucket(1e9), TOP);
        for ms in [1.0, 1.05, 7.3, 25.0, 44.9, 45.0, 999.0, 30_000.0] {
            let (lo, hi) = edges(bucket(ms));
            assert!(lo <= ms && ms < hi, "{ms} in [{lo}, {hi})");
        }
    }

    #[test]
    fn the_quantile_never_underestimates_and_above_never_overcounts() {
        let values: Vec<f64> = (1..=1000).map(|i| f64::from(i) / 10.0).collect();
        let h = Histogram::of(values.iter().copied());
        let p95 = h.quantile(0.95).unwrap();
        assert!((95.0..=95.0 * RATIO).contains(&p95), "p95 {p95}");
        let above = h.above(50.0);
        let truly = values.iter().filter(|&&v| v > 50.0).count() as u64;
        assert!(above <= truly && above + 60 >= truly, "{above} of {truly}");
        assert_eq!(Histogram::default().quantile(0.95), None);
    }
}
