//! The drill's invariants, as pure functions of what was observed — so each
//! check is unit-tested on synthetic results, and a drill's verdict is reproducible from
//! its `drill.json`.
//!
//! Each invariant has a stable name printed when it breaks (the exit code is 1):
//! - `ANSWERED`: every request got an HTTP answer (seed 000: zero dropped connections).
//! - `DISCLOSED`: every degraded answer carries the full disclosure [E-DISCLOSE] — the
//!   headers, `is_personalized: false`, `degraded: true` — and no fallback claims to be live.
//! - `NOT_EMPTY`: no empty answer (or 503/504) where the policy has a tier that can answer.
//! - `LATENCY_BUDGET`: p99 within the policy's total budget plus the measured transport slack.
//! - `P95_MAX`: p95 within `[drill] p95_max`.
//! - `DEGRADE_WITHIN`: the breaker degraded within `[drill] degrade_within` of the fault's
//!   onset, and from then to the fault's end every answer said `X-Degraded: true`.
//! - `RECOVER_WITHIN`: healthy again (the breaker, and ≥ 99% of answers live from then on)
//!   within `recover_within` of the end.
//! - `USER_TIER_REPOPULATED`: users answered live after recovery have fresh user-tier entries.
//!
//! A check that breaks is judged ([`blame`]): its offending answers are blamed on the edge
//! (the verdict fails, the exit code is 1) or excused by stalls of the host the witness saw
//! (the verdict is inconclusive, the exit code 3 when nothing failed).

use serde::Serialize;
use understudy_core::policy::{Policy, Promise};

pub mod blame;
pub mod compared;
mod invariants;
mod late_recovery;
mod moves;
mod recovery;

pub use super::figures::{figures, percentile, Figures, Latency};
use super::limits::Limits;
use super::observe::{IsolateSeen, Observed, SeenTransition};
use crate::witness::Stalls;
pub use blame::{Excused, Judgement, Offender};
pub use recovery::{normalized_at, recovery, Recovery, NORMAL_LIVE_SHARE};

pub const ALERT_STALLED: &str = "ALERT_RECOVERY_PROBE_STALLED";

/// Requests sent this close to the fault's end may reach the origin after it (the edge's own
/// delay): they are not held to "every answer degraded".
pub const FAULT_END_GUARD_MS: f64 = 50.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub name: &'static str,
    /// Whether the check held as measured; `None`: not checked (the limit is absent, or the
    /// edge did not expose what it needs).
    pub ok: Option<bool>,
    /// What a check that did not hold comes to: failed (the edge is to blame) or
    /// inconclusive (stalls of the host explain every answer that broke it).
    pub judgement: Judgement,
    pub detail: String,
    /// The offenders blamed on the edge (the first [`blame::LISTED`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blamed: Vec<Offender>,
    #[serde(skip_serializing_if = "is_zero")]
    pub blamed_count: usize,
    /// The offenders stalls excused, with the stalls (the first [`blame::LISTED`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excused: Vec<Excused>,
    #[serde(skip_serializing_if = "is_zero")]
    pub excused_count: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Verdict {
    /// A verdict as measured; one that broke is failed until [`Verdict::judged`] looks at
    /// why.
    pub fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Verdict {
        Verdict {
            name,
            ok: Some(ok),
            judgement: if ok {
                Judgement::Held
            } else {
                Judgement::Failed
            },
            detail: detail.into(),
            blamed: Vec::new(),
            blamed_count: 0,
            excused: Vec::new(),
            excused_count: 0,
        }
    }

    pub fn skipped(name: &'static str, detail: impl Into<String>) -> Verdict {
        Verdict {
            ok: None,
            judgement: Judgement::NotChecked,
            ..Verdict::new(name, true, detail)
        }
    }

    /// Broken, and the edge is to blame.
    pub fn broken(&self) -> bool {
        self.judgement == Judgement::Failed
    }

    /// Broken only by answers that stalls of the host explain.
    pub fn inconclusive(&self) -> bool {
        self.judgement == Judgement::Inconclusive
    }
}

/// One probe of the user tier after the run: the model cut, a request as `user`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserProbe {
    pub user: String,
    pub tier: Option<String>,
    /// `X-Result-Age` (whole seconds).
    pub age_s: Option<u64>,
    /// ms between the fault's end and this probe.
    pub since_fault_end_ms: f64,
    /// When it was sent (ms after the first arrival) and how long its answer took.
    pub sent_ms: f64,
    pub latency_ms: f64,
}

