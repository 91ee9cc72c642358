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

use serde::Serialize;
use understudy_core::breaker::Mode;
use understudy_core::policy::{Policy, Promise, TierKind};

pub use super::figures::{figures, percentile, Figures, Latency};
use super::limits::Limits;
use super::observe::{mode_kind, Observed, SeenTransition};

pub const ALERT_STALLED: &str = "ALERT_RECOVERY_PROBE_STALLED";

/// Requests sent this close to the fault's end may reach the origin after it (the edge's own
/// delay): they are not held to "every answer degraded".
pub const FAULT_END_GUARD_MS: f64 = 50.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub name: &'static str,
    /// `None`: not checked (the limit is absent, or the edge did not expose what it needs).
    pub ok: Option<bool>,
    pub detail: String,
}

impl Verdict {
    fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Verdict {
        Verdict {
            name,
            ok: Some(ok),
            detail: detail.into(),
        }
    }

    fn skipped(name: &'static str, detail: impl Into<String>) -> Verdict {
        Verdict {
            name,
            ok: None,
            detail: detail.into(),
        }
    }

    pub fn broken(&self) -> bool {
        self.ok == Some(false)
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
}

impl Context<'_> {
    /// What a scaled run's recovery limits must add back. The time scale shrinks the
    /// breaker's clocks, but not the delay before it trips (its minimum calls at the
    /// arrival rate, plus the deadline), and every later clock starts from that trip: a run
    /// at scale F is late by `trip × (1 − F)` compared with the full run shrunk by F.
    pub fn unscaled_ms(&self, degraded_after_ms: Option<f64>) -> f64 {
        degraded_after_ms.map_or(0.0, |d| d * (1.0 - self.time_scale.clamp(0.0, 1.0)))
    }
}

/// Share of live answers that counts as normal again. Not 100%: on the healthy path an
/// isolated call can still miss the deadline (a scheduler stall, a GC pause) and be answered
/// from the cascade — disclosed, and no sign that the incident goes on.
pub const NORMAL_LIVE_SHARE: f64 = 0.99;

