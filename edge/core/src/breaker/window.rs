//! A sliding time window of call outcomes: counts and a latency histogram per bucket, in a
//! fixed ring. Recording is O(1); reading sums a fixed number of buckets. Memory does not
//! grow with traffic.

use crate::time::Millis;

/// Buckets per window: the window slides in steps of `window / BUCKETS`.
pub const BUCKETS: usize = 10;
/// Latencies up to this are kept to the millisecond…
const FINE_MS: u64 = 128;
/// …then in steps of this up to `COARSE_END_MS`…
const COARSE_STEP_MS: u64 = 16;
const COARSE_END_MS: u64 = 2048;
const BINS: usize = FINE_MS as usize + ((COARSE_END_MS - FINE_MS) / COARSE_STEP_MS) as usize + 1;
/// …and anything slower (and every failure) in the last bin.
const OVERFLOW: usize = BINS - 1;

#[derive(Debug, Clone)]
struct Bucket {
    epoch: u64,
    calls: u32,
    failures: u32,
    timeouts: u32,
    hist: Box<[u32; BINS]>,
}

/// Totals over the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub calls: u32,
    pub failures: u32,
    /// Failures that were timeouts.
    pub timeouts: u32,
    /// 95th percentile latency in ms (the upper edge of its bin); `u64::MAX` when the
    /// percentile falls among timeouts or calls slower than the histogram's range.
    pub p95_ms: u64,
}

impl Summary {
    pub fn failure_ratio(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failures as f64 / self.calls as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct Window {
    bucket_ms: u64,
    buckets: Vec<Bucket>,
}

fn bin(latency_ms: u64) -> usize {
    if latency_ms < FINE_MS {
        latency_ms as usize
    } else if latency_ms < COARSE_END_MS {
        FINE_MS as usize + ((latency_ms - FINE_MS) / COARSE_STEP_MS) as usize
    } else {
        OVERFLOW
    }
}

/// The smallest latency a bin holds (timeouts: above any).
fn bin_lower(b: usize) -> u64 {
    if b < FINE_MS as usize {
        b as u64
    } else if b < OVERFLOW {
        FINE_MS + (b as u64 - FINE_MS) * COARSE_STEP_MS
    } else {
        u64::MAX
    }
}

/// The largest latency a bin holds.
fn bin_upper(b: usize) -> u64 {
    if b < FINE_MS as usize {
        b as u64
    } else if b < OVERFLOW {
        FINE_MS + (b as u64 - FINE_MS + 1) * COARSE_STEP_MS - 1
    } else {
        u64::MAX
    }
}

impl Window {
    pub fn new(window_ms: u64) -> Window {
        let bucket_ms = (window_ms / BUCKETS as u64).max(1);
        let empty = Bucket {
            epoch: u64::MAX,
            calls: 0,
            failures: 0,
            timeouts: 0,
            hist: Box::new([0; BINS]),
        };
        Window {
            bucket_ms,
            buckets: vec![empty; BUCKETS],
        }
    }

    pub fn clear(&mut self) {
        for b in &mut self.buckets {
            b.epoch = u64::MAX;
        }
    }

    /// Records one call. A timed-out call counts as slower than any latency.
    pub fn record(&mut self, now: Millis, ok: bool, latency_ms: u64, timed_out: bool) {
        let epoch = now.0 / self.bucket_ms;
        let b = &mut self.buckets[(epoch % BUCKETS as u64) as usize];
        if b.epoch != epoch {
            b.epoch = epoch;
            b.calls = 0;
            b.failures = 0;
            b.timeouts = 0;
            b.hist.fill(0);
        }
        b.calls = b.calls.saturating_add(1);
        if !ok {
            b.failures = b.failures.saturating_add(1);
        }
        if timed_out {
            b.timeouts = b.timeouts.saturating_add(1);
        }
        b.hist[if timed_out { OVERFLOW } else { bin(latency_ms) }] += 1;
    }

    /// Calls inside the window at `now` that took longer than `bar_ms` (timeouts always do).
    /// A bin that straddles the bar is not counted: the count never claims more slowness
    /// than was measured.
    pub fn slower_than(&self, now: Millis, bar_ms: u64) -> u32 {
        let current = now.0 / self.bucket_ms;
        let first = (0..BINS)
            .find(|&b| bin_lower(b) > bar_ms)
            .unwrap_or(OVERFLOW);
        self.buckets
            .iter()
            .filter(|b| {
                b.epoch != u64::MAX && b.epoch <= current && current - b.epoch < BUCKETS as u64
            })
            .map(|b| b.hist[first..].iter().sum::<u32>())
            .sum()
    }

    /// Totals over the buckets still inside the window at `now`.
    pub fn summary(&self, now: Millis) -> Summary {
        let current = now.0 / self.bucket_ms;
        let live = |b: &&Bucket| {
            b.epoch != u64::MAX && b.epoch <= current && current - b.epoch < BUCKETS as u64
        };
        let mut s = Summary::default();
        let mut hist = [0u32; BINS];
        for b in self.buckets.iter().filter(live) {
            s.calls += b.calls;
            s.failures += b.failures;
            s.timeouts += b.timeouts;
            for (h, v) in hist.iter_mut().zip(b.hist.iter()) {
                *h += v;
            }
        }
        s.p95_ms = percentile(&hist, s.calls, 0.95);
        s
    }
}

fn percentile(hist: &[u32; BINS], total: u32, q: f64) -> u64 {
    if total == 0 {
        return 0;
    }
    let need = (q * total as f64).ceil() as u64;
    let mut seen = 0u64;
    for (i, c) in hist.iter().enumerate() {
        seen += *c as u64;
        if seen >= need {
            return bin_upper(i);
        }
    }
    u64::MAX
}

/// A plain counter of probe outcomes (the probe window is "since probing began").
#[derive(Debug, Clone)]
pub struct Tally {
    pub calls: u32,
    pub successes: u32,
    pub timeouts: u32,
    hist: Box<[u32; BINS]>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            calls: 0,
            successes: 0,
            timeouts: 0,
            hist: Box::new([0; BINS]),
        }
    }
}