/// Everything the checks need besides the observations.
pub struct Context<'a> {
    pub policy: &'a Policy,
    pub limits: Limits,
    /// The fault window, ms after the first arrival.
    pub fault: Option<(f64, f64)>,
    /// Breaker transitions as reported by the edge (empty: none, or not exposed).
    pub transitions: &'a [SeenTransition],
    /// Whether the edge exposed its breaker mode at all.
    pub breaker_visible: bool,
    /// Transport and runtime overhead allowed on top of the budget (measured).
    pub slack_ms: f64,
    /// `None`: not probed (no write-through tier, or no recovery).
    pub user_probes: Option<&'a [UserProbe]>,
    /// `--time-scale` (1 for a full-length run).
    pub time_scale: f64,
    /// The stalls of the host the witness saw.
    pub stalls: &'a Stalls,
    /// The model's latency when it is healthy (the scenario's `[model] latency`).
    pub healthy_model_ms: f64,
    /// `--isolates K` (K > 1): each isolate's requests and transitions; empty for one.
    pub isolates: &'a [IsolateSeen],
}

impl Context<'_> {
    /// What a scaled run's recovery limits must add back. The time scale shrinks the
    /// breaker's clocks, but not the delay before it trips (its minimum calls at the
    /// arrival rate, plus the deadline), and every later clock starts from that trip: a run
    /// at scale F is late by `trip × (1 − F)` compared with the full run shrunk by F.
    pub fn unscaled_ms(&self, degraded_after_ms: Option<f64>) -> f64 {
        degraded_after_ms.map_or(0.0, |d| d * (1.0 - self.time_scale.clamp(0.0, 1.0)))
    }

    /// The same for what follows the breaker's close: the answers it lets through settle
    /// (connections gone cold in the outage, the write-through's first puts, a stall of the
    /// host) in the host's time, which the time scale does not shrink either. A run at scale
    /// F that settled `s` ms after its breaker closed is late by `s × (1 − F)` compared with
    /// the full run shrunk by F (seen: `drill --isolates 8` at 0.1, the breaker closed 4.15 s
    /// after the fault's end and five deadline misses across the isolates 0.8–0.95 s later).
    /// A breaker that opens again is not settling: its last close is what `breaker_healthy`
    /// measures, on the breaker's clock.
    pub fn unscaled_settle_ms(&self, breaker_healthy: Option<f64>, recovered: Option<f64>) -> f64 {
        match (breaker_healthy, recovered) {
            (Some(healthy), Some(recovered)) if recovered > healthy => {
                (recovered - healthy) * (1.0 - self.time_scale.clamp(0.0, 1.0))
            }
            _ => 0.0,
        }
    }
}

fn has(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|s| !s.trim().is_empty())
}

/// What is missing from a degraded answer's disclosure (empty: complete).
pub fn disclosure_gaps(o: &Observed) -> Vec<&'static str> {
    let h = &o.headers;
    let mut gaps = Vec::new();
    if o.status == 200 {
        if h.degraded.as_deref() != Some("true") {
            gaps.push("X-Degraded: true");
        }
        if h.source.as_deref() != Some("fallback") {
            gaps.push("X-Result-Source: fallback");
        }
        if !has(&h.tier) {
            gaps.push("X-Fallback-Tier");
        }
        if !has(&h.age) {
            gaps.push("X-Result-Age");
        }
        if o.body_personalized != Some(false) {
            gaps.push("is_personalized: false");
        }
        if o.body_degraded != Some(true) {
            gaps.push("degraded: true");
        }
    }
    for (name, v) in [
        ("X-Degraded-Reason", &h.reason),
        ("Retry-After", &h.retry_after),
        ("Cache-Control", &h.cache_control),
        ("X-Policy-Version", &h.policy_version),
        ("X-Correlation-ID", &h.correlation_id),
    ] {
        if !has(v) {
            gaps.push(name);
        }
    }
    gaps
}

pub(super) fn can_always_answer(policy: &Policy) -> bool {
    policy.cascade.promise == Promise::AlwaysAnswer
        || policy.cascade.tiers.iter().any(|t| t.kind.local())
}

pub(super) fn first_few(v: &[String]) -> String {
    let n = v.len();
    let shown: Vec<&str> = v.iter().take(5).map(String::as_str).collect();
    if n > 5 {
        format!("{} (and {} more)", shown.join("; "), n - 5)
    } else {
        shown.join("; ")
    }
}

/// Checks every invariant; the caller exits non-zero when any is broken.
pub fn check(obs: &[Observed], cx: &Context<'_>, rec: &Recovery) -> Vec<Verdict> {
    let lat = Latency::of(obs.iter().filter(|o| o.status != 0).map(|o| o.latency_ms));
    vec![
        invariants::answered(obs),
        invariants::disclosed(obs),
        invariants::not_empty(obs, cx),
        invariants::latency_budget(obs, cx, &lat),
        invariants::deadline_kept(obs, cx),
        invariants::p95_max(obs, cx, &lat),
        invariants::degrade_within(obs, cx, rec),
        invariants::recover_within(obs, cx, rec),
        invariants::user_tier_repopulated(cx, rec),
    ]
}

/// The policy's first tier that live answers are written to.
pub fn write_through_tier(policy: &Policy) -> Option<String> {
    policy
        .cascade
        .tiers
        .iter()
        .find(|t| t.kind.write_through().is_some())
        .map(|t| t.name.clone())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_blame;
