//! The breaker's **moves** that held answers back on a healthy model, and the calls that made
//! them: an opening before the fault's onset, and after the fault's end a probing that
//! failed or a re-opening after a close (late_recovery.rs says how `RECOVER_WITHIN` judges
//! them; compared.rs how `SIMULATE_AGREES` names them).

use std::collections::HashSet;

use understudy_core::breaker::Mode;
use understudy_core::policy::{Breaker, Scope};

use super::blame::{missed_deadline, Offender};
use super::Context;
use crate::drill::observe::{mode_kind, Observed, SeenTransition};

/// A call may be sent this long before the transition it caused is logged (the isolate logs
/// it when it handles the answer's outcome).
const LEAD_MS: f64 = 50.0;

/// A move of the breaker that held answers back on a healthy model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Move {
    /// Where its calls begin: the probing's start, the close before a re-opening, the start
    /// of the window an early opening was judged on.
    pub began: f64,
    /// When the breaker was open (again).
    pub ended: f64,
    pub kind: MoveKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    FailedProbing,
    Reopening,
    EarlyOpening,
}

/// What explains an isolate's breaker going through other episodes than an ideal host's
/// would: its moves after the fault's end, as the calls that made them (from `pool`), or a
/// move with none named as it is. `None`: no move after the fault's end.
pub fn failed_probing_offenders(
    pool: &[&Observed],
    transitions: &[SeenTransition],
    cx: &Context<'_>,
    who: &str,
) -> Option<Vec<Offender>> {
    let (start, end) = cx.fault?;
    let moves = moves_of(transitions, start, end, cx);
    if moves.is_empty() {
        return None;
    }
    Some(
        moves
            .iter()
            .flat_map(|m| move_offenders(pool, m, cx, who, &first_wave(pool, cx)))
            .collect(),
    )
}

/// Each isolate's first wave: its answers sent before its first one ended. The breaker
/// does not learn from them (a fresh isolate's first calls pay for its start-up, not the
/// model's: docs/outcomes.md), so they make no move.
pub fn first_wave(pool: &[&Observed], cx: &Context<'_>) -> HashSet<u64> {
    let mut groups: Vec<Vec<&Observed>> = if cx.isolates.len() > 1 {
        let by: HashSet<u64> = pool.iter().map(|o| o.index).collect();
        cx.isolates
            .iter()
            .map(|iso| {
                let mine: HashSet<u64> = iso.requests.iter().copied().collect();
                pool.iter()
                    .filter(|o| mine.contains(&o.index) && by.contains(&o.index))
                    .copied()
                    .collect()
            })
            .collect()
    } else {
        vec![pool.to_vec()]
    };
    let mut out = HashSet::new();
    for g in &mut groups {
        g.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
        let Some(o) = g.first() else { continue };
        let ended = o.sent_ms + o.latency_ms;
        out.extend(g.iter().filter(|x| x.sent_ms < ended).map(|x| x.index));
    }
    out
}

/// Whether the policy's breaker decides on the fleet's evidence (its probes are then any
/// isolate's).
pub fn fleet_scope(cx: &Context<'_>) -> bool {
    matches!(&cx.policy.breaker, Breaker::Rate(r) if matches!(r.scope, Scope::Fleet(_)))
}

/// The breaker's moves that held answers back on a healthy model: an opening before the
/// fault's `start`, and after its `end` the probings that began and failed and the
/// re-openings after a close.
pub fn moves_of(
    transitions: &[SeenTransition],
    start: f64,
    end: f64,
    cx: &Context<'_>,
) -> Vec<Move> {
    // A trip is judged on the calls of the breaker's window before it.
    let window = match &cx.policy.breaker {
        Breaker::Rate(r) => r.window_ms as f64,
        _ => 0.0,
    };
    let mut out = Vec::new();
    let (mut probing, mut closed, mut healthy) = (None, None, true);
    for t in transitions {
        match mode_kind(t.to) {
            Some(Mode::Probing) => {
                probing = Some(t.at_ms);
                healthy = false;
            }
            Some(Mode::Healthy) => {
                probing = None;
                closed = Some(t.at_ms);
                healthy = true;
            }
            Some(Mode::Open) => {
                let (p, c) = (probing.take(), closed.take());
                if healthy && t.at_ms < start {
                    out.push(Move {
                        began: t.at_ms - window,
                        ended: t.at_ms,
                        kind: MoveKind::EarlyOpening,
                    });
                } else if let Some(p0) = p.filter(|p0| *p0 >= end) {
                    out.push(Move {
                        began: p0,
                        ended: t.at_ms,
                        kind: MoveKind::FailedProbing,
                    });
                } else if let Some(c0) = c.filter(|c0| *c0 >= end) {
                    out.push(Move {
                        began: c0,
                        ended: t.at_ms,
                        kind: MoveKind::Reopening,
                    });
                }
                healthy = false;
            }
            None => {}
        }
    }
    out
}

