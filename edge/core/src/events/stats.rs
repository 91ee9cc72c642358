//! [V-OPS] Event metrics and alerts: attempts, the oldest pending event's age, delivery
//! latency, the retry rate and the dead-letter count — per shard as the outbox keeps them,
//! merged for the status endpoint, with the alerts seed 004 asks for (oldest pending older
//! than 60 s, any dead letter) and held aggregates.

use serde::{Deserialize, Serialize};

use super::outbox::Held;
use crate::policy::events::Alerts;
use crate::time::Millis;

/// Upper bounds (ms) of the delivery-latency histogram's buckets; one more bucket counts
/// everything above the last.
pub const LATENCY_BOUNDS_MS: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000,
];
pub const BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;
/// Held aggregates listed at most (per shard and merged).
pub const MAX_HELD: usize = 50;

/// The bucket a latency falls in.
pub fn bucket(latency_ms: u64) -> usize {
    LATENCY_BOUNDS_MS
        .iter()
        .position(|&b| latency_ms <= b)
        .unwrap_or(LATENCY_BOUNDS_MS.len())
}

/// The outbox's counters, one row each. The shard keeps them as SQL rows by name, so the
/// struct, the list of names and the code that reads a row back or merges two shards come
/// from this one list: a new counter is one row, never a field that `set` or `add` forgot.
macro_rules! tally {
    ($( $(#[$doc:meta])* $field:ident, )*) => {
        /// Counters the outbox adds to, by name (one SQL row each).
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Tally {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl Tally {
            /// Every counter's name (its SQL row), in declaration order.
            pub const NAMES: &'static [&'static str] = &[ $( stringify!($field), )* ];

            /// Sets the counter named `name` (its SQL row); any other name is ignored.
            pub fn set(&mut self, name: &str, v: u64) {
                match name {
                    $( stringify!($field) => self.$field = v, )*
                    _ => {}
                }
            }

            fn add(&mut self, o: &Tally) {
                $( self.$field += o.$field; )*
            }
        }
    };
}

tally! {
    /// Delivery attempts made.
    attempts,
    /// Attempts scheduled again after a retryable failure.
    retries,
    delivered,
    dead_lettered,
    replayed,
    skipped,
}

/// One shard's state, as its `Stats` command reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardStats {
    /// Events in each state now (skipped dead letters are counted apart).
    pub pending: u64,
    pub delivered: u64,
    pub dead_letters: u64,
    pub skipped: u64,
    /// When the oldest pending event was stored.
    pub oldest_pending_stored_at: Option<u64>,
    pub tally: Tally,
    /// Commit-to-acknowledgement latency histogram ([`LATENCY_BOUNDS_MS`]).
    pub latency: Vec<u64>,
    pub held: Vec<Held>,
}

/// An alert that fires, with its rule and the value that fired it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    pub name: &'static str,
    pub message: String,
}

/// The merged view the status endpoint shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub pending: u64,
    pub delivered: u64,
    pub dead_letters: u64,
    pub skipped: u64,
    pub oldest_pending_age_ms: Option<u64>,
    pub attempts: u64,
    pub retries: u64,
    /// Retries over attempts.
    pub retry_rate: f64,
    pub delivered_total: u64,
    pub dead_lettered_total: u64,
    pub replayed_total: u64,
    pub skipped_total: u64,
    /// Bucketed commit-to-acknowledgement latency: the bucket bound at or above the
    /// percentile (`None` with no delivery yet).
    pub delivery_latency_p50_ms: Option<u64>,
    pub delivery_latency_p95_ms: Option<u64>,
    pub latency_bounds_ms: &'static [u64],
    pub latency_histogram: Vec<u64>,
    /// Held aggregates, as [`Held::view`] shows them.
    pub held: Vec<serde_json::Value>,
    pub alerts: Vec<Alert>,
    /// Shards that did not answer (their events are not in these figures).
    pub shards_unreachable: u32,
}

fn percentile(hist: &[u64], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= want {
            return Some(LATENCY_BOUNDS_MS.get(i).copied().unwrap_or(u64::MAX));
        }
    }
    None
}

