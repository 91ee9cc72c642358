//! [F-SCOPE] The coordinator's recent sample and its pace (ADR 011, "Capacity").
//!
//! A coordinator that answers thousands of isolates cannot hear every one each report
//! interval: one Durable Object does about a thousand simple requests a second. So the
//! coordinator sets the pace — the report period it asks of an isolate with something to
//! tell, and the heartbeat of a healthy one — from how many isolates it keeps, and isolates
//! report on slots spread by their IDs. The fleet's window as a sum of every isolate's latest
//! report then lags the onset by up to a pace. Beside it the coordinator keeps the **recent
//! sample**: the reports heard within the last report interval, each weighted by its period
//! over that interval (an isolate that reports every 7 s stands for seven seconds' worth of
//! isolates like it; Horvitz–Thompson). Their windows' weighted ratio estimates the fleet's
//! window as it is now, without favouring the isolates that report more often; seed 000's
//! rule trips on either.

use std::collections::{BTreeMap, VecDeque};

use super::Counts;
use crate::time::Millis;

/// Reports a second the coordinator asks of isolates with something to tell (the pace), and
/// heartbeats a second of healthy ones, at most: with watches and probes' reports, under
/// the thousand requests a second one Durable Object does.
pub const REPORT_RPS: u64 = 450;
pub const HEARTBEAT_RPS: u64 = 150;
/// Fewest reports the sample judges on: a sample is of isolates, and a handful of them in
/// trouble of their own must not open a fleet.
pub const MIN_REPORTS: usize = 25;

/// The report period to ask for with `isolates` kept: at least the policy's interval, and
/// no more than a third of the window (the fleet must hear of an onset within it).
pub fn pace_ms(isolates: usize, interval_ms: u64, window_ms: u64) -> u64 {
    let want = isolates as u64 * 1000 / REPORT_RPS;
    want.max(interval_ms).min((window_ms / 3).max(interval_ms))
}

/// The heartbeat to ask for: ten intervals, longer when many isolates share the
/// coordinator, always well inside the window (an isolate silent for a window is dropped).
pub fn heartbeat_ms(isolates: usize, interval_ms: u64, window_ms: u64) -> u64 {
    let want = (isolates as u64 * 1000 / HEARTBEAT_RPS).max(10 * interval_ms);
    let pace = pace_ms(isolates, interval_ms, window_ms);
    want.min(window_ms * 2 / 3).max(pace)
}

/// Weighted counts of one bucket in the sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Weighted {
    pub calls: f64,
    pub failures: f64,
    pub slow: f64,
    /// Calls as counted, unweighted (the sample must hold `min_calls` real ones).
    pub seen: f64,
}

/// The reports heard within the last interval, weighted.
#[derive(Debug, Default)]
pub struct Sample {
    /// (when it leaves the sample, isolate, seq, weight, buckets).
    queue: VecDeque<(Millis, String, u64, f64, Vec<Counts>)>,
    sums: BTreeMap<u64, Weighted>,
}

impl Sample {
    fn add(&mut self, buckets: &[Counts], w: f64, sign: f64) {
        for b in buckets {
            let s = self.sums.entry(b.epoch).or_default();
            s.calls += sign * w * f64::from(b.calls);
            s.failures += sign * w * f64::from(b.failures);
            s.slow += sign * w * f64::from(b.slow);
            s.seen += sign * f64::from(b.calls);
        }
    }

    /// A report of `isolate` (`seq`) heard at `now`, standing for `period_ms` of reports
    /// against the sample's `span_ms`.
    pub fn heard(
        &mut self,
        now: Millis,
        (isolate, seq): (&str, u64),
        buckets: &[Counts],
        (period_ms, span_ms): (u64, u64),
    ) {
        self.expire(now);
        // The isolate's earlier report in the sample is superseded by this one.
        if let Some(i) = self.queue.iter().position(|q| q.1 == isolate) {
            if let Some((_, _, _, w, old)) = self.queue.remove(i) {
                self.add(&old, w, -1.0);
            }
        }
        let w = period_ms.max(span_ms) as f64 / span_ms.max(1) as f64;
        self.add(buckets, w, 1.0);
        self.queue.push_back((
            now.plus(span_ms),
            isolate.to_string(),
            seq,
            w,
            buckets.to_vec(),
        ));
    }

    /// Drops the reports older than the sample's span.
    pub fn expire(&mut self, now: Millis) {
        while self.queue.front().is_some_and(|q| q.0 <= now) {
            if let Some((_, _, _, w, old)) = self.queue.pop_front() {
                self.add(&old, w, -1.0);
            }
        }
        self.sums.retain(|_, s| s.seen > 0.5);
    }

    /// The sample's weighted totals over epochs `from..=to`.
    pub fn totals(&self, from: u64, to: u64) -> Weighted {
        let mut t = Weighted::default();
        for (_, s) in self.sums.range(from..=to) {
            t.calls += s.calls;
            t.failures += s.failures;
            t.slow += s.slow;
            t.seen += s.seen;
        }
        t
    }

    /// Forgets everything (the fleet just recovered: its window starts afresh).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.sums.clear();
    }

    /// Reports in the sample.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(epoch: u64, calls: u32, slow: u32) -> Counts {
        Counts {
            epoch,
            calls,
            slow,
            ..Counts::default()
        }
    }

    #[test]
    fn the_pace_grows_with_the_isolates_kept_and_stays_inside_the_window() {
        assert_eq!(pace_ms(300, 1_000, 30_000), 1_000);
        assert_eq!(pace_ms(3_500, 1_000, 30_000), 7_777);
        assert_eq!(pace_ms(20_000, 1_000, 30_000), 10_000);
        assert_eq!(heartbeat_ms(300, 1_000, 30_000), 10_000);
        assert_eq!(heartbeat_ms(3_500, 1_000, 30_000), 20_000);
        // Load at the pace and heartbeat for 3,500 isolates: under the budgets.
        assert!(3_500 * 1000 / pace_ms(3_500, 1_000, 30_000) <= REPORT_RPS);
        assert!(3_500 * 1000 / heartbeat_ms(3_500, 1_000, 30_000) <= HEARTBEAT_RPS + 25);
    }

    #[test]
    fn a_report_stands_for_its_period_and_leaves_after_the_span() {
        let mut s = Sample::default();
        s.heard(Millis(1_000), ("a", 1), &[b(1, 10, 10)], (7_000, 1_000));
        s.heard(Millis(1_100), ("b", 1), &[b(1, 10, 0)], (1_000, 1_000));
        let t = s.totals(0, 10);
        assert_eq!((t.calls, t.slow, t.seen), (80.0, 70.0, 20.0));
        // a's next report replaces its first.
        s.heard(Millis(1_500), ("a", 2), &[b(1, 12, 12)], (7_000, 1_000));
        assert_eq!(s.totals(0, 10).calls, 94.0);
        s.expire(Millis(2_100));
        assert_eq!(s.len(), 1);
        s.expire(Millis(2_500));
        assert!(s.is_empty());
        assert_eq!(s.totals(0, 10), Weighted::default());
    }
}
