//! One function per invariant a drill checks; each returns its verdict with a detail a
//! reader can act on (the first few offending requests). The checks of time name their
//! offenders and are judged against the witness's stalls ([`super::blame`]); the checks of
//! content (`ANSWERED`, `DISCLOSED`, `NOT_EMPTY`) are never excused: no stall makes an
//! answer missing, undisclosed or empty.

use super::blame::{excused_requests, missed_deadline, Offender};
use super::recovery::Recovery;
use super::{
    can_always_answer, disclosure_gaps, first_few, late_recovery, write_through_tier, Context,
    Latency, Verdict, FAULT_END_GUARD_MS,
};
use crate::drill::observe::Observed;

/// An answer's offender for a limit of time it passed.
pub(super) fn over_limit(o: &Observed, limit_ms: f64) -> Offender {
    Offender::late(
        format!(
            "request {} (HTTP {}, {:.1} ms, sent at {:.0} ms)",
            o.index, o.status, o.latency_ms, o.sent_ms
        ),
        Some(o.index),
        o.sent_ms,
        o.sent_ms + o.latency_ms,
        o.latency_ms - limit_ms,
    )
}

/// Answers over `limit` as offenders of a latency percentile, and whether the percentile
/// holds without the excused ones.
fn percentile_judged(
    v: Verdict,
    obs: &[Observed],
    cx: &Context<'_>,
    limit: f64,
    pick: fn(&Latency) -> f64,
) -> Verdict {
    let offenders = obs
        .iter()
        .filter(|o| o.status != 0 && o.latency_ms > limit)
        .map(|o| over_limit(o, limit))
        .collect();
    v.judged(offenders, cx.stalls, |excused| {
        let set = excused_requests(excused);
        let rest = Latency::of(
            obs.iter()
                .filter(|o| o.status != 0 && !set.contains(&o.index))
                .map(|o| o.latency_ms),
        );
        pick(&rest) <= limit
    })
}

/// Every request got an answer.
pub fn answered(obs: &[Observed]) -> Verdict {
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
    Verdict::new(
        "ANSWERED",
        unanswered.is_empty(),
        if unanswered.is_empty() {
            format!("{} of {} answered", obs.len(), obs.len())
        } else {
            first_few(&unanswered)
        },
    )
}

/// Every degraded answer (and every 503/504) carried the full disclosure set.
pub fn disclosed(obs: &[Observed]) -> Verdict {
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
    Verdict::new(
        "DISCLOSED",
        undisclosed.is_empty(),
        if undisclosed.is_empty() {
            format!("{degraded} degraded answers, all fully disclosed")
        } else {
            first_few(&undisclosed)
        },
    )
}

/// No answer was empty (and, where the cascade promises one, none was an error).
pub fn not_empty(obs: &[Observed], cx: &Context<'_>) -> Verdict {
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
    Verdict::new(
        "NOT_EMPTY",
        empty.is_empty(),
        if empty.is_empty() {
            "every answer has items".to_string()
        } else {
            first_few(&empty)
        },
    )
}

/// The p99 fits the policy's budget plus the calibrated transport slack.
pub fn latency_budget(obs: &[Observed], cx: &Context<'_>, lat: &Latency) -> Verdict {
    let ceiling = cx.policy.budget.total_ms as f64 + cx.slack_ms;
    let over = obs
        .iter()
        .filter(|o| o.status != 0 && o.latency_ms > ceiling)
        .count();
    let v = Verdict::new(
        "LATENCY_BUDGET",
        lat.p99_ms <= ceiling,
        format!(
            "p99 {:.1} ms vs budget {} ms + slack {:.1} ms = {:.1} ms ({over} answers over it, max {:.1} ms)",
            lat.p99_ms, cx.policy.budget.total_ms, cx.slack_ms, ceiling, lat.max_ms
        ),
    );
    percentile_judged(v, obs, cx, ceiling, |l| l.p99_ms)
}

