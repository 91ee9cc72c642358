//! Why `RECOVER_WITHIN` broke: the answers that made the recovery late, for each isolate
//! that was late (the one isolate, or each of `--isolates K`).
//!
//! A recovery is late for two reasons, each with its offenders:
//! - **the breaker closed late**: a probing that began after the fault's end — every probe
//!   met a healthy model — failed, and re-armed the hold. Its offenders are its slow probes
//!   (a live probe over the probe bar, late by what it was over) and its timed-out probes
//!   (late by the deadline less the healthy model's latency: what the host must have taken).
//!   Set aside, the first such probing would have passed and the breaker closed as long
//!   after it as its successful probing took (or, with none in the run, the policy's
//!   `probe_min_calls` at the probe fraction of the isolate's arrivals): only if that is in
//!   time are the probes the cause. A breaker late with no such probing is blamed as it is.
//! - **answers were not live again in time** after the breaker's close: its offenders are
//!   the misses after the close (a deadline miss on a healthy model, late by the deadline
//!   less the model's latency; any other miss is not a matter of time). Set aside, the
//!   misses count as live and the recovery is measured again.

use understudy_core::breaker::Mode;
use understudy_core::policy::{Breaker, Scope};

use super::blame::{excused_requests, Excused, Offender};
use super::recovery::{normalized_at_with, recovery, Recovery};
use super::{Context, Verdict};
use crate::drill::observe::{mode_kind, Observed, SeenTransition};

/// A probe may be sent this long before the transition into probing that it caused is
/// logged (the isolate logs it when it handles the request).
const PROBE_LEAD_MS: f64 = 50.0;

/// One isolate's share of the run.
struct Unit<'a> {
    name: String,
    obs: Vec<&'a Observed>,
    transitions: &'a [SeenTransition],
}

/// What one late isolate needs to be in time, given the excused offenders.
struct Late {
    /// The breaker's close had a cause: every one of these must be excused.
    probes: Option<Vec<u64>>,
    /// When the breaker would have closed had the first failed probing passed (ms after the
    /// fault's end).
    close_if_passed: Option<f64>,
    breaker_ms: Option<f64>,
    allowed: f64,
    obs: Vec<Observed>,
    end: f64,
}

impl Late {
    /// Whether the isolate is in time with `excused` set aside: its breaker closes when the
    /// first failed probing would have passed (if its probes are all excused), and its
    /// answers settle after that as they settled after the real close, the excused misses
    /// counted as live.
    fn in_time(&self, excused: &std::collections::HashSet<u64>) -> bool {
        let breaker = match (&self.probes, self.close_if_passed) {
            (Some(p), Some(close)) if p.iter().all(|i| excused.contains(i)) => close,
            (Some(_), _) => return false,
            (None, _) => self.breaker_ms.unwrap_or(0.0),
        };
        let closed_at = self.end + self.breaker_ms.unwrap_or(0.0);
        let after: Vec<Observed> = self
            .obs
            .iter()
            .filter(|o| o.sent_ms >= closed_at)
            .cloned()
            .collect();
        normalized_at_with(&after, closed_at, |o| {
            o.is_live() || excused.contains(&o.index)
        })
        .is_some_and(|t| breaker + (t - closed_at).max(0.0) <= self.allowed)
    }
}