impl Tally {
    pub fn record(&mut self, ok: bool, latency_ms: u64, timed_out: bool) {
        self.calls = self.calls.saturating_add(1);
        if ok {
            self.successes = self.successes.saturating_add(1);
        }
        if timed_out {
            self.timeouts = self.timeouts.saturating_add(1);
        }
        self.hist[if timed_out { OVERFLOW } else { bin(latency_ms) }] += 1;
    }

    pub fn p95_ms(&self) -> u64 {
        percentile(&self.hist, self.calls, 0.95)
    }

    pub fn success_ratio(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.successes as f64 / self.calls as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_is_exact_to_the_millisecond_below_128ms() {
        let mut w = Window::new(30_000);
        for i in 1..=100u64 {
            w.record(Millis(1000), true, i, false);
        }
        let s = w.summary(Millis(1000));
        assert_eq!((s.calls, s.failures, s.p95_ms), (100, 0, 95));
    }

    #[test]
    fn timeouts_are_slower_than_anything_and_fast_failures_are_fast() {
        let mut w = Window::new(30_000);
        for _ in 0..94 {
            w.record(Millis(0), true, 10, false);
        }
        for _ in 0..6 {
            w.record(Millis(0), false, 3, false);
        }
        assert_eq!(w.summary(Millis(0)).p95_ms, 10);
        for _ in 0..6 {
            w.record(Millis(0), false, 45, true);
        }
        assert_eq!(w.summary(Millis(0)).p95_ms, u64::MAX);
        assert_eq!(w.summary(Millis(0)).timeouts, 6);
        assert!((w.summary(Millis(0)).failure_ratio() - 12.0 / 106.0).abs() < 1e-9);
    }

    #[test]
    fn old_buckets_slide_out() {
        let mut w = Window::new(30_000);
        w.record(Millis(0), false, 0, false);
        w.record(Millis(29_999), true, 5, false);
        assert_eq!(w.summary(Millis(29_999)).calls, 2);
        // 3 s buckets: the one holding t=0 leaves the window once t reaches 30 s.
        assert_eq!(w.summary(Millis(30_000)).calls, 1);
        assert_eq!(w.summary(Millis(60_000)).calls, 0);
    }

    #[test]
    fn a_reused_bucket_forgets_its_old_epoch() {
        let mut w = Window::new(10_000);
        w.record(Millis(0), false, 0, false);
        w.record(Millis(10_000), true, 1, false);
        let s = w.summary(Millis(10_000));
        assert_eq!((s.calls, s.failures), (1, 0));
    }

    #[test]
    fn calls_slower_than_a_bar_are_counted_and_a_straddling_bin_is_not() {
        let mut w = Window::new(30_000);
        for ms in [10, 45, 46, 47, 300] {
            w.record(Millis(0), true, ms, false);
        }
        w.record(Millis(0), false, 45, true);
        assert_eq!(
            w.slower_than(Millis(0), 45),
            4,
            "46, 47, 300 and the timeout"
        );
        // 300 ms is in the 288..=303 bin: above a 290 ms bar only partly, so not counted.
        assert_eq!(w.slower_than(Millis(0), 290), 1, "only the timeout");
        assert_eq!(w.slower_than(Millis(40_000), 45), 0, "slid out");
    }

    #[test]
    fn coarse_bins_round_up() {
        let mut t = Tally::default();
        t.record(true, 500, false);
        assert!(t.p95_ms() >= 500 && t.p95_ms() < 516);
    }
}
