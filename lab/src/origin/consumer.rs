//! [V-PROOF] The simulated event consumer, under `/__events/…` on the origin's port: it
//! commits a side effect once per `Idempotency-Key`, answers a repeated key with success and
//! no new effect, and can fail in every way a consumer does — hang, reset before or after
//! committing, 408, 429 with `Retry-After`, 5xx, 400, 401 — for one event, one aggregate or
//! any event, on its first deliveries or at a rate.
//!
//! Its ledger is the drills' ground truth (Jepsen-style): what was committed, by which key,
//! how often each event was delivered, and in which order each aggregate's sequences were
//! committed. A *duplicate side effect* is a second commit for the same `eventId` in the body
//! (which happens only if the edge sent another key for the same event); an *order
//! violation* is a commit whose sequence is not above the aggregate's last committed one.
//!
//! Control: `PUT /__origin/consumer` (rules), `DELETE /__origin/consumer`,
//! `GET /__origin/ledger`, `DELETE /__origin/ledger` (see docs/origin.md).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Longest `Retry-After` (seconds) and latency a consumer fault may ask for.
const MAX_RETRY_AFTER_S: u64 = 3_600;
const MAX_LATENCY_MS: u64 = 600_000;

/// One way of answering a delivery. In JSON: `{"kind": "status", "code": 503}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConsumerFault {
    /// Commit and answer `200`.
    Healthy,
    /// Commit and answer `200`, after `ms` milliseconds.
    Latency { ms: u64 },
    /// Never answer (nothing committed).
    Hang,
    /// Reset the connection before committing.
    Reset,
    /// Commit, then reset the connection: the edge sees a failure for a committed event.
    ResetAfterCommit,
    /// Answer this status (400–599, not 429) without committing.
    Status { code: u16 },
    /// `429` with `Retry-After: retry_after_s`, without committing.
    RateLimited { retry_after_s: u64 },
}

impl ConsumerFault {
    pub fn kind(&self) -> &'static str {
        match self {
            ConsumerFault::Healthy => "healthy",
            ConsumerFault::Latency { .. } => "latency",
            ConsumerFault::Hang => "hang",
            ConsumerFault::Reset => "reset",
            ConsumerFault::ResetAfterCommit => "reset_after_commit",
            ConsumerFault::Status { .. } => "status",
            ConsumerFault::RateLimited { .. } => "rate_limited",
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match *self {
            ConsumerFault::Status { code } if !(400..=599).contains(&code) || code == 429 => Err(
                format!("code: {code} must be 400-599 (use `rate_limited` for 429)"),
            ),
            ConsumerFault::RateLimited { retry_after_s } if retry_after_s > MAX_RETRY_AFTER_S => {
                Err(format!("retry_after_s: at most {MAX_RETRY_AFTER_S}"))
            }
            ConsumerFault::Latency { ms } if ms > MAX_LATENCY_MS => {
                Err(format!("ms: at most {MAX_LATENCY_MS}"))
            }
            _ => Ok(()),
        }
    }
}

/// When a rule applies: which deliveries, and how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerRule {
    /// Only this event (by `eventId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Only this aggregate (by `aggregateId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<String>,
    /// Only an event's first `times` deliveries (all of them when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// The share of matching deliveries it applies to, drawn deterministically from the
    /// event ID and the delivery number (1.0 when absent).
    #[serde(default = "one")]
    pub rate: f64,
    pub fault: ConsumerFault,
}

fn one() -> f64 {
    1.0
}

/// The consumer's rules: the first that applies wins; no rule means healthy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerConfig {
    #[serde(default)]
    pub rules: Vec<ConsumerRule>,
    /// Seeds the rate draws.
    #[serde(default)]
    pub seed: u64,
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (i, r) in self.rules.iter().enumerate() {
            r.fault
                .validate()
                .map_err(|e| format!("rules[{i}].fault.{e}"))?;
            if !(0.0..=1.0).contains(&r.rate) {
                return Err(format!("rules[{i}].rate: {} is outside 0..=1", r.rate));
            }
        }
        Ok(())
    }
}

/// One committed side effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    pub key: String,
    pub event_id: String,
    pub tenant: String,
    pub aggregate: String,
    pub sequence: u64,
    pub committed_at_ms: u64,
}

