//! [E-OBSERVE] Counters an isolate keeps: the degraded share by tier and reason is a
//! first-class metric, because a shell that answers 100% of the time can hide a model that
//! has been down for a week (seed 002's "missed consequence").
//!
//! Bounded: tiers and reasons come from the policy and a fixed list, so the maps cannot
//! grow with traffic.

use std::collections::BTreeMap;

use serde::Serialize;

/// The outcomes, one row each, with the name the log line's `outcome` and the data point's
/// `blob2` both use (one vocabulary). The order is docs/observability.md's: the names list
/// is generated from this table, so a new outcome is one row, and the docs test asks for
/// its line.
macro_rules! outcomes {
    ($( $(#[$doc:meta])* $variant:ident $({ $($field:ident),* })? = $name:literal; )*) => {
        /// How one request ended.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Outcome<'a> {
            $( $(#[$doc])* $variant $({ $($field: &'a str),* })?, )*
        }

        impl Outcome<'_> {
            /// The outcome's name (docs/observability.md lists it, a test keeps them equal).
            pub fn name(&self) -> &'static str {
                match self { $( Outcome::$variant { .. } => $name, )* }
            }

            /// Every outcome name, in the order docs/observability.md lists them.
            pub const NAMES: &'static [&'static str] = &[ $( $name, )* ];
        }
    };
}

outcomes! {
    Live = "live";
    Fallback { tier, reason } = "fallback";
    /// 504 / 503 with the envelope.
    Unavailable { reason } = "unavailable";
    /// The origin refused the caller's request and the policy passed its status through.
    OriginRejected = "origin_rejected";
    /// 400: refused before any I/O.
    BadRequest = "bad_request";
    /// 401: token refused.
    Unauthorized = "unauthorized";
    /// 429: retry storm.
    Storm = "storm_limited";
    /// 503: the bake could not be read.
    BakeInvalid = "bake_invalid";
    /// The admin status endpoint (not counted).
    Admin = "admin";
}

/// The isolate's counters (the status endpoint's `counters`): read as a [`Tally`]
/// (`counters.live`, through `Deref`), counted only by the methods below, each named for
/// what happened — no other code writes a count.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Counters(Tally);

impl std::ops::Deref for Counters {
    type Target = Tally;

    fn deref(&self) -> &Tally {
        &self.0
    }
}

/// What [`Counters`] hold, read-only outside them.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Tally {
    pub requests: u64,
    pub live: u64,
    pub degraded: u64,
    pub unavailable: u64,
    pub bad_request: u64,
    pub unauthorized: u64,
    pub storm_limited: u64,
    pub bake_invalid: u64,
    /// Origin 4xx about the caller's request passed through (`origin_rejected`).
    pub origin_rejected: u64,
    /// Origin attempts refused with 401/403: the edge's own credential is wrong. Alert on
    /// any increase — no caller can fix it.
    pub credential_refused: u64,
    /// Origin attempts the breaker did not learn from because the edge, not the model, set
    /// their pace: timed out while the isolate was cold, or timed out by a late timer.
    pub unrecorded: u64,
    /// Origin timeouts held against the model: at once (the isolate calm, the timer on
    /// time), and after the model stayed silent one more timeout-length (a busy isolate).
    pub timeouts_counted: u64,
    pub timeouts_convicted: u64,
    /// Answers the model gave after their attempt's timeout on a busy isolate, heard because
    /// the engine listened for them: the model was alive.
    pub late_answers: u64,
    /// Hedged origin requests sent, and those whose answer was the one used.
    pub hedges_sent: u64,
    pub hedges_won: u64,
    /// Speculative tier reads asked for (the model silent), and those whose request then
    /// did not read that key (the origin answered after all): what they cost in KV reads.
    pub kv_prefetched: u64,
    pub kv_prefetch_unused: u64,
    /// Degraded answers per tier.
    pub by_tier: BTreeMap<String, u64>,
    /// Degraded and unavailable answers per reason (`ML_TIMEOUT`, `BREAKER_OPEN`, …).
    pub by_reason: BTreeMap<String, u64>,
    /// [V-INGEST] Event ingest requests per outcome (`accepted`, `duplicate`, `refused`,
    /// `unavailable`): not part of `requests` or the degraded share.
    pub events: BTreeMap<String, u64>,
}

