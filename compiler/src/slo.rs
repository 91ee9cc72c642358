//! [R-GRADUAL] A rollout's SLO and pace (docs/adr/012-rollout-on-workers-versions.md): what the
//! policy's `[rollout]` table and `releases rollout`'s flags set, and what the controller
//! (`release::rollout`) judges with. A leaf module: the policy reader and the release code
//! both use it.

use serde::{Deserialize, Serialize};
use understudy_core::breaker::rate::wilson;

/// The SLO a rollout holds the new version to, against the old, and its pace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Percentages of traffic for the new version, increasing, ending at 100.
    pub steps: Vec<u8>,
    /// Least time at each step before a judgement.
    pub dwell_ms: u64,
    /// Least answers from each version in a step's window before a judgement.
    pub min_answers: u64,
    /// How much worse the new version's degraded share may be (absolute).
    pub degraded_margin: f64,
    /// … its no-tier 5xx share (absolute).
    pub unavailable_margin: f64,
    /// … its p95 latency (relative: 0.2 is 20%).
    pub p95_margin: f64,
    /// Holds in one step before the rollout gives up and rolls back.
    pub max_holds: u32,
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            steps: vec![1, 10, 50, 100],
            dwell_ms: 5 * 60_000,
            // Zero failures in 1,200 answers put the 99% upper bound at 0.45%: under the
            // default no-tier 5xx margin, so a faultless new version can advance at once.
            min_answers: 1_200,
            degraded_margin: 0.02,
            unavailable_margin: 0.005,
            p95_margin: 0.2,
            max_holds: 6,
        }
    }
}

impl Slo {
    /// What is wrong with these settings, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.steps.is_empty() || self.steps.last() != Some(&100) {
            out.push("steps must end at 100".into());
        }
        if self.steps.windows(2).any(|w| w[0] >= w[1]) || self.steps.first() == Some(&0) {
            out.push("steps must increase from above 0".into());
        }
        if self.min_answers == 0 {
            out.push("min_answers must be at least 1".into());
        }
        for (name, m) in [
            ("degraded_margin", self.degraded_margin),
            ("unavailable_margin", self.unavailable_margin),
            ("p95_margin", self.p95_margin),
        ] {
            if !(m.is_finite() && (0.0..=1.0).contains(&m)) {
                out.push(format!("{name} must be within 0..=1"));
            }
        }
        out
    }

    /// The longest a bad release is seen at `rate_rps` in all, with 99% probability: at the
    /// first step's share, until the first judgement with `min_answers` from it. Each
    /// request goes to the new version independently, so the answers it gathers in a time are
    /// a Poisson count: by the time `min + 2.33·√min + 1` are expected, `min` have come with
    /// 99% probability. Judgements come a dwell apart (a thin window holds and is judged
    /// again a dwell later), so that time rounds up to whole dwells.
    pub fn exposure_ms(&self, rate_rps: f64) -> f64 {
        let share = f64::from(self.steps.first().copied().unwrap_or(100)) / 100.0;
        let min = self.min_answers as f64;
        let needed = min + 2.326 * min.sqrt() + 1.0;
        let gather = needed / (rate_rps * share).max(f64::MIN_POSITIVE) * 1000.0;
        let dwell = (self.dwell_ms as f64).max(1.0);
        (gather / dwell).ceil().max(1.0) * dwell
    }
}

/// How many answers with no failure at all a version needs for its share's one-sided 99%
/// upper bound to reach `margin` — the least `min_answers` that lets a faultless release
/// advance at its first judgement; `None` when no number does (a margin of 0).
pub fn answers_to_advance(margin: f64) -> Option<u64> {
    if margin.is_nan() || margin <= 0.0 {
        return None;
    }
    // Zero failures in n: the upper bound is 1 - wilson_lower(n, n); search the least n.
    let (mut lo, mut hi) = (1u64, u64::from(u32::MAX));
    let within = |n: u64| wilson(0, n.min(u64::from(u32::MAX)) as u32).1 <= margin;
    if !within(hi) {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if within(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}
