//! A drill's figures — latency percentiles, answers by source, tier and reason, send lag,
//! throughput — as pure functions of the observations, so `drill.json` can be recomputed
//! and every figure is unit-tested on synthetic results.

use std::collections::BTreeMap;

use serde::Serialize;

use super::observe::Observed;

/// Nearest-rank percentile (the same rank rule as `simulate`'s table).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Latency {
    /// How many values.
    pub n: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Latency {
        let mut v: Vec<f64> = values.into_iter().collect();
        v.sort_by(f64::total_cmp);
        Latency {
            n: v.len(),
            p50_ms: percentile(&v, 0.50),
            p95_ms: percentile(&v, 0.95),
            p99_ms: percentile(&v, 0.99),
            max_ms: v.last().copied().unwrap_or(0.0),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub requests: u64,
    pub answered: u64,
    pub live: u64,
    pub degraded: u64,
    pub errors: u64,
    pub degraded_share: f64,
    pub by_tier: BTreeMap<String, u64>,
    pub by_reason: BTreeMap<String, u64>,
    pub latency: Latency,
    /// Latency of degraded answers only.
    pub degraded_latency: Latency,
    /// How late requests left compared to their schedule (all connections busy).
    pub send_lag: Latency,
    /// Answers per second over the run.
    pub throughput_rps: f64,
    pub duration_ms: f64,
}

pub fn figures(obs: &[Observed]) -> Figures {
    let mut f = Figures {
        requests: obs.len() as u64,
        ..Figures::default()
    };
    for o in obs {
        if o.status != 0 {
            f.answered += 1;
        }
        if o.is_live() {
            f.live += 1;
        } else if o.is_degraded() && o.status == 200 {
            f.degraded += 1;
            *f.by_tier
                .entry(o.headers.tier.clone().unwrap_or_default())
                .or_default() += 1;
        } else {
            f.errors += 1;
        }
        if let Some(r) = &o.headers.reason {
            *f.by_reason.entry(r.clone()).or_default() += 1;
        }
    }
    f.degraded_share = if f.requests == 0 {
        0.0
    } else {
        f.degraded as f64 / f.requests as f64
    };
    f.latency = Latency::of(obs.iter().filter(|o| o.status != 0).map(|o| o.latency_ms));
    f.degraded_latency = Latency::of(obs.iter().filter(|o| o.is_degraded()).map(|o| o.latency_ms));
    f.send_lag = Latency::of(obs.iter().map(|o| (o.sent_ms - o.scheduled_ms).max(0.0)));
    let first = obs.iter().map(|o| o.sent_ms).fold(f64::INFINITY, f64::min);
    let last = obs
        .iter()
        .map(|o| o.sent_ms + o.latency_ms)
        .fold(0.0, f64::max);
    f.duration_ms = if obs.is_empty() { 0.0 } else { last - first };
    f.throughput_rps = if f.duration_ms > 0.0 {
        f.answered as f64 * 1000.0 / f.duration_ms
    } else {
        0.0
    };
    f
}

#[cfg(test)]
mod tests {
    use super::super::observe::fixtures::{fallback, live};
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.50), 50.0);
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        let l = Latency::of([3.0, 1.0, 2.0]);
        assert_eq!((l.p50_ms, l.max_ms), (2.0, 3.0));
    }

    #[test]
    fn figures_count_sources_reasons_and_throughput() {
        let obs = vec![
            live(0, 0.0, 10.0),
            fallback(1, 100.0, 50.0),
            fallback(2, 200.0, 50.0),
            live(3, 300.0, 700.0),
        ];
        let f = figures(&obs);
        assert_eq!((f.live, f.degraded, f.errors), (2, 2, 0));
        assert_eq!(f.by_tier.get("curated"), Some(&2));
        assert_eq!(f.by_reason.get("ML_TIMEOUT"), Some(&2));
        assert!((f.degraded_share - 0.5).abs() < 1e-9);
        assert_eq!(f.duration_ms, 1000.0);
        assert!((f.throughput_rps - 4.0).abs() < 1e-9);
    }
}
