//! Why `RECOVER_WITHIN` broke: the answers that made the recovery late, for each isolate
//! that was late (the one isolate, or each of `--isolates K`).
//!
//! After the fault's end the model is healthy, so the breaker has no reason to hold answers
//! back. When it did, a **move** of the breaker did it:
//! - a probing that began after the fault's end and failed (re-arming the hold);
//! - a re-opening after a close after the fault's end;
//! - an opening before the fault began, on a healthy model: the whole incident's schedule
//!   (hold-downs, probings) then runs from that opening, not from the fault's onset.
//!
//! A move's offenders are the calls that made it: its slow live answers (over the probe bar
//! for a probing, over the slow-call bar for an opening; late by what they were over) and
//! its deadline misses (late by the deadline less the healthy model's latency: what the host
//! must have taken). Set aside, the first move would not have happened: the breaker closes
//! as long after a failed probing's start as a probing that passed took (the run's last one,
//! or else the policy's `probe_min_calls` at the probe fraction of the isolate's arrivals,
//! the fleet's in fleet scope), or stays closed at the close a re-opening followed — and
//! only if that is in time are the calls the cause. An opening before the fault with every
//! call excused leaves the recovery unjudged: the schedule it is measured on is the host's.
//! A breaker late with no move to explain it is blamed as it is.
//!
//! After the breaker's close, every answer not live is an offender too: a deadline miss is a
//! matter of time, any other is not. Judged again, the excused answers count as live, and so
//! do the answers the breaker kept from the model after it would have closed.

use std::collections::HashSet;

use understudy_core::classify::FailureReason;

use super::blame::{excused_requests, missed_deadline, Excused, Offender};
use super::moves::{
    first_wave, fleet_scope, move_offenders, moves_of, probing_before, probing_took, Move, MoveKind,
};
use super::recovery::{normalized_at_with, recovery, Recovery};
use super::{Context, Verdict};
use crate::drill::observe::{Observed, SeenTransition};

/// One isolate's share of the run.
struct Unit<'a> {
    name: String,
    obs: Vec<&'a Observed>,
    transitions: &'a [SeenTransition],
}

/// What one late isolate needs to be in time, given the excused offenders.
struct Late {
    /// Each move's offending requests: every one must be excused for the moves to be.
    moves: Vec<Vec<u64>>,
    /// The first move is an opening before the fault.
    early: bool,
    /// A close late with no move to explain it: the offender that names it.
    close_what: Option<String>,
    /// When the breaker would have been healthy without the moves (ms after the fault's end).
    close_without: f64,
    /// When it was healthy for the last time (`None`: never, or not seen).
    breaker_ms: Option<f64>,
    allowed: f64,
    obs: Vec<Observed>,
    end: f64,
}

impl Late {
    /// Whether the isolate is in time with `excused` set aside: without its moves (if every
    /// one of their calls is excused) its breaker is healthy at `close_without`; from then
    /// on the excused answers, and the answers the breaker kept from the model, count as
    /// live.
    fn in_time(&self, excused: &HashSet<u64>, excused_what: &HashSet<&str>) -> bool {
        let moved = !self.moves.is_empty();
        // A close late by what stalls in its probing explain: the answers after it must
        // have settled (the excused misses counted as live), however long that took.
        let close_excused = self
            .close_what
            .as_deref()
            .is_some_and(|w| excused_what.contains(w));
        let excused_moves = self.moves.iter().flatten().all(|i| excused.contains(i));
        let close = if !moved {
            self.breaker_ms.unwrap_or(0.0)
        } else if excused_moves && self.early {
            // The incident ran on the host's schedule: nothing left to judge it on.
            return true;
        } else if excused_moves {
            self.close_without
        } else {
            return false;
        };
        let from = self.end + close;
        let after: Vec<Observed> = self
            .obs
            .iter()
            .filter(|o| o.sent_ms >= from)
            .cloned()
            .collect();
        let breaker_open = Some(FailureReason::BreakerOpen.code());
        normalized_at_with(&after, from, |o| {
            o.is_live()
                || excused.contains(&o.index)
                || (moved && o.headers.reason.as_deref() == breaker_open)
        })
        .is_some_and(|t| close_excused || close + (t - from).max(0.0) <= self.allowed)
    }
}