/// Merges the shards' stats at `now` and evaluates the alerts.
pub fn summarize(now: Millis, shards: &[ShardStats], unreachable: u32, alerts: &Alerts) -> Summary {
    let mut tally = Tally::default();
    let mut hist = vec![0u64; BUCKETS];
    let (mut pending, mut delivered, mut dead, mut skipped) = (0, 0, 0, 0);
    let mut oldest: Option<u64> = None;
    let mut held = Vec::new();
    for s in shards {
        pending += s.pending;
        delivered += s.delivered;
        dead += s.dead_letters;
        skipped += s.skipped;
        tally.add(&s.tally);
        for (h, n) in hist.iter_mut().zip(&s.latency) {
            *h += n;
        }
        if let Some(t) = s.oldest_pending_stored_at {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
        held.extend(s.held.iter().cloned());
    }
    held.truncate(MAX_HELD);
    let age = oldest.map(|t| now.since(Millis(t)));
    let mut fired = Vec::new();
    if let Some(a) = age.filter(|a| *a > alerts.oldest_pending_ms) {
        fired.push(Alert {
            name: "EVENTS_OLDEST_PENDING",
            message: format!(
                "the oldest pending event is {} s old (alert above {} s)",
                a / 1000,
                alerts.oldest_pending_ms / 1000
            ),
        });
    }
    if dead > alerts.dead_letters {
        fired.push(Alert {
            name: "EVENTS_DEAD_LETTERS",
            message: format!(
                "{dead} dead letter(s) wait for replay or skip (alert above {})",
                alerts.dead_letters
            ),
        });
    }
    let gaps = held
        .iter()
        .filter(
            |h| matches!(h, Held::Gap { since, .. } if now.since(Millis(*since)) > alerts.gap_ms),
        )
        .count();
    if gaps > 0 {
        fired.push(Alert {
            name: "EVENTS_PREDECESSOR_MISSING",
            message: format!(
                "{gaps} aggregate(s) wait longer than {} s for a missing sequence",
                alerts.gap_ms / 1000
            ),
        });
    }
    Summary {
        pending,
        delivered,
        dead_letters: dead,
        skipped,
        oldest_pending_age_ms: age,
        attempts: tally.attempts,
        retries: tally.retries,
        retry_rate: if tally.attempts == 0 {
            0.0
        } else {
            tally.retries as f64 / tally.attempts as f64
        },
        delivered_total: tally.delivered,
        dead_lettered_total: tally.dead_lettered,
        replayed_total: tally.replayed,
        skipped_total: tally.skipped,
        delivery_latency_p50_ms: percentile(&hist, 0.5),
        delivery_latency_p95_ms: percentile(&hist, 0.95),
        latency_bounds_ms: &LATENCY_BOUNDS_MS,
        latency_histogram: hist,
        held: held.iter().map(Held::view).collect(),
        alerts: fired,
        shards_unreachable: unreachable,
    }
}

/// One settled delivery attempt as an Analytics Engine data point: blobs release,
/// `event_delivery`, the verdict, the failure class, the event type; doubles the
/// commit-to-acknowledgement latency (0 unless delivered) and the attempt number.
pub fn delivery_point(
    service: &str,
    release: &str,
    s: &super::outbox::Settled,
) -> crate::metrics::DataPoint {
    let r = &s.record;
    let class = if s.verdict == super::outbox::Verdict::Delivered {
        String::new()
    } else {
        r.last_error_class.clone().unwrap_or_default()
    };
    crate::metrics::DataPoint {
        index: service.to_string(),
        blobs: [
            release.to_string(),
            "event_delivery".into(),
            s.verdict.name().into(),
            class,
            r.event_type.clone(),
        ],
        // double3 is the stubs' hours left on request points; events carry none (-1).
        doubles: [
            s.latency_ms.unwrap_or(0) as f64,
            f64::from(r.attempts),
            -1.0,
        ],
    }
}

/// A shard's backlog after an alarm run, as two data points: `event_backlog` (pending
/// events, age of the oldest in ms) and `event_dead_letters` (dead letters, held
/// aggregates). The alert rules in docs/events.md query them.
pub fn backlog_points(
    service: &str,
    release: &str,
    now: Millis,
    s: &ShardStats,
) -> [crate::metrics::DataPoint; 2] {
    let age = s
        .oldest_pending_stored_at
        .map(|t| now.since(Millis(t)))
        .unwrap_or(0);
    let point = |kind: &str, a: f64, b: f64| crate::metrics::DataPoint {
        index: service.to_string(),
        blobs: [
            release.to_string(),
            kind.to_string(),
            String::new(),
            String::new(),
            String::new(),
        ],
        doubles: [a, b, -1.0],
    };
    [
        point("event_backlog", s.pending as f64, age as f64),
        point(
            "event_dead_letters",
            s.dead_letters as f64,
            s.held.len() as f64,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::testing::events_policy;

    #[test]
    fn alerts_fire_on_an_old_pending_event_and_on_any_dead_letter() {
        let alerts = events_policy().alerts;
        let quiet = ShardStats {
            pending: 2,
            oldest_pending_stored_at: Some(100_000),
            ..Default::default()
        };
        let s = summarize(Millis(150_000), std::slice::from_ref(&quiet), 0, &alerts);
        assert!(s.alerts.is_empty(), "{:?}", s.alerts);
        assert_eq!(s.oldest_pending_age_ms, Some(50_000));
        let s = summarize(Millis(160_001), &[quiet], 0, &alerts);
        assert_eq!(s.alerts[0].name, "EVENTS_OLDEST_PENDING");
        let dead = ShardStats {
            dead_letters: 1,
            ..Default::default()
        };
        let s = summarize(Millis(0), &[dead], 0, &alerts);
        assert_eq!(s.alerts[0].name, "EVENTS_DEAD_LETTERS");
    }

    #[test]
    fn shards_merge_and_percentiles_come_from_the_histogram() {
        let mut a = ShardStats {
            latency: vec![0; BUCKETS],
            ..Default::default()
        };
        a.latency[bucket(40)] = 90; // ≤ 50 ms
        a.tally.attempts = 100;
        a.tally.retries = 10;
        let mut b = a.clone();
        b.latency = vec![0; BUCKETS];
        b.latency[bucket(20_000)] = 10; // ≤ 30 s
        b.tally = Tally::default();
        let s = summarize(Millis(0), &[a, b], 1, &events_policy().alerts);
        assert_eq!(s.delivery_latency_p50_ms, Some(50));
        assert_eq!(s.delivery_latency_p95_ms, Some(30_000));
        assert!((s.retry_rate - 0.1).abs() < 1e-9);
        assert_eq!(s.shards_unreachable, 1);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(10_000_000), BUCKETS - 1);
    }
}