/// The answers that missed the model's deadline (`ML_TIMEOUT`, `EDGE_OVERLOADED`) came at
/// it: their median within the budget + slack. `LATENCY_BUDGET` judges the tail, where the
/// host's queues are; this judges the middle of the one class of answers the edge's own timer
/// decides. A stall of the host delays some answers and spares others, so set aside what the
/// stalls cover and the rest still answer at the deadline; a timer that fires late delays
/// every one, stalls or not.
pub fn deadline_kept(obs: &[Observed], cx: &Context<'_>) -> Verdict {
    let ceiling = cx.policy.budget.total_ms as f64 + cx.slack_ms;
    let missed: Vec<&Observed> = obs
        .iter()
        .filter(|o| o.status != 0 && missed_deadline(o.headers.reason.as_deref()))
        .collect();
    if missed.is_empty() {
        return Verdict::skipped("DEADLINE_KEPT", "no answer missed the model's deadline");
    }
    let median = |excused: &std::collections::HashSet<u64>| {
        Latency::of(
            missed
                .iter()
                .filter(|o| !excused.contains(&o.index))
                .map(|o| o.latency_ms),
        )
        .p50_ms
    };
    let offenders: Vec<Offender> = missed
        .iter()
        .filter(|o| o.latency_ms > ceiling)
        .map(|o| over_limit(o, ceiling))
        .collect();
    let all = median(&Default::default());
    let v = Verdict::new(
        "DEADLINE_KEPT",
        all <= ceiling,
        format!(
            "the {} answers that missed the model's deadline: median {all:.1} ms vs budget {} ms + slack {:.1} ms = {ceiling:.1} ms ({} over it)",
            missed.len(),
            cx.policy.budget.total_ms,
            cx.slack_ms,
            offenders.len()
        ),
    );
    v.judged(offenders, cx.stalls, |excused| {
        median(&excused_requests(excused)) <= ceiling
    })
}

/// `[drill] p95_max`.
pub fn p95_max(obs: &[Observed], cx: &Context<'_>, lat: &Latency) -> Verdict {
    match cx.limits.p95_max_ms {
        Some(max) => {
            let v = Verdict::new(
                "P95_MAX",
                lat.p95_ms <= max as f64,
                format!("p95 {:.1} ms, limit {max} ms", lat.p95_ms),
            );
            percentile_judged(v, obs, cx, max as f64, |l| l.p95_ms)
        }
        None => Verdict::skipped("P95_MAX", "no [drill] p95_max"),
    }
}

/// `[drill] degrade_within`: the breaker degraded this soon after the fault's onset, and
/// every answer from then to the fault's end said so.
pub fn degrade_within(obs: &[Observed], cx: &Context<'_>, rec: &Recovery) -> Verdict {
    let (Some(limit), Some((start, end))) = (cx.limits.degrade_within_ms, cx.fault) else {
        return Verdict::skipped("DEGRADE_WITHIN", "no [drill] degrade_within or no fault");
    };
    let from = start + limit as f64;
    let in_window = |o: &&Observed| o.sent_ms >= from && o.sent_ms < end - FAULT_END_GUARD_MS;
    let live_in_fault: Vec<String> = obs
        .iter()
        .filter(in_window)
        .filter(|o| !o.is_degraded())
        .map(|o| {
            format!(
                "request {} at {:.0} ms was not degraded",
                o.index, o.sent_ms
            )
        })
        .collect();
    let in_fault = obs.iter().filter(in_window).count();
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
    // A live answer in the fault came after the deadline that should have cut it (the model
    // is slow there); anything else undisclosed is not a matter of time. A late trip is the
    // breaker's lateness past the limit, over the time from the onset.
    let deadline = cx.policy.budget.deadline_ms as f64;
    let mut offenders: Vec<Offender> = obs
        .iter()
        .filter(in_window)
        .filter(|o| !o.is_degraded())
        .map(|o| {
            if o.is_live() && o.latency_ms > deadline {
                over_limit(o, deadline)
            } else {
                Offender::not_timing(
                    format!("request {} (HTTP {}) was not degraded", o.index, o.status),
                    Some(o.index),
                    o.sent_ms,
                )
            }
        })
        .collect();
    match (cx.breaker_visible, rec.degraded_after_ms) {
        (true, Some(d)) if d > limit as f64 => offenders.push(Offender::late(
            format!("the breaker's degradation, {d:.0} ms after the onset"),
            None,
            start,
            start + d,
            d - limit as f64,
        )),
        (true, None) => offenders.push(Offender::not_timing(
            "the breaker, which never degraded",
            None,
            end,
        )),
        _ => {}
    }
    Verdict::new("DEGRADE_WITHIN", ok, detail).judged_all(offenders, cx.stalls)
}