/// What the consumer has seen and done.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Deliveries received (every attempt that reached the consumer).
    pub deliveries: u64,
    /// Deliveries of a key already committed: acknowledged, no new effect.
    pub duplicates_acknowledged: u64,
    /// Side effects committed.
    pub effects: u64,
    /// Commits beyond the first for the same `eventId` (must stay 0).
    pub duplicate_side_effects: u64,
    /// Commits whose sequence was not above the aggregate's last committed one (must stay 0).
    pub order_violations: u64,
    /// Commits that skipped sequences (expected only where an operator skipped).
    pub gaps: u64,
    /// Deliveries without an `Idempotency-Key` (refused with 400).
    pub missing_key: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Deliveries per event ID.
    pub delivered: BTreeMap<String, u32>,
    /// Every effect, in commit order.
    pub commits: Vec<Effect>,
    /// The first order violations, described.
    pub violations: Vec<String>,
}

#[derive(Default)]
struct Inner {
    config: ConsumerConfig,
    ledger: Ledger,
    keys: BTreeMap<String, usize>,
    by_event: BTreeMap<String, u32>,
    last_seq: BTreeMap<(String, String), u64>,
}

#[derive(Default)]
pub(crate) struct Consumer {
    inner: Mutex<Inner>,
}

/// What one delivery should do, decided when it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub fault: ConsumerFault,
}

/// The delivery's facts, read from its headers and body.
#[derive(Debug, Clone, Default)]
pub(crate) struct Delivery {
    pub key: Option<String>,
    pub event_id: String,
    pub tenant: String,
    pub aggregate: String,
    pub sequence: u64,
}

