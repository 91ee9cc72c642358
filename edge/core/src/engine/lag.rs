//! The isolate's scheduling delay: how late its timers fire.
//!
//! Why the engine measures it: a busy or cold isolate takes every answer late by about this
//! much, and the breaker must not count that as the model's latency (docs/outcomes.md,
//! "What the breaker learns from"). Every timer the engine arms says when it wanted to wake;
//! when the driver reports it, the difference is a sample. On the healthy path no timer
//! fires (the model answers first), so the Worker also reports a zero-delay timer it starts
//! at most every [`PROBE_EVERY_MS`] ([`super::Engine::lag_sample`]).
//!
//! The signal is the LARGEST sample of the last second (ten 100 ms buckets), not an
//! average: one stall is what delays the answers queued under it, and the isolate stays
//! known as busy for a second after its last late timer.

use crate::time::Millis;

/// How often at most the Worker's driver starts its zero-delay probe (`io.js` reads it from
/// the wire declaration).
pub const PROBE_EVERY_MS: u64 = 10;

const BUCKET_MS: u64 = 100;
const BUCKETS: usize = 10;

#[derive(Debug, Default, Clone)]
pub struct Lag {
    /// Largest sample per bucket, and the bucket's start.
    max: [u64; BUCKETS],
    at: [u64; BUCKETS],
}

impl Lag {
    /// A timer (or the driver's probe) fired `late_ms` after it was due, at `now`.
    pub fn sample(&mut self, now: Millis, late_ms: u64) {
        let start = now.0 - now.0 % BUCKET_MS;
        let slot = ((now.0 / BUCKET_MS) % BUCKETS as u64) as usize;
        if self.at[slot] != start {
            self.at[slot] = start;
            self.max[slot] = 0;
        }
        self.max[slot] = self.max[slot].max(late_ms);
    }

    /// The largest sample of the second before `now`.
    pub fn recent(&self, now: Millis) -> u64 {
        (0..BUCKETS)
            .filter(|&i| self.at[i] <= now.0 && now.0 - self.at[i] < BUCKETS as u64 * BUCKET_MS)
            .map(|i| self.max[i])
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_late_timer_of_the_last_second_counts_and_then_expires() {
        let mut l = Lag::default();
        assert_eq!(l.recent(Millis(5_000)), 0);
        l.sample(Millis(5_000), 12);
        l.sample(Millis(5_050), 3);
        l.sample(Millis(5_420), 4);
        assert_eq!(l.recent(Millis(5_500)), 12, "the largest, not an average");
        assert_eq!(l.recent(Millis(5_999)), 12);
        assert_eq!(
            l.recent(Millis(6_000)),
            4,
            "the 5,000 bucket left the second"
        );
        assert_eq!(l.recent(Millis(6_500)), 0);
        // A bucket reused a second later starts afresh.
        l.sample(Millis(6_010), 1);
        assert_eq!(l.recent(Millis(6_050)), 4);
    }
}
