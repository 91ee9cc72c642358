//! When the edge was normal again after a fault: the breaker back to healthy and answers
//! live again, measured from what the client saw and what the breaker reported.

use serde::Serialize;

use understudy_core::breaker::Mode;

use super::{Context, ALERT_STALLED};
use crate::drill::observe::{mode_kind, Observed, SeenTransition};

use understudy_compiler::replay::recovery::normal_from;
pub use understudy_compiler::replay::recovery::NORMAL_LIVE_SHARE;

/// When answers were normal again after the fault: the scheduled time of the first live
/// answer after the fault's end from which the later answers are normal
/// (`understudy_compiler::replay::recovery::normal`; None: never,
/// within the run).
pub fn normalized_at(obs: &[Observed], fault_end: f64) -> Option<f64> {
    normalized_at_with(obs, fault_end, Observed::is_live)
}

/// [`normalized_at`] with `live` saying which answers count as live (a judgement sets the
/// excused misses aside by counting them so).
pub fn normalized_at_with(
    obs: &[Observed],
    fault_end: f64,
    live: impl Fn(&Observed) -> bool,
) -> Option<f64> {
    let mut after: Vec<&Observed> = obs.iter().filter(|o| o.sent_ms >= fault_end).collect();
    after.sort_by_key(|o| o.index);
    // The rule reads instants in ms; the scheduled times are µs-exact, so index them.
    let answers: Vec<(u64, bool)> = after
        .iter()
        .enumerate()
        .map(|(n, o)| (n as u64, live(o)))
        .collect();
    normal_from(&answers).map(|n| after[n as usize].scheduled_ms)
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
    // A breaker already degraded at the onset (it opened before it, on a stall of the host
    // in the healthy phase) degraded at once.
    let open_at_onset = cx
        .transitions
        .iter()
        .take_while(|t| t.at_ms < start)
        .last()
        .is_some_and(|t| kind(t) == Some(Mode::Open));
    let degraded_after_ms = if open_at_onset {
        Some(0.0)
    } else {
        cx.transitions
            .iter()
            .filter(|t| kind(t) == Some(Mode::Open) && t.at_ms >= start)
            .map(|t| t.at_ms - start)
            .reduce(f64::min)
    };
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
    let stall_ms = cx.limits.stalled_after_ms as f64
        + cx.unscaled_ms(degraded_after_ms)
        + cx.unscaled_settle_ms(breaker_healthy_after_ms, recovered_after_ms);
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
