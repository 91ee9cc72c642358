//! [E-BREAKER] The circuit breaker: stop paying the deadline on every request of a long
//! outage, and stop making a rate limit worse.
//!
//! Why evaluate lazily from timestamps? A Worker has no background timers: nothing runs
//! between requests. So every transition that "happens after 30 s" is noticed by the first
//! request that arrives after 30 s, which is also the first moment it can matter. State lives
//! in the isolate (see docs/adr/002-per-isolate-breaker.md): each isolate learns on its own.
//!
//! Two modes, from the policy's [`crate::policy::Breaker`]:
//! - [`consecutive`]: seed 002 — open after N consecutive failures, one half-open trial
//!   after the cool-down;
//! - [`rate`]: seed 000 — PRIMARY_HEALTHY → DEGRADED_FALLBACK on a failure ratio or slow
//!   p95 over a sliding window → RECOVERING_PROBE with a fraction of traffic → back.
//!
//! Memory is bounded and each request costs O(1): windows are fixed rings of buckets with
//! fixed latency histograms.

pub mod consecutive;
mod credit;
pub mod fleet;
pub mod member;
pub mod rate;
pub mod window;

use crate::policy;
use crate::time::Millis;

/// What the breaker lets this request do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Call the model normally.
    Call,
    /// Call the model as a trial/probe: its outcome decides recovery.
    Probe,
    /// Do not call the model: answer from the cascade with `BREAKER_OPEN`.
    Reject,
}

impl Admission {
    pub fn calls_origin(self) -> bool {
        !matches!(self, Admission::Reject)
    }
}

/// The mode names operators see (`X-Breaker-Mode`, logs, status endpoint, drills).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Consecutive mode: closed. Rate mode: PRIMARY_HEALTHY.
    Healthy,
    /// Consecutive mode: open. Rate mode: DEGRADED_FALLBACK.
    Open,
    /// Consecutive mode: half-open. Rate mode: RECOVERING_PROBE.
    Probing,
}

impl Mode {
    /// The mode a name of either vocabulary means (`CLOSED` or `PRIMARY_HEALTHY`: healthy);
    /// `None` for any other (`UNKNOWN`).
    pub fn from_name(name: &str) -> Option<Mode> {
        match name {
            "CLOSED" | "PRIMARY_HEALTHY" => Some(Mode::Healthy),
            "OPEN" | "DEGRADED_FALLBACK" => Some(Mode::Open),
            "HALF_OPEN" | "RECOVERING_PROBE" => Some(Mode::Probing),
            _ => None,
        }
    }
}

/// One origin call's outcome as the breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    /// Measured latency; for a timeout, the time waited (its real latency is unknown).
    pub latency_ms: u64,
    /// The call was cut off by its timeout: slower than any measured latency.
    pub timed_out: bool,
}

impl Outcome {
    pub fn success(latency_ms: u64) -> Outcome {
        Outcome {
            ok: true,
            latency_ms,
            timed_out: false,
        }
    }

    pub fn failure(latency_ms: u64) -> Outcome {
        Outcome {
            ok: false,
            latency_ms,
            timed_out: false,
        }
    }

    /// A probe that passed: a success within `bar` (seed 000: a probe that failed or was
    /// slower than `slow_call_p95` aborts probing).
    pub fn passes(&self, bar_ms: u64) -> bool {
        self.ok && !self.timed_out && self.latency_ms <= bar_ms
    }

    pub fn timeout(latency_ms: u64) -> Outcome {
        Outcome {
            ok: false,
            latency_ms,
            timed_out: true,
        }
    }
}

/// A mode change, kept for the status endpoint, logs and drill reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub at: Millis,
    pub from: Mode,
    pub to: Mode,
    /// What the breaker had counted when an outcome moved it; `None` when time alone did
    /// (a hold-down or cool-down ending).
    pub evidence: Option<Evidence>,
}

/// The outcomes behind a transition: the sliding window's totals when it tripped, the
/// probes' when probing ended, the run of failures in consecutive mode. An operator reads
/// here whom the breaker blamed and for what — failures, timeouts, or slowness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence {
    pub calls: u32,
    pub failures: u32,
    /// Failures that were timeouts.
    pub timeouts: u32,
    /// The 95th percentile latency in ms; `None` when it fell among timeouts or calls slower
    /// than the histogram's range, or was not measured (consecutive mode).
    pub p95_ms: Option<u64>,
}

impl Evidence {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "calls": self.calls,
            "failures": self.failures,
            "timeouts": self.timeouts,
            "p95_ms": self.p95_ms,
        })
    }
}

/// How many transitions are remembered.
pub const TRANSITIONS_KEPT: usize = 32;

/// The breaker of one origin, in one isolate.
#[derive(Debug, Clone)]
pub enum Breaker {
    Off,
    Consecutive(consecutive::Consecutive),
    Rate(Box<rate::Rate>),
    /// A rate breaker in fleet scope (ADR 011).
    Fleet(Box<member::Member>),
}