/// At most this many distinct tier or reason labels are kept (policies have a handful).
const MAX_LABELS: usize = 64;

fn bump(map: &mut BTreeMap<String, u64>, label: &str) {
    if let Some(n) = map.get_mut(label) {
        *n += 1;
    } else if map.len() < MAX_LABELS {
        map.insert(label.to_string(), 1);
    }
}

impl Counters {
    /// Origin attempts the breaker did not learn from (`n` of them).
    pub fn not_recorded(&mut self, n: u32) {
        self.0.unrecorded += u64::from(n);
    }

    /// A timeout held against the model at once.
    pub fn timeout_counted(&mut self) {
        self.0.timeouts_counted += 1;
    }

    /// Timeouts held against the model after it stayed silent (`n` of them).
    pub fn convicted(&mut self, n: u32) {
        self.0.timeouts_convicted += u64::from(n);
    }

    /// An answer came after its attempt's timeout (`heard`: the isolate listened to it).
    pub fn late_answer(&mut self, heard: bool) {
        self.0.late_answers += u64::from(heard);
    }

    /// An origin attempt was refused with 401/403: the edge's own credential
    /// ([`crate::classify::Class::count`]).
    pub fn credential_refused(&mut self) {
        self.0.credential_refused += 1;
    }

    /// A hedge went out.
    pub fn hedge_sent(&mut self) {
        self.0.hedges_sent += 1;
    }

    /// An attempt ended; `won`: with its hedge's answer.
    pub fn hedge_won(&mut self, won: bool) {
        self.0.hedges_won += u64::from(won);
    }

    /// Speculative tier reads asked for (`n` of them).
    pub fn prefetched(&mut self, n: usize) {
        self.0.kv_prefetched += n as u64;
    }

    /// Speculative tier reads whose request did not read that key after all (`n` of them).
    pub fn prefetch_unused(&mut self, n: usize) {
        self.0.kv_prefetch_unused += n as u64;
    }

    pub fn record(&mut self, o: Outcome<'_>) {
        if o == Outcome::Admin {
            return; // operators reading the counters are not traffic
        }
        let t = &mut self.0;
        t.requests += 1;
        match o {
            Outcome::Live => t.live += 1,
            Outcome::Fallback { tier, reason } => {
                t.degraded += 1;
                bump(&mut t.by_tier, tier);
                bump(&mut t.by_reason, reason);
            }
            Outcome::Unavailable { reason } => {
                t.unavailable += 1;
                bump(&mut t.by_reason, reason);
            }
            Outcome::BadRequest => t.bad_request += 1,
            Outcome::Unauthorized => t.unauthorized += 1,
            Outcome::Storm => t.storm_limited += 1,
            Outcome::OriginRejected => t.origin_rejected += 1,
            Outcome::BakeInvalid => t.bake_invalid += 1,
            Outcome::Admin => {}
        }
    }

    /// Counts one event ingest request's outcome.
    pub fn record_event(&mut self, outcome: &str) {
        bump(&mut self.0.events, outcome);
    }