/// When answers were normal again after the fault: the scheduled time of the first live
/// answer after the fault's end from which at least [`NORMAL_LIVE_SHARE`] of all later
/// answers are live (None: never, within the run).
pub fn normalized_at(obs: &[Observed], fault_end: f64) -> Option<f64> {
    let mut after: Vec<&Observed> = obs.iter().filter(|o| o.sent_ms >= fault_end).collect();
    after.sort_by_key(|o| o.index);
    let mut live_suffix = 0usize;
    let mut at = None;
    for (n, o) in after.iter().enumerate().rev() {
        if o.is_live() {
            live_suffix += 1;
            let len = after.len() - n;
            if live_suffix as f64 >= NORMAL_LIVE_SHARE * len as f64 {
                at = Some(o.scheduled_ms);
            }
        }
    }
    at
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recovery {
    /// First transition into the degraded mode, ms after the fault's onset.
    pub degraded_after_ms: Option<f64>,
    /// Last transition back to healthy, ms after the fault's end.
    pub breaker_healthy_after_ms: Option<f64>,
    /// Every answer live again, ms after the fault's end.
    pub normalized_after_ms: Option<f64>,
    /// The later of the two: the recovery time the limits and the alert use.
    pub recovered_after_ms: Option<f64>,
    /// How long the run went on after the fault's end.
    pub observed_after_end_ms: f64,
    pub alerts: Vec<String>,
}

pub fn recovery(obs: &[Observed], cx: &Context<'_>) -> Recovery {
    let Some((start, end)) = cx.fault else {
        return Recovery::default();
    };
    let kind = |t: &SeenTransition| mode_kind(t.to);
    let degraded_after_ms = cx
        .transitions
        .iter()
        .filter(|t| kind(t) == Some(Mode::Open) && t.at_ms >= start)
        .map(|t| t.at_ms - start)
        .reduce(f64::min);
    let breaker_healthy_after_ms = if cx.breaker_visible {
        cx.transitions
            .iter()
            .filter(|t| kind(t) == Some(Mode::Healthy) && t.at_ms >= end)
            .map(|t| t.at_ms - end)
            .reduce(f64::max)
    } else {
        None
    };
    let normalized_after_ms = normalized_at(obs, end).map(|t| (t - end).max(0.0));
    let last = obs
        .iter()
        .map(|o| o.sent_ms + o.latency_ms)
        .fold(0.0, f64::max);
    let observed_after_end_ms = (last - end).max(0.0);
    // With a visible breaker, recovered means the breaker is healthy AND answers are live.
    let recovered_after_ms = match (
        cx.breaker_visible,
        breaker_healthy_after_ms,
        normalized_after_ms,
    ) {
        (true, Some(b), Some(n)) => Some(b.max(n)),
        (true, None, Some(n)) if breaker_healthy_at_end(cx) => Some(n),
        (true, _, _) => None,
        (false, _, n) => n,
    };
    let stall_ms = cx.limits.stalled_after_ms as f64 + cx.unscaled_ms(degraded_after_ms);
    let stalled = match recovered_after_ms {
        Some(r) => r > stall_ms,
        None => observed_after_end_ms >= stall_ms,
    };
    let alerts = if stalled {
        vec![ALERT_STALLED.to_string()]
    } else {
        Vec::new()
    };
    Recovery {
        degraded_after_ms,
        breaker_healthy_after_ms,
        normalized_after_ms,
        recovered_after_ms,
        observed_after_end_ms,
        alerts,
    }
}

/// The breaker never left healthy after the fault (e.g. a fault too short to trip it).
fn breaker_healthy_at_end(cx: &Context<'_>) -> bool {
    cx.transitions
        .last()
        .is_none_or(|t| mode_kind(t.to) == Some(Mode::Healthy))
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

fn can_always_answer(policy: &Policy) -> bool {
    policy.cascade.promise == Promise::AlwaysAnswer
        || policy
            .cascade
            .tiers
            .iter()
            .any(|t| matches!(t.kind, TierKind::Embedded(_)))
}

fn first_few(v: &[String]) -> String {
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
    let mut out = Vec::new();

    let unanswered: Vec<String> = obs
        .iter()
        .filter(|o| o.status == 0)
        .map(|o| {
            format!(
                "request {}: {}",
                o.index,
                o.error.as_deref().unwrap_or("no answer")
            )
        })
        .collect();
    out.push(Verdict::new(
        "ANSWERED",
        unanswered.is_empty(),
        if unanswered.is_empty() {
            format!("{} of {} answered", obs.len(), obs.len())
        } else {
            first_few(&unanswered)
        },
    ));

    let undisclosed: Vec<String> = obs
        .iter()
        .filter(|o| o.status != 0 && (o.is_degraded() || o.status == 503 || o.status == 504))
        .filter_map(|o| {
            let gaps = disclosure_gaps(o);
            (!gaps.is_empty()).then(|| {
                format!(
                    "request {} (HTTP {}) lacks {}",
                    o.index,
                    o.status,
                    gaps.join(", ")
                )
            })
        })
        .collect();
    let degraded = obs.iter().filter(|o| o.is_degraded()).count();
    out.push(Verdict::new(
        "DISCLOSED",
        undisclosed.is_empty(),
        if undisclosed.is_empty() {
            format!("{degraded} degraded answers, all fully disclosed")
        } else {
            first_few(&undisclosed)
        },
    ));

    let always = can_always_answer(cx.policy);
    let empty: Vec<String> = obs
        .iter()
        .filter(|o| o.status != 0)
        .filter(|o| {
            let empty_body = o.items.is_none_or(|n| n == 0);
            if o.status == 200 {
                empty_body
            } else {
                always
            }
        })
        .map(|o| {
            format!(
                "request {} (HTTP {}, {} items)",
                o.index,
                o.status,
                o.items.map_or("no".into(), |n| n.to_string())
            )
        })
        .collect();
    out.push(Verdict::new(
        "NOT_EMPTY",
        empty.is_empty(),
        if empty.is_empty() {
            "every answer has items".to_string()
        } else {
            first_few(&empty)
        },
    ));

    let lat = Latency::of(obs.iter().filter(|o| o.status != 0).map(|o| o.latency_ms));
    let ceiling = cx.policy.budget.total_ms as f64 + cx.slack_ms;
    let over = obs
        .iter()
        .filter(|o| o.status != 0 && o.latency_ms > ceiling)
        .count();
    out.push(Verdict::new(
        "LATENCY_BUDGET",
        lat.p99_ms <= ceiling,
        format!(
            "p99 {:.1} ms vs budget {} ms + slack {:.1} ms = {:.1} ms ({over} answers over it, max {:.1} ms)",
            lat.p99_ms, cx.policy.budget.total_ms, cx.slack_ms, ceiling, lat.max_ms
        ),
    ));

    match cx.limits.p95_max_ms {
        Some(max) => out.push(Verdict::new(
            "P95_MAX",
            lat.p95_ms <= max as f64,
            format!("p95 {:.1} ms, limit {max} ms", lat.p95_ms),
        )),
        None => out.push(Verdict::skipped("P95_MAX", "no [drill] p95_max")),
    }

    match (cx.limits.degrade_within_ms, cx.fault) {
        (Some(limit), Some((start, end))) => {
            let from = start + limit as f64;
            let live_in_fault: Vec<String> = obs
                .iter()
                .filter(|o| {
                    o.sent_ms >= from && o.sent_ms < end - FAULT_END_GUARD_MS && !o.is_degraded()
                })
                .map(|o| {
                    format!(
                        "request {} at {:.0} ms was not degraded",
                        o.index, o.sent_ms
                    )
                })
                .collect();
            let in_fault = obs
                .iter()
                .filter(|o| o.sent_ms >= from && o.sent_ms < end - FAULT_END_GUARD_MS)
                .count();
            let breaker = match (cx.breaker_visible, rec.degraded_after_ms) {
                (true, Some(d)) if d <= limit as f64 => Ok(format!(
                    "breaker degraded {d:.0} ms after onset (limit {limit} ms)"
                )),
                (true, Some(d)) => Err(format!(
                    "breaker degraded {d:.0} ms after onset, limit {limit} ms"
                )),
                (true, None) => Err("the breaker never entered its degraded mode".to_string()),
                (false, _) => {
                    Ok("breaker mode not exposed by the edge: transition not checked".to_string())
                }
            };
            let ok = live_in_fault.is_empty() && breaker.is_ok();
            let mut detail = match &breaker {
                Ok(s) | Err(s) => s.clone(),
            };
            detail.push_str(&format!(
                "; {} of {in_fault} answers during the fault disclosed",
                in_fault - live_in_fault.len()
            ));
            if !live_in_fault.is_empty() {
                detail.push_str(&format!(": {}", first_few(&live_in_fault)));
            }
            out.push(Verdict::new("DEGRADE_WITHIN", ok, detail));
        }
        _ => out.push(Verdict::skipped(
            "DEGRADE_WITHIN",
            "no [drill] degrade_within or no fault",
        )),
    }

    match (cx.limits.recover_within_ms, cx.fault) {
        (Some(limit), Some(_)) => {
            let extra = cx.unscaled_ms(rec.degraded_after_ms);
            let allowed = limit as f64 + extra;
            let shown = if extra > 0.0 {
                format!("{limit} ms + {extra:.0} ms unscaled trip delay")
            } else {
                format!("{limit} ms")
            };
            let (ok, detail) = match rec.recovered_after_ms {
                Some(r) => (
                    r <= allowed,
                    format!("healthy {r:.0} ms after the fault's end (limit {shown})"),
                ),
                None => (
                    false,
                    format!(
                        "not healthy again in the {:.0} ms observed after the fault's end",
                        rec.observed_after_end_ms
                    ),
                ),
            };
            out.push(Verdict::new("RECOVER_WITHIN", ok, detail));
        }
        _ => out.push(Verdict::skipped(
            "RECOVER_WITHIN",
            "no [drill] recover_within or no fault",
        )),
    }

    match (cx.user_probes, cx.limits.recover_within_ms, cx.fault) {
        (Some(probes), Some(limit), Some(_)) if !probes.is_empty() => {
            let tier = write_through_tier(cx.policy).unwrap_or_default();
            let stale: Vec<String> = probes
                .iter()
                .filter(|p| {
                    let fresh = p
                        .age_s
                        .is_some_and(|a| (a * 1000) as f64 <= p.since_fault_end_ms);
                    let on_time = p.age_s.is_some_and(|a| {
                        p.since_fault_end_ms - (a * 1000 + 999) as f64 <= limit as f64
                    });
                    p.tier.as_deref() != Some(tier.as_str()) || !fresh || !on_time
                })
                .map(|p| {
                    format!(
                        "user {} answered by {:?}, age {:?} s, {:.0} ms after the fault's end",
                        p.user, p.tier, p.age_s, p.since_fault_end_ms
                    )
                })
                .collect();
            out.push(Verdict::new(
                "USER_TIER_REPOPULATED",
                stale.is_empty(),
                if stale.is_empty() {
                    format!("{} users answered from `{tier}` with entries written after the fault's end", probes.len())
                } else {
                    first_few(&stale)
                },
            ));
        }
        (Some(_), Some(_), Some(_)) => out.push(Verdict::new(
            "USER_TIER_REPOPULATED",
            false,
            "no user was answered live after the fault: nothing to repopulate from",
        )),
        _ => out.push(Verdict::skipped(
            "USER_TIER_REPOPULATED",
            "no write-through tier, no recover_within, or no fault",
        )),
    }
    out
}

/// The policy's first KV tier that live answers are written to.
pub fn write_through_tier(policy: &Policy) -> Option<String> {
    policy
        .cascade
        .tiers
        .iter()
        .find(|t| matches!(&t.kind, TierKind::Kv(k) if k.write_through))
        .map(|t| t.name.clone())
}

#[cfg(test)]
mod tests {
    use super::super::observe::fixtures::{fallback, live};
    use super::*;

    fn policy() -> Policy {
        understudy_compiler::fixtures::sample_policy()
    }

    fn cx<'a>(
        p: &'a Policy,
        limits: Limits,
        fault: Option<(f64, f64)>,
        tr: &'a [SeenTransition],
    ) -> Context<'a> {
        Context {
            policy: p,
            limits,
            fault,
            transitions: tr,
            breaker_visible: !tr.is_empty(),
            slack_ms: 10.0,
            user_probes: None,
            time_scale: 1.0,
        }
    }

    fn verdict<'v>(v: &'v [Verdict], name: &str) -> &'v Verdict {
        v.iter().find(|x| x.name == name).expect("verdict present")
    }

    #[test]
    fn a_fallback_missing_any_disclosure_breaks_disclosed() {
        let p = policy();
        let mut bad = fallback(1, 0.0, 50.0);
        bad.headers.retry_after = None;
        bad.body_personalized = Some(true);
        let obs = vec![live(0, 0.0, 10.0), bad];
        let v = check(
            &obs,
            &cx(&p, Limits::default(), None, &[]),
            &Recovery::default(),
        );
        let d = verdict(&v, "DISCLOSED");
        assert!(d.broken());
        assert!(
            d.detail.contains("Retry-After") && d.detail.contains("is_personalized: false"),
            "{}",
            d.detail
        );
        // A "live" answer that says it came from a fallback is caught too.
        let mut liar = live(2, 0.0, 10.0);
        liar.headers.source = Some("fallback".into());
        let v = check(
            &[liar],
            &cx(&p, Limits::default(), None, &[]),
            &Recovery::default(),
        );
        assert!(verdict(&v, "DISCLOSED").broken());
    }

    #[test]
    fn empty_answers_and_errors_break_not_empty_when_a_tier_could_answer() {
        let p = policy();
        let mut empty = fallback(0, 0.0, 50.0);
        empty.items = Some(0);
        let mut err = fallback(1, 0.0, 50.0);
        err.status = 504;
        let v = check(
            &[empty, err],
            &cx(&p, Limits::default(), None, &[]),
            &Recovery::default(),
        );
        let d = verdict(&v, "NOT_EMPTY");
        assert!(
            d.broken() && d.detail.contains("request 0") && d.detail.contains("request 1"),
            "{}",
            d.detail
        );
    }

    #[test]
    fn latency_limits_use_p99_plus_slack_and_p95() {
        let p = policy();
        let budget = p.budget.total_ms as f64;
        let obs: Vec<Observed> = (0..100)
            .map(|i| live(i, i as f64, if i < 95 { 20.0 } else { budget + 30.0 }))
            .collect();
        let limits = Limits {
            p95_max_ms: Some(25),
            ..Limits::default()
        };
        let v = check(&obs, &cx(&p, limits, None, &[]), &Recovery::default());
        assert!(
            verdict(&v, "LATENCY_BUDGET").broken(),
            "p99 is budget + 30 > budget + 10"
        );
        assert_eq!(verdict(&v, "P95_MAX").ok, Some(true));
        let ok: Vec<Observed> = (0..100).map(|i| live(i, i as f64, budget + 5.0)).collect();
        let v = check(
            &ok,
            &cx(&p, Limits::default(), None, &[]),
            &Recovery::default(),
        );
        assert_eq!(verdict(&v, "LATENCY_BUDGET").ok, Some(true));
        assert_eq!(verdict(&v, "P95_MAX").ok, None);
    }

    /// Seed 000's recovery drill in miniature: fault 1–5 s, breaker degrades at 1.1 s and
    /// is healthy at 6 s; answers live again from 6 s.
    fn incident(healthy_at: f64) -> (Vec<Observed>, Vec<SeenTransition>) {
        let mut obs = Vec::new();
        for i in 0..90u64 {
            let t = i as f64 * 100.0;
            obs.push(if (1000.0..healthy_at).contains(&t) {
                fallback(i, t, 48.0)
            } else {
                live(i, t, 30.0)
            });
        }
        let tr = vec![
            SeenTransition {
                at_ms: 1100.0,
                from: "PRIMARY_HEALTHY",
                to: "DEGRADED_FALLBACK",
            },
            SeenTransition {
                at_ms: 2500.0,
                from: "DEGRADED_FALLBACK",
                to: "RECOVERING_PROBE",
            },
            SeenTransition {
                at_ms: healthy_at,
                from: "RECOVERING_PROBE",
                to: "PRIMARY_HEALTHY",
            },
        ];
        (obs, tr)
    }

    #[test]
    fn degrade_and_recover_within_their_limits() {
        let p = policy();
        let (obs, tr) = incident(6000.0);
        let limits = Limits {
            degrade_within_ms: Some(300),
            recover_within_ms: Some(2000),
            stalled_after_ms: 3000,
            p95_max_ms: None,
        };
        let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
        let rec = recovery(&obs, &c);
        assert_eq!(rec.degraded_after_ms, Some(100.0));
        assert_eq!(rec.breaker_healthy_after_ms, Some(1000.0));
        assert_eq!(rec.normalized_after_ms, Some(1000.0));
        assert!(rec.alerts.is_empty());
        let v = check(&obs, &c, &rec);
        assert_eq!(
            verdict(&v, "DEGRADE_WITHIN").ok,
            Some(true),
            "{}",
            verdict(&v, "DEGRADE_WITHIN").detail
        );
        assert_eq!(verdict(&v, "RECOVER_WITHIN").ok, Some(true));
    }

    #[test]
    fn a_slow_recovery_breaks_recover_within_and_raises_the_stall_alert() {
        let p = policy();
        let (obs, tr) = incident(8500.0);
        let limits = Limits {
            degrade_within_ms: Some(50),
            recover_within_ms: Some(2000),
            stalled_after_ms: 3000,
            p95_max_ms: None,
        };
        let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
        let rec = recovery(&obs, &c);
        assert_eq!(rec.recovered_after_ms, Some(3500.0));
        assert_eq!(rec.alerts, vec![ALERT_STALLED.to_string()]);
        let v = check(&obs, &c, &rec);
        assert!(verdict(&v, "RECOVER_WITHIN").broken());
        // At time scale 0.5 the 100 ms trip delay was not halved: 50 ms more are allowed,
        // still not enough for 3.5 s against 2 s.
        let mut half = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
        half.time_scale = 0.5;
        assert_eq!(half.unscaled_ms(rec.degraded_after_ms), 50.0);
        assert!(verdict(&check(&obs, &half, &rec), "RECOVER_WITHIN").broken());
        let d = verdict(&v, "DEGRADE_WITHIN");
        assert!(
            d.broken() && d.detail.contains("100 ms after onset"),
            "{}",
            d.detail
        );
    }

    #[test]
    fn a_live_answer_during_the_fault_breaks_degrade_within() {
        let p = policy();
        let (mut obs, tr) = incident(6000.0);
        obs[30] = live(30, 3000.0, 30.0);
        let limits = Limits {
            degrade_within_ms: Some(300),
            ..Limits::default()
        };
        let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
        let v = check(&obs, &c, &recovery(&obs, &c));
        let d = verdict(&v, "DEGRADE_WITHIN");
        assert!(
            d.broken() && d.detail.contains("request 30"),
            "{}",
            d.detail
        );
    }

    #[test]
    fn an_isolated_deadline_miss_after_recovery_does_not_delay_normalisation() {
        let (mut obs, _) = incident(6000.0);
        obs[80] = fallback(80, 8000.0, 48.0);
        let (head, tail) = obs.split_at(60);
        let mut many = head.to_vec();
        for i in 0..200u64 {
            let mut o = tail[(i as usize) % tail.len()].clone();
            o.index = 60 + i;
            o.scheduled_ms = 6000.0 + i as f64 * 10.0;
            o.sent_ms = o.scheduled_ms;
            many.push(if i == 50 {
                fallback(60 + i, o.sent_ms, 48.0)
            } else {
                live(60 + i, o.sent_ms, 30.0)
            });
        }
        assert_eq!(normalized_at(&many, 5000.0), Some(6000.0));
        // Mostly degraded after the end: not normal.
        let bad: Vec<Observed> = (0..100u64)
            .map(|i| {
                if i % 2 == 0 {
                    live(i, 6000.0 + i as f64, 30.0)
                } else {
                    fallback(i, 6000.0 + i as f64, 48.0)
                }
            })
            .collect();
        assert_eq!(normalized_at(&bad, 5000.0), None);
    }

    #[test]
    fn without_a_visible_breaker_recovery_is_read_from_the_answers() {
        let p = policy();
        let (obs, _) = incident(6000.0);
        let limits = Limits {
            recover_within_ms: Some(2000),
            ..Limits {
                stalled_after_ms: 60_000,
                ..Limits::default()
            }
        };
        let c = cx(&p, limits, Some((1000.0, 5000.0)), &[]);
        let rec = recovery(&obs, &c);
        assert_eq!(rec.recovered_after_ms, Some(1000.0));
        assert_eq!(rec.breaker_healthy_after_ms, None);
    }

    #[test]
    fn user_tier_entries_must_be_newer_than_the_fault() {
        let mut p = policy();
        if let Some(TierKind::Kv(k)) = p
            .cascade
            .tiers
            .iter_mut()
            .map(|t| &mut t.kind)
            .find(|k| matches!(k, TierKind::Kv(_)))
        {
            k.write_through = true;
        }
        let Some(tier) = write_through_tier(&p) else {
            panic!("sample policy has a KV tier")
        };
        let (obs, tr) = incident(6000.0);
        let limits = Limits {
            recover_within_ms: Some(2000),
            stalled_after_ms: 3000,
            ..Limits::default()
        };
        let fresh = [UserProbe {
            user: "u1".into(),
            tier: Some(tier.clone()),
            age_s: Some(2),
            since_fault_end_ms: 3500.0,
        }];
        let mut c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
        c.user_probes = Some(&fresh);
        let v = check(&obs, &c, &recovery(&obs, &c));
        assert_eq!(verdict(&v, "USER_TIER_REPOPULATED").ok, Some(true));
        let old = [UserProbe {
            user: "u1".into(),
            tier: Some(tier),
            age_s: Some(3600),
            since_fault_end_ms: 3500.0,
        }];
        c.user_probes = Some(&old);
        let v = check(&obs, &c, &recovery(&obs, &c));
        assert!(verdict(&v, "USER_TIER_REPOPULATED").broken());
    }
}
