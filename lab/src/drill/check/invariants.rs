//! One function per invariant a drill checks; each returns its verdict with a detail a
//! reader can act on (the first few offending requests).

use super::recovery::Recovery;
use super::{
    can_always_answer, disclosure_gaps, first_few, write_through_tier, Context, Latency, Verdict,
    FAULT_END_GUARD_MS,
};
use crate::drill::observe::Observed;

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
    Verdict::new(
        "LATENCY_BUDGET",
        lat.p99_ms <= ceiling,
        format!(
            "p99 {:.1} ms vs budget {} ms + slack {:.1} ms = {:.1} ms ({over} answers over it, max {:.1} ms)",
            lat.p99_ms, cx.policy.budget.total_ms, cx.slack_ms, ceiling, lat.max_ms
        ),
    )
}

/// `[drill] p95_max`.
pub fn p95_max(cx: &Context<'_>, lat: &Latency) -> Verdict {
    match cx.limits.p95_max_ms {
        Some(max) => Verdict::new(
            "P95_MAX",
            lat.p95_ms <= max as f64,
            format!("p95 {:.1} ms, limit {max} ms", lat.p95_ms),
        ),
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
    Verdict::new("DEGRADE_WITHIN", ok, detail)
}

/// `[drill] recover_within`: healthy again this soon after the fault's end.
pub fn recover_within(cx: &Context<'_>, rec: &Recovery) -> Verdict {
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
    Verdict::new("RECOVER_WITHIN", ok, detail)
}

/// The write-through tier was rewritten by live answers after the fault.
pub fn user_tier_repopulated(cx: &Context<'_>) -> Verdict {
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
        }
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