pub fn judge(v: Verdict, obs: &[Observed], cx: &Context<'_>, rec: &Recovery) -> Verdict {
    let (Some(limit), Some((start, end))) = (cx.limits.recover_within_ms, cx.fault) else {
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
    let first = first_wave(&obs.iter().collect::<Vec<_>>(), cx);
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
        // Calls of the fleet's probing come from every isolate in fleet scope.
        let pool: Vec<&Observed> = if fleet_scope(cx) {
            obs.iter().collect()
        } else {
            u.obs.clone()
        };
        let moves = if cx.breaker_visible {
            moves_of(u.transitions, start, end, cx)
        } else {
            Vec::new()
        };
        let mut ids = Vec::new();
        for m in &moves {
            let calls = move_offenders(&pool, m, cx, &u.name, &first);
            ids.push(calls.iter().filter_map(|o| o.index).collect());
            offenders.extend(calls);
        }
        let after: Vec<&Move> = moves.iter().filter(|m| m.ended >= end).collect();
        let close_without = match after.first() {
            Some(m) if m.kind == MoveKind::Reopening => m.began - end,
            Some(m) => m.began + probing_took(u.transitions, cx, &pool) - end,
            None => r.breaker_healthy_after_ms.unwrap_or(0.0),
        };
        let early = moves
            .first()
            .is_some_and(|m| m.kind == MoveKind::EarlyOpening);
        let breaker_late = cx.breaker_visible
            && match r.breaker_healthy_after_ms {
                Some(b) => b > allowed || !moves.is_empty(),
                None => r.recovered_after_ms.is_none(),
            };
        // A close that came late: after its probing, with no move (the breaker closed late),
        // or before a re-opening (the move set aside leaves it closed there). Its probing took
        // longer than it would have, and a stall in it may be why (arrivals the host held back
        // are probes that came late): late by how far past the limit it closed.
        let observed_close = match after.first() {
            None => r.breaker_healthy_after_ms.filter(|_| breaker_late),
            Some(m) if m.kind == MoveKind::Reopening && close_without > allowed => {
                Some(close_without)
            }
            _ => None,
        };
        let mut close_what = None;
        match (observed_close, observed_close.and_then(|b| probing_before(u.transitions, end, end + b))) {
            (Some(b), Some(p0)) => {
                let what = format!(
                    "{}: healthy {b:.0} ms after the fault's end, after a probing from {p0:.0} ms",
                    u.name
                );
                close_what = Some(what.clone());
                offenders.push(Offender::late(what, None, p0, end + b, b - allowed));
            }
            _ if breaker_late && moves.is_empty() => offenders.push(Offender::not_timing(
                format!(
                    "{}: {}, and no probing failed nor re-opening came after the fault's end to explain it",
                    u.name,
                    r.breaker_healthy_after_ms
                        .map_or("never healthy again".to_string(), |b| format!(
                            "healthy {b:.0} ms after the fault's end"
                        ))
                ),
                None,
                end + r.breaker_healthy_after_ms.unwrap_or(r.observed_after_end_ms),
            )),
            _ if !early && !moves.is_empty() && close_without > allowed => {
                offenders.push(Offender::not_timing(
                    format!(
                        "{}: even without its moves after the fault's end it would have been healthy {close_without:.0} ms after the fault's end, past the limit",
                        u.name
                    ),
                    None,
                    end + close_without,
                ));
            }
            _ => {}
        }
        // The answers not live once the breaker was (or would have been) healthy.
        let from = end
            + if moves.is_empty() {
                r.breaker_healthy_after_ms.unwrap_or(0.0)
            } else {
                close_without
            };
        let seen: HashSet<u64> = offenders.iter().filter_map(|o| o.index).collect();
        offenders.extend(misses(&u.obs, from, end, cx, !moves.is_empty(), &seen));
        lates.push(Late {
            moves: ids,
            close_what,
            early,
            close_without,
            breaker_ms: r.breaker_healthy_after_ms,
            allowed,
            obs: mine,
            end,
        });
    }
    if lates.is_empty() {
        // Every isolate was in time: the answers of the whole run were late to settle.
        let from = end + rec.breaker_healthy_after_ms.unwrap_or(0.0);
        let all: Vec<&Observed> = obs.iter().collect();
        offenders.extend(misses(&all, from, end, cx, false, &HashSet::new()));
        lates.push(Late {
            moves: Vec::new(),
            close_what: None,
            early: false,
            close_without: rec.breaker_healthy_after_ms.unwrap_or(0.0),
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
        let what: HashSet<&str> = excused.iter().map(|e| e.offender.what.as_str()).collect();
        !blamed_outright && lates.iter().all(|l| l.in_time(&set, &what))
    })
}

/// The answers not live sent from `from` on: a deadline miss is late by the deadline less
/// the healthy model's latency, any other is not a matter of time — but for the breaker's own
/// refusals after a move (`moved`), which the move explains. `seen`: already offenders.
fn misses(
    obs: &[&Observed],
    from: f64,
    end: f64,
    cx: &Context<'_>,
    moved: bool,
    seen: &HashSet<u64>,
) -> Vec<Offender> {
    let needed = cx.policy.budget.deadline_ms as f64 - cx.healthy_model_ms;
    let breaker_open = Some(FailureReason::BreakerOpen.code());
    obs.iter()
        .filter(|o| o.sent_ms >= from && !o.is_live() && !seen.contains(&o.index))
        .filter(|o| !(moved && o.headers.reason.as_deref() == breaker_open))
        .map(|o| {
            let what = format!(
                "request {} (HTTP {}, {}, {:.1} ms) not live {:.0} ms after the fault's end",
                o.index,
                o.status,
                o.headers.reason.as_deref().unwrap_or("-"),
                o.latency_ms,
                o.sent_ms - end
            );
            if missed_deadline(o.headers.reason.as_deref()) && needed > 0.0 {
                Offender::late(
                    what,
                    Some(o.index),
                    o.sent_ms,
                    o.sent_ms + o.latency_ms,
                    needed,
                )
            } else {
                Offender::not_timing(what, Some(o.index), o.sent_ms)
            }
        })
        .collect()
}