/// The calls that made move `m`: live answers over the bar (the probe bar for a probing,
/// the slow-call bar for a re-opening) and deadline misses, sent in it; a move with none is
/// named as it is.
pub fn move_offenders(
    pool: &[&Observed],
    m: &Move,
    cx: &Context<'_>,
    who: &str,
    first: &HashSet<u64>,
) -> Vec<Offender> {
    let (bar, lag) = match &cx.policy.breaker {
        Breaker::Rate(r) => (
            match m.kind {
                MoveKind::FailedProbing => r.probe_p95_ms as f64,
                _ => r.slow_call_p95_ms as f64,
            },
            // In fleet scope the fleet's probing began at the coordinator, up to two
            // reports and two reads of the status endpoint before this isolate showed it.
            match &r.scope {
                Scope::Fleet(f) => {
                    2.0 * f.report_interval_ms as f64
                        + 2.0 * crate::drill::STATUS_EVERY.as_secs_f64() * 1000.0
                }
                Scope::Isolate => 0.0,
            },
        ),
        _ => (f64::INFINITY, 0.0),
    };
    let needed = cx.policy.budget.deadline_ms as f64 - cx.healthy_model_ms;
    let what = match m.kind {
        MoveKind::FailedProbing => "a probing that failed",
        MoveKind::Reopening => "the re-opening",
        MoveKind::EarlyOpening => "an opening before the fault",
    };
    // An opening before the fault: only calls of the healthy phase count.
    let until = match (m.kind, cx.fault) {
        (MoveKind::EarlyOpening, Some((start, _))) => m.ended.min(start),
        _ => m.ended,
    };
    let calls: Vec<Offender> = pool
        .iter()
        .filter(|o| o.sent_ms >= m.began - LEAD_MS - lag && o.sent_ms <= until)
        .filter(|o| !first.contains(&o.index))
        .filter_map(|o| {
            let span = (o.sent_ms, o.sent_ms + o.latency_ms);
            if o.is_live() && o.latency_ms > bar {
                Some(Offender::late(
                    format!(
                        "request {} ({what} at {:.0} ms: {:.1} ms, over the {bar:.0} ms bar)",
                        o.index, m.ended, o.latency_ms
                    ),
                    Some(o.index),
                    span.0,
                    span.1,
                    o.latency_ms - bar,
                ))
            } else if missed_deadline(o.headers.reason.as_deref()) && needed > 0.0 {
                Some(Offender::late(
                    format!(
                        "request {} ({what} at {:.0} ms: a deadline missed, {})",
                        o.index,
                        m.ended,
                        o.headers.reason.as_deref().unwrap_or("-")
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
        .collect();
    if calls.is_empty() {
        return vec![Offender::not_timing(
            format!(
                "{who}: {what} at {:.0} ms with no slow or missed call seen",
                m.ended
            ),
            None,
            m.ended,
        )];
    }
    calls
}

/// When the last probing between `end` and `before` began.
pub fn probing_before(transitions: &[SeenTransition], end: f64, before: f64) -> Option<f64> {
    transitions
        .iter()
        .filter(|t| t.at_ms >= end && t.at_ms < before && mode_kind(t.to) == Some(Mode::Probing))
        .map(|t| t.at_ms)
        .next_back()
}

/// How long a probing that passes takes: the run's last one that did, or else the policy's
/// `probe_min_calls` at the probe fraction of the arrival rate of `obs` (the isolate's, or
/// in fleet scope the fleet's).
pub fn probing_took(transitions: &[SeenTransition], cx: &Context<'_>, obs: &[&Observed]) -> f64 {
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