impl Breaker {
    pub fn new(cfg: &policy::Breaker) -> Breaker {
        Breaker::for_service(cfg, "", "")
    }

    /// The breaker of `service`'s origin (a fleet-scoped one reports under the name).
    pub fn for_service(cfg: &policy::Breaker, service: &str, policy_hash: &str) -> Breaker {
        match cfg {
            policy::Breaker::Rate(r) => match &r.scope {
                policy::Scope::Fleet(fleet) => Breaker::Fleet(Box::new(member::Member::new(
                    service,
                    policy_hash,
                    r.clone(),
                    fleet.clone(),
                ))),
                policy::Scope::Isolate => Breaker::Rate(Box::new(rate::Rate::new(r.clone()))),
            },
            policy::Breaker::Off => Breaker::Off,
            policy::Breaker::Consecutive {
                failures,
                cooldown_ms,
            } => Breaker::Consecutive(consecutive::Consecutive::new(*failures, *cooldown_ms)),
        }
    }

    /// Decides whether this request may call the model.
    pub fn admit(&mut self, now: Millis) -> Admission {
        match self {
            Breaker::Off => Admission::Call,
            Breaker::Consecutive(c) => c.admit(now),
            Breaker::Rate(r) => r.admit(now),
            Breaker::Fleet(m) => m.admit(now),
        }
    }

    /// Records the outcome of a call that [`Breaker::admit`] allowed.
    pub fn record(&mut self, now: Millis, admission: Admission, outcome: Outcome) {
        match self {
            Breaker::Off => {}
            Breaker::Consecutive(c) => c.record(now, admission, outcome),
            Breaker::Rate(r) => r.record(now, admission, outcome),
            Breaker::Fleet(m) => m.record(now, admission, outcome),
        }
    }

    /// A call [`Breaker::admit`] allowed ended without news about the origin's health (the
    /// origin refused the caller's request, [`crate::classify::Class::Caller`]): nothing is
    /// recorded, and a probe slot it held is released.
    pub fn release(&mut self, admission: Admission) {
        match self {
            Breaker::Off => {}
            Breaker::Consecutive(c) => c.release(admission),
            Breaker::Rate(r) => r.release(admission),
            Breaker::Fleet(m) => m.release(admission),
        }
    }

    /// The mode as of `now` (transitions due by time are applied first).
    pub fn mode(&mut self, now: Millis) -> Mode {
        match self {
            Breaker::Off => Mode::Healthy,
            Breaker::Consecutive(c) => c.mode(now),
            Breaker::Rate(r) => r.mode(now),
            Breaker::Fleet(m) => m.mode(now),
        }
    }

    /// The mode's name in the seed's vocabulary.
    pub fn mode_name(&mut self, now: Millis) -> &'static str {
        let mode = self.mode(now);
        self.name(mode)
    }

    /// `mode`'s name in this breaker's vocabulary: seed 000's for the rate breaker
    /// (PRIMARY_HEALTHY, DEGRADED_FALLBACK, RECOVERING_PROBE), seed 002's otherwise.
    pub fn name(&self, mode: Mode) -> &'static str {
        match (self, mode) {
            (Breaker::Rate(_) | Breaker::Fleet(_), _) => rate_name(mode),
            (_, Mode::Healthy) => "CLOSED",
            (_, Mode::Open) => "OPEN",
            (_, Mode::Probing) => "HALF_OPEN",
        }
    }

    /// The fleet member, when the breaker is fleet-scoped.
    pub fn member(&mut self) -> Option<&mut member::Member> {
        match self {
            Breaker::Fleet(m) => Some(m),
            _ => None,
        }
    }

    pub fn transitions(&self) -> &[Transition] {
        match self {
            Breaker::Off => &[],
            Breaker::Consecutive(c) => c.transitions(),
            Breaker::Rate(r) => r.transitions(),
            Breaker::Fleet(m) => m.transitions(),
        }
    }
}

/// Seed 000's name of `mode` (PRIMARY_HEALTHY, DEGRADED_FALLBACK, RECOVERING_PROBE).
pub fn rate_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Healthy => "PRIMARY_HEALTHY",
        Mode::Open => "DEGRADED_FALLBACK",
        Mode::Probing => "RECOVERING_PROBE",
    }
}

/// Appends a transition, keeping the last [`TRANSITIONS_KEPT`].
fn log_transition(
    log: &mut Vec<Transition>,
    at: Millis,
    from: Mode,
    to: Mode,
    evidence: Option<Evidence>,
) {
    if from == to {
        return;
    }
    if log.len() == TRANSITIONS_KEPT {
        log.remove(0);
    }
    log.push(Transition {
        at,
        from,
        to,
        evidence,
    });
}