/// `[drill] recover_within`: healthy again this soon after the fault's end.
pub fn recover_within(obs: &[Observed], cx: &Context<'_>, rec: &Recovery) -> Verdict {
    let (Some(limit), Some(_)) = (cx.limits.recover_within_ms, cx.fault) else {
        return Verdict::skipped("RECOVER_WITHIN", "no [drill] recover_within or no fault");
    };
    let extra = cx.unscaled_ms(rec.degraded_after_ms);
    let settle = cx.unscaled_settle_ms(rec.breaker_healthy_after_ms, rec.recovered_after_ms);
    let allowed = limit as f64 + extra + settle;
    let mut shown = format!("{limit} ms");
    if extra > 0.0 {
        shown.push_str(&format!(" + {extra:.0} ms unscaled trip delay"));
    }
    if settle > 0.0 {
        shown.push_str(&format!(
            " + {settle:.0} ms unscaled settling after the breaker's close"
        ));
    }
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
    late_recovery::judge(Verdict::new("RECOVER_WITHIN", ok, detail), obs, cx, rec)
}

/// The write-through tier was rewritten by live answers after the fault.
pub fn user_tier_repopulated(cx: &Context<'_>, rec: &Recovery) -> Verdict {
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
            // A probe answered by another tier met a user tier that did not answer in
            // time: its read timeout is how late it came. A stale entry is not a matter of
            // time.
            let read_timeout = cx
                .policy
                .cascade
                .tiers
                .iter()
                .find(|t| t.name == tier)
                .map(|t| t.kind.timeout_ms())
                .unwrap_or(0) as f64;
            let offenders = probes
                .iter()
                .filter(|p| p.tier.as_deref() != Some(tier.as_str()) || p.age_s.is_none())
                .map(|p| {
                    let what = format!("user {}'s probe, answered by {:?}", p.user, p.tier);
                    if p.tier.as_deref() != Some(tier.as_str()) && p.latency_ms > 0.0 {
                        Offender::late(
                            what,
                            None,
                            p.sent_ms,
                            p.sent_ms + p.latency_ms,
                            read_timeout,
                        )
                    } else {
                        Offender::not_timing(what, None, p.sent_ms)
                    }
                })
                .chain(
                    probes
                        .iter()
                        .filter(|p| p.tier.as_deref() == Some(tier.as_str()) && p.age_s.is_some())
                        .filter(|p| {
                            stale
                                .iter()
                                .any(|s| s.contains(&format!("user {} ", p.user)))
                        })
                        .map(|p| {
                            Offender::not_timing(
                                format!("user {}'s entry, {:?} s old", p.user, p.age_s),
                                None,
                                p.sent_ms,
                            )
                        }),
                )
                .collect();
            Verdict::new(
                "USER_TIER_REPOPULATED",
                stale.is_empty(),
                if stale.is_empty() {
                    format!(
                        "{} users answered from `{tier}` with entries written after the fault's end",
                        probes.len()
                    )
                } else {
                    first_few(&stale)
                },
            )
            .judged_all(offenders, cx.stalls)
        }
        // No live answer because the edge never recovered in the run: that is
        // `RECOVER_WITHIN`'s to judge, not a second failure.
        (Some(_), Some(_), Some(_)) if rec.recovered_after_ms.is_none() => Verdict::skipped(
            "USER_TIER_REPOPULATED",
            "no user was answered live after the fault: the edge was not healthy again in the run (RECOVER_WITHIN)",
        ),
        (Some(_), Some(_), Some(_)) => Verdict::new(
            "USER_TIER_REPOPULATED",
            false,
            "no user was answered live after the fault: nothing to repopulate from",
        ),
        _ => Verdict::skipped(
            "USER_TIER_REPOPULATED",
            "no write-through tier, no recover_within, or no fault",
        ),
    }
}
