//! The isolate's absolute counts per bucket of its window: what a report carries.

use super::super::fleet::Counts;
use super::super::window::BUCKETS;
use super::super::Outcome;
use crate::policy::RateBreaker;
use crate::time::Millis;

/// The isolate's absolute counts per bucket of the window, as a report carries them.
#[derive(Debug, Clone)]
pub struct Ledger {
    bucket_ms: u64,
    ring: [Counts; BUCKETS + 1],
}

impl Ledger {
    pub fn new(window_ms: u64) -> Ledger {
        Ledger {
            bucket_ms: (window_ms / BUCKETS as u64).max(1),
            ring: [Counts {
                epoch: u64::MAX,
                ..Counts::default()
            }; BUCKETS + 1],
        }
    }

    fn bucket(&mut self, now: Millis) -> &mut Counts {
        let epoch = now.0 / self.bucket_ms;
        let b = &mut self.ring[(epoch % (BUCKETS as u64 + 1)) as usize];
        if b.epoch != epoch {
            *b = Counts {
                epoch,
                ..Counts::default()
            };
        }
        b
    }

    /// Counts one call (`probe`: a probe) with the breaker's bars.
    pub fn record(&mut self, now: Millis, probe: bool, outcome: Outcome, cfg: &RateBreaker) {
        let slow = |bar: u64| outcome.timed_out || outcome.latency_ms > bar;
        let b = self.bucket(now);
        let add = |x: &mut u32, yes: bool| *x = x.saturating_add(u32::from(yes));
        if probe {
            add(&mut b.probes, true);
            add(&mut b.probe_ok, outcome.ok && !slow(cfg.slow_call_p95_ms));
            add(&mut b.probe_slow, slow(cfg.probe_p95_ms));
        } else {
            add(&mut b.calls, true);
            add(&mut b.failures, !outcome.ok);
            add(&mut b.timeouts, outcome.timed_out);
            add(&mut b.slow, slow(cfg.slow_call_p95_ms));
        }
    }

    /// The buckets inside the window at `now` that counted anything, oldest first.
    pub fn buckets(&self, now: Millis) -> Vec<Counts> {
        let current = now.0 / self.bucket_ms;
        let mut v: Vec<Counts> = self
            .ring
            .iter()
            .filter(|b| {
                b.epoch != u64::MAX
                    && b.epoch <= current
                    && current - b.epoch < BUCKETS as u64
                    && (b.calls > 0 || b.probes > 0)
            })
            .copied()
            .collect();
        crate::sort::sort_by_key(&mut v, |b| b.epoch);
        v
    }

    /// Whether anything failed or was slow in the bucket of `now` or the one before.
    pub(super) fn troubled(&self, now: Millis) -> bool {
        let current = now.0 / self.bucket_ms;
        self.ring.iter().any(|b| {
            b.epoch != u64::MAX
                && b.epoch <= current
                && current - b.epoch <= 1
                && (b.failures > 0 || b.slow > 0 || b.probes > b.probe_ok)
        })
    }
}