pub fn judge(v: Verdict, obs: &[Observed], cx: &Context<'_>, rec: &Recovery) -> Verdict {
    let (Some(limit), Some((_, end))) = (cx.limits.recover_within_ms, cx.fault) else {
        return v;
    };
    if v.ok != Some(false) {
        return v;
    }
    let units: Vec<Unit> = if cx.isolates.len() > 1 {
        let by_index: std::collections::HashMap<u64, &Observed> =
            obs.iter().map(|o| (o.index, o)).collect();
        cx.isolates
            .iter()
            .enumerate()
            .map(|(i, iso)| Unit {
                name: format!("isolate {i}'s breaker"),
                obs: iso
                    .requests
                    .iter()
                    .filter_map(|r| by_index.get(r).copied())
                    .collect(),
                transitions: &iso.transitions,
            })
            .collect()
    } else {
        vec![Unit {
            name: "the breaker".into(),
            obs: obs.iter().collect(),
            transitions: cx.transitions,
        }]
    };
    let fleet = fleet_scope(cx);
    let mut offenders = Vec::new();
    let mut lates = Vec::new();
    for u in &units {
        let mine: Vec<Observed> = u.obs.iter().map(|o| (*o).clone()).collect();
        let cxu = Context {
            transitions: u.transitions,
            ..*cx
        };
        let r = if units.len() > 1 {
            recovery(&mine, &cxu)
        } else {
            rec.clone()
        };
        let allowed = limit as f64
            + cx.unscaled_ms(r.degraded_after_ms)
            + cx.unscaled_settle_ms(r.breaker_healthy_after_ms, r.recovered_after_ms);
        if r.recovered_after_ms.is_some_and(|x| x <= allowed) {
            continue;
        }
        let mut late = Late {
            probes: None,
            close_if_passed: None,
            breaker_ms: r.breaker_healthy_after_ms,
            allowed,
            obs: mine,
            end,
        };
        let breaker_late = cx.breaker_visible
            && r.breaker_healthy_after_ms.is_none_or(|b| b > allowed)
            && !(r.breaker_healthy_after_ms.is_none() && r.recovered_after_ms.is_some());
        if breaker_late {
            // Probes of the fleet's probing come from every isolate in fleet scope.
            let pool: Vec<&Observed> = if fleet {
                obs.iter().collect()
            } else {
                u.obs.clone()
            };
            let failed = failed_probings(u.transitions, end);
            let at = end
                + r.breaker_healthy_after_ms
                    .unwrap_or(r.observed_after_end_ms);
            if failed.is_empty() {
                offenders.push(Offender::not_timing(
                    format!(
                        "{}: {} with no probing failed after the fault's end to explain it",
                        u.name,
                        r.breaker_healthy_after_ms
                            .map_or("never healthy again".to_string(), |b| format!(
                                "healthy {b:.0} ms after the fault's end"
                            ))
                    ),
                    None,
                    at,
                ));
            } else {
                let mut ids = Vec::new();
                for &(p0, t1) in &failed {
                    let probes = slow_probes(&pool, p0, t1, cx);
                    if probes.is_empty() {
                        offenders.push(Offender::not_timing(
                            format!(
                                "{}: a probing failed at {t1:.0} ms with no slow probe seen",
                                u.name
                            ),
                            None,
                            t1,
                        ));
                    }
                    ids.extend(probes.iter().filter_map(|o| o.index));
                    offenders.extend(probes);
                }
                let took = probing_took(u.transitions, cx, &u.obs);
                let close = failed[0].0 + took - end;
                if close > allowed {
                    offenders.push(Offender::not_timing(
                        format!(
                            "{}: had its first probing after the fault's end (at {:.0} ms) passed, it would have closed {close:.0} ms after the fault's end, past the limit",
                            u.name, failed[0].0
                        ),
                        None,
                        failed[0].0,
                    ));
                }
                late.probes = Some(ids);
                late.close_if_passed = Some(close);
            }
        }
        // Misses after the breaker's (last) close.
        let closed_at = end + r.breaker_healthy_after_ms.unwrap_or(0.0);
        let deadline = cx.policy.budget.deadline_ms as f64;
        let needed = deadline - cx.healthy_model_ms;
        for o in u
            .obs
            .iter()
            .filter(|o| o.sent_ms >= closed_at && !o.is_live())
        {
            if o.headers.reason.as_deref() == Some("ML_TIMEOUT") && needed > 0.0 {
                offenders.push(Offender::late(
                    format!(
                        "request {} (a deadline miss {:.0} ms after the fault's end, {:.1} ms)",
                        o.index,
                        o.sent_ms - end,
                        o.latency_ms
                    ),
                    Some(o.index),
                    o.sent_ms,
                    o.sent_ms + o.latency_ms,
                    needed,
                ));
            } else {
                offenders.push(Offender::not_timing(
                    format!(
                        "request {} (HTTP {}, {}) not live {:.0} ms after the fault's end",
                        o.index,
                        o.status,
                        o.headers.reason.as_deref().unwrap_or("-"),
                        o.sent_ms - end
                    ),
                    Some(o.index),
                    o.sent_ms,
                ));
            }
        }
        lates.push(late);
    }
    if lates.is_empty() {
        // Every isolate was in time: the answers of the whole run were late to settle.
        let closed_at = end + rec.breaker_healthy_after_ms.unwrap_or(0.0);
        let deadline = cx.policy.budget.deadline_ms as f64;
        let needed = deadline - cx.healthy_model_ms;
        for o in obs
            .iter()
            .filter(|o| o.sent_ms >= closed_at && !o.is_live())
        {
            offenders.push(
                if o.headers.reason.as_deref() == Some("ML_TIMEOUT") && needed > 0.0 {
                    Offender::late(
                        format!(
                            "request {} (a deadline miss, {:.1} ms)",
                            o.index, o.latency_ms
                        ),
                        Some(o.index),
                        o.sent_ms,
                        o.sent_ms + o.latency_ms,
                        needed,
                    )
                } else {
                    Offender::not_timing(
                        format!("request {} not live", o.index),
                        Some(o.index),
                        o.sent_ms,
                    )
                },
            );
        }
        lates.push(Late {
            probes: None,
            close_if_passed: None,
            breaker_ms: rec.breaker_healthy_after_ms,
            allowed: limit as f64
                + cx.unscaled_ms(rec.degraded_after_ms)
                + cx.unscaled_settle_ms(rec.breaker_healthy_after_ms, rec.recovered_after_ms),
            obs: obs.to_vec(),
            end,
        });
    }
    let blamed_outright = offenders
        .iter()
        .any(|o| o.late_ms.is_none() && o.index.is_none());
    v.judged(offenders, cx.stalls, |excused: &[Excused]| {
        let set = excused_requests(excused);
        !blamed_outright && lates.iter().all(|l| l.in_time(&set))
    })
}