/// What committing did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    New,
    Duplicate,
    NoKey,
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn draw(seed: u64, event: &str, n: u32, rule: usize) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in event.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let x = mix(h ^ mix(seed) ^ mix(u64::from(n) << 16 | rule as u64));
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Consumer {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn configure(&self, config: ConsumerConfig) {
        self.lock().config = config;
    }

    pub(crate) fn config(&self) -> ConsumerConfig {
        self.lock().config.clone()
    }

    pub(crate) fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    pub(crate) fn reset_ledger(&self) {
        let mut s = self.lock();
        let config = std::mem::take(&mut s.config);
        *s = Inner::default();
        s.config = config;
    }

    /// Counts the delivery and chooses its fault.
    pub(crate) fn begin(&self, d: &Delivery) -> Plan {
        let mut s = self.lock();
        s.ledger.deliveries += 1;
        *s.ledger.delivered.entry(d.event_id.clone()).or_insert(0) += 1;
        let n = {
            let c = s.by_event.entry(d.event_id.clone()).or_insert(0);
            *c += 1;
            *c
        };
        let seed = s.config.seed;
        let fault = s
            .config
            .rules
            .iter()
            .enumerate()
            .find(|(i, r)| {
                r.event.as_deref().is_none_or(|e| e == d.event_id)
                    && r.aggregate.as_deref().is_none_or(|a| a == d.aggregate)
                    && r.times.is_none_or(|t| n <= t)
                    && (r.rate >= 1.0 || draw(seed, &d.event_id, n, *i) < r.rate)
            })
            .map(|(_, r)| r.fault.clone())
            .unwrap_or(ConsumerFault::Healthy);
        if fault != ConsumerFault::Healthy {
            *s.ledger.faults.entry(fault.kind().into()).or_insert(0) += 1;
        }
        Plan { fault }
    }

    /// Commits the delivery's side effect once per key.
    pub(crate) fn commit(&self, d: &Delivery) -> Commit {
        let mut s = self.lock();
        let Some(key) = d.key.clone() else {
            s.ledger.missing_key += 1;
            return Commit::NoKey;
        };
        if s.keys.contains_key(&key) {
            s.ledger.duplicates_acknowledged += 1;
            return Commit::Duplicate;
        }
        if s.ledger.commits.iter().any(|e| e.event_id == d.event_id) {
            s.ledger.duplicate_side_effects += 1;
        }
        let agg = (d.tenant.clone(), d.aggregate.clone());
        let last = s.last_seq.get(&agg).copied().unwrap_or(0);
        if d.sequence <= last {
            s.ledger.order_violations += 1;
            if s.ledger.violations.len() < 20 {
                let v = format!(
                    "{}/{}: sequence {} committed after {last} (event {})",
                    d.tenant, d.aggregate, d.sequence, d.event_id
                );
                s.ledger.violations.push(v);
            }
        } else {
            if d.sequence > last + 1 {
                s.ledger.gaps += 1;
            }
            s.last_seq.insert(agg, d.sequence);
        }
        let index = s.ledger.commits.len();
        s.ledger.commits.push(Effect {
            key: key.clone(),
            event_id: d.event_id.clone(),
            tenant: d.tenant.clone(),
            aggregate: d.aggregate.clone(),
            sequence: d.sequence,
            committed_at_ms: epoch_ms(),
        });
        s.keys.insert(key, index);
        s.ledger.effects += 1;
        Commit::New
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: &str, key: &str, seq: u64) -> Delivery {
        Delivery {
            key: Some(key.into()),
            event_id: id.into(),
            tenant: "acme".into(),
            aggregate: "a".into(),
            sequence: seq,
        }
    }

    #[test]
    fn a_key_commits_once_and_a_new_key_for_the_same_event_is_a_duplicate_effect() {
        let c = Consumer::default();
        assert_eq!(c.commit(&delivery("e1", "e1", 1)), Commit::New);
        assert_eq!(c.commit(&delivery("e1", "e1", 1)), Commit::Duplicate);
        let l = c.ledger();
        assert_eq!(
            (
                l.effects,
                l.duplicates_acknowledged,
                l.duplicate_side_effects
            ),
            (1, 1, 0)
        );
        assert_eq!(c.commit(&delivery("e1", "other-key", 1)), Commit::New);
        assert_eq!(c.ledger().duplicate_side_effects, 1);
        let mut no_key = delivery("e2", "k", 2);
        no_key.key = None;
        assert_eq!(c.commit(&no_key), Commit::NoKey);
    }

    #[test]
    fn sequences_going_back_are_order_violations_and_jumps_are_gaps() {
        let c = Consumer::default();
        c.commit(&delivery("e2", "e2", 2));
        c.commit(&delivery("e1", "e1", 1));
        c.commit(&delivery("e5", "e5", 5));
        let l = c.ledger();
        assert_eq!((l.order_violations, l.gaps), (1, 2));
        assert!(l.violations[0].contains("sequence 1 committed after 2"));
    }

    #[test]
    fn rules_match_by_event_and_first_deliveries_and_rates_are_deterministic() {
        let c = Consumer::default();
        c.configure(ConsumerConfig {
            rules: vec![
                ConsumerRule {
                    event: Some("e1".into()),
                    aggregate: None,
                    times: Some(2),
                    rate: 1.0,
                    fault: ConsumerFault::Status { code: 503 },
                },
                ConsumerRule {
                    event: None,
                    aggregate: None,
                    times: None,
                    rate: 0.5,
                    fault: ConsumerFault::Hang,
                },
            ],
            seed: 7,
        });
        let d = delivery("e1", "e1", 1);
        assert_eq!(c.begin(&d).fault, ConsumerFault::Status { code: 503 });
        assert_eq!(c.begin(&d).fault, ConsumerFault::Status { code: 503 });
        assert_ne!(c.begin(&d).fault, ConsumerFault::Status { code: 503 });
        let hangs = (0..2000)
            .filter(|i| c.begin(&delivery(&format!("x{i}"), "k", 1)).fault == ConsumerFault::Hang)
            .count();
        assert!((850..1150).contains(&hangs), "{hangs}");
        assert_eq!(draw(7, "x1", 1, 1), draw(7, "x1", 1, 1));
    }

    #[test]
    fn configs_are_checked() {
        let bad: ConsumerConfig =
            serde_json::from_str(r#"{"rules":[{"fault":{"kind":"status","code":429}}]}"#).unwrap();
        assert!(bad.validate().unwrap_err().contains("rate_limited"));
        let bad_rate: ConsumerConfig =
            serde_json::from_str(r#"{"rules":[{"rate":2,"fault":{"kind":"hang"}}]}"#).unwrap();
        assert!(bad_rate.validate().is_err());
        assert!(serde_json::from_str::<ConsumerConfig>(
            r#"{"rules":[{"fault":{"kind":"explode"}}]}"#
        )
        .is_err());
    }
}