    /// Degraded answers over answers that reached the model-or-fallback decision.
    pub fn degraded_share(&self) -> f64 {
        let answered = self.live + self.degraded + self.unavailable;
        if answered == 0 {
            0.0
        } else {
            (self.degraded + self.unavailable) as f64 / answered as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_share_counts_fallbacks_and_errors_not_bad_requests() {
        let mut c = Counters::default();
        c.record(Outcome::Live);
        c.record(Outcome::Fallback {
            tier: "user",
            reason: "ML_TIMEOUT",
        });
        c.record(Outcome::Fallback {
            tier: "curated",
            reason: "BREAKER_OPEN",
        });
        c.record(Outcome::Unavailable { reason: "ML_5XX" });
        c.record(Outcome::BadRequest);
        assert_eq!(c.requests, 5);
        assert!((c.degraded_share() - 0.75).abs() < 1e-9);
        assert_eq!(c.by_tier.get("user"), Some(&1));
        assert_eq!(c.by_reason.get("ML_5XX"), Some(&1));
    }

    #[test]
    fn labels_are_bounded() {
        let mut c = Counters::default();
        for i in 0..1000 {
            let tier = format!("t{i}");
            c.record(Outcome::Fallback {
                tier: &tier,
                reason: "ML_TIMEOUT",
            });
        }
        assert_eq!(c.by_tier.len(), MAX_LABELS);
        assert_eq!(c.degraded, 1000);
    }
}

/// One request as a Workers Analytics Engine data point. The index is the service (AE
/// samples per index); blobs are low-cardinality labels — never user IDs or tokens — and
/// doubles the figures to sum and average. The field order is the schema documented in
/// docs/observability.md: dashboards query `blob1`…`blob5`, `double1`…`double2`.
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    pub index: String,
    /// release, outcome, tier, reason, breaker mode
    pub blobs: [String; 5],
    /// latency in ms, 1.0 when the answer was degraded (so `SUM(double2)/COUNT()` is the
    /// degraded share), hours left on the baked stubs' validation (-1: no baked catalog)
    pub doubles: [f64; 3],
}

/// [F-SCOPE] What an isolate learnt of the fleet, as a data point with the request points'
/// positions (docs/observability.md): `blob2` is `breaker_fleet` (never an outcome, so the
/// degraded-share queries skip it), `blob3` the event (`verdict`, `lost`, `regained`),
/// `blob4` the fleet verdict's mode (`NONE` without one), `blob5` the isolate's own mode now;
/// `double1` the verdict's calls, `double2` 0, `double3` the isolates it counted.
pub fn fleet_point(
    service: &str,
    release: &str,
    (event, verdict): (&str, &str),
    isolate_mode: &str,
    (calls, isolates): (u32, usize),
) -> DataPoint {
    DataPoint {
        index: service.to_string(),
        blobs: [
            release.to_string(),
            FLEET_POINT.to_string(),
            event.to_string(),
            verdict.to_string(),
            isolate_mode.to_string(),
        ],
        doubles: [f64::from(calls), 0.0, isolates as f64],
    }
}

/// `blob2` of a fleet point.
pub const FLEET_POINT: &str = "breaker_fleet";

pub fn data_point(
    service: &str,
    release: &str,
    outcome: Outcome<'_>,
    latency_ms: u64,
    breaker_mode: &str,
    stubs_left_ms: Option<u64>,
) -> DataPoint {
    let name = outcome.name();
    let (tier, reason, degraded) = match outcome {
        Outcome::Fallback { tier, reason } => (tier, reason, true),
        Outcome::Unavailable { reason } => ("", reason, true),
        _ => ("", "", false),
    };
    DataPoint {
        index: service.to_string(),
        blobs: [
            release.to_string(),
            name.to_string(),
            tier.to_string(),
            reason.to_string(),
            breaker_mode.to_string(),
        ],
        doubles: [
            latency_ms as f64,
            if degraded { 1.0 } else { 0.0 },
            stubs_left_ms.map_or(-1.0, |ms| (ms as f64 / 3_600_000.0 * 100.0).round() / 100.0),
        ],
    }
}

#[cfg(test)]
mod data_point_tests {
    use super::*;

    #[test]
    fn a_fallback_is_labelled_and_counts_as_degraded() {
        let p = data_point(
            "recs",
            "r-1",
            Outcome::Fallback {
                tier: "user",
                reason: "ML_TIMEOUT",
            },
            52,
            "PRIMARY_HEALTHY",
            Some(5_400_000),
        );
        assert_eq!(p.index, "recs");
        assert_eq!(
            p.blobs,
            ["r-1", "fallback", "user", "ML_TIMEOUT", "PRIMARY_HEALTHY"].map(String::from)
        );
        assert_eq!(p.doubles, [52.0, 1.0, 1.5]);
    }

    #[test]
    fn live_and_refused_answers_are_not_degraded() {
        for o in [Outcome::Live, Outcome::BadRequest, Outcome::Storm] {
            assert_eq!(data_point("s", "r", o, 3, "CLOSED", None).doubles[1], 0.0);
        }
        assert_eq!(
            data_point(
                "s",
                "r",
                Outcome::Unavailable { reason: "ML_5XX" },
                3,
                "OPEN",
                None
            )
            .doubles[1],
            1.0
        );
    }
}