/// What explains an isolate's breaker going through other episodes than an ideal host's
/// would: its probings that began after the fault's end and failed, as their slow and
/// timed-out probes (from `pool`), or a probing with none named as it is. `None`: no probing
/// failed after the fault's end.
pub fn failed_probing_offenders(
    pool: &[&Observed],
    transitions: &[SeenTransition],
    cx: &Context<'_>,
    who: &str,
) -> Option<Vec<Offender>> {
    let (_, end) = cx.fault?;
    let failed = failed_probings(transitions, end);
    if failed.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (p0, t1) in failed {
        let probes = slow_probes(pool, p0, t1, cx);
        if probes.is_empty() {
            out.push(Offender::not_timing(
                format!("{who}: a probing failed at {t1:.0} ms with no slow probe seen"),
                None,
                t1,
            ));
        }
        out.extend(probes);
    }
    Some(out)
}

/// Whether the policy's breaker decides on the fleet's evidence (its probes are then any
/// isolate's).
pub fn fleet_scope(cx: &Context<'_>) -> bool {
    matches!(&cx.policy.breaker, Breaker::Rate(r) if matches!(r.scope, Scope::Fleet(_)))
}

/// The probings that began at or after `end` and failed: (began, failed) on the drill's
/// clock.
fn failed_probings(transitions: &[SeenTransition], end: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut began = None;
    for t in transitions {
        match mode_kind(t.to) {
            Some(Mode::Probing) => began = Some(t.at_ms),
            Some(Mode::Open) => {
                if let Some(p0) = began.take().filter(|p0| *p0 >= end) {
                    out.push((p0, t.at_ms));
                }
            }
            _ => began = None,
        }
    }
    out
}

/// The slow and timed-out probes sent in a probing `[p0, t1]`.
fn slow_probes(pool: &[&Observed], p0: f64, t1: f64, cx: &Context<'_>) -> Vec<Offender> {
    let bar = match &cx.policy.breaker {
        Breaker::Rate(r) => r.probe_p95_ms as f64,
        _ => f64::INFINITY,
    };
    let needed = cx.policy.budget.deadline_ms as f64 - cx.healthy_model_ms;
    pool.iter()
        .filter(|o| o.sent_ms >= p0 - PROBE_LEAD_MS && o.sent_ms <= t1)
        .filter_map(|o| {
            let span = (o.sent_ms, o.sent_ms + o.latency_ms);
            if o.is_live() && o.latency_ms > bar {
                Some(Offender::late(
                    format!(
                        "request {} (a probe of {:.1} ms over the {bar:.0} ms bar, at {:.0} ms)",
                        o.index, o.latency_ms, o.sent_ms
                    ),
                    Some(o.index),
                    span.0,
                    span.1,
                    o.latency_ms - bar,
                ))
            } else if o.headers.reason.as_deref() == Some("ML_TIMEOUT") && needed > 0.0 {
                Some(Offender::late(
                    format!(
                        "request {} (a probe that missed the deadline, at {:.0} ms)",
                        o.index, o.sent_ms
                    ),
                    Some(o.index),
                    span.0,
                    span.1,
                    needed,
                ))
            } else {
                None
            }
        })
        .collect()
}

/// How long a probing that passes takes: the run's last one that did, or else the policy's
/// `probe_min_calls` at the probe fraction of the isolate's arrival rate.
fn probing_took(transitions: &[SeenTransition], cx: &Context<'_>, obs: &[&Observed]) -> f64 {
    let mut began = None;
    let mut took = None;
    for t in transitions {
        match mode_kind(t.to) {
            Some(Mode::Probing) => began = Some(t.at_ms),
            Some(Mode::Healthy) => {
                if let Some(p0) = began.take() {
                    took = Some(t.at_ms - p0);
                }
            }
            _ => began = None,
        }
    }
    if let Some(t) = took {
        return t;
    }
    let Breaker::Rate(r) = &cx.policy.breaker else {
        return 0.0;
    };
    let first = obs.iter().map(|o| o.sent_ms).fold(f64::INFINITY, f64::min);
    let last = obs.iter().map(|o| o.sent_ms).fold(0.0, f64::max);
    let rate = obs.len() as f64 / ((last - first).max(1.0) / 1000.0);
    r.probe_min_calls as f64 / (r.probe_fraction * rate).max(1e-9) * 1000.0
}
