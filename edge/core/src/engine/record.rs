//! [E-CLASSIFY] What an origin attempt tells the breaker, the counters and the hedge's
//! latency window: dependency and credential failures count against the origin; a caller's
//! 4xx is no news about it; and neither is an attempt the edge itself could not serve in
//! time:
//! - a timeout of an attempt started while the isolate was still cold (before its first
//!   origin attempt had ended: the first wave of a fresh isolate pays for instantiation and
//!   connection set-up, and must not open the breaker on a healthy model), and the latency
//!   of such an attempt's success (it counts as a success, never as a slow call);
//! - a late timer while the model answered other calls (`EDGE_OVERLOADED`);
//! - while the isolate is busy, a success's latency (it counts as a success, never as a slow
//!   call: its latency is the queue's as much as the model's);
//! - a timeout on a busy isolate (late timer, or saturated) unless the model stays silent
//!   for one more timeout-length ([`super::verdict`]).
//!
//! What the model said is always its own: a status, a malformed body or a refused
//! connection counts however busy or cold the isolate, and so does a timeout after which it
//! answered nobody — a saturated isolate must not hide a hung model from its breaker.

use crate::breaker::{Admission, Mode, Outcome as BreakerOutcome};
use crate::classify::{BreakerRecord, FailureReason, Observed};
use crate::io::Done;
use crate::time::Millis;

use super::command::Input;
use super::flight::Attempt;
use super::Engine;

/// The largest scheduling delay (ms) at which the isolate still measures the model's latency:
/// above it, successes are never judged slow.
const CALM_MS: u64 = 2;

/// How late a timeout's timer may fire (or the isolate's timers run) and the timeout still
/// be the model's at once. What an on-time timer shows on top of its timeout is the turn
/// that armed it (the request's start, ~1 ms of CPU) and the runtime timer's own jitter (a
/// no-op Worker's `setTimeout(45)`: p99 1.5–4 ms late on the bench machine). Later than
/// that, the isolate was busy when the deadline came, and the model's answer may have sat
/// in its queue: the timeout waits for the model's word ([`super::verdict`]). This is the
/// breaker's evidence only; which reason the answer discloses (`ML_TIMEOUT` or
/// `EDGE_OVERLOADED`) follows [`crate::classify::late_tolerance_ms`]. Measured: a healthy
/// 25 ms model and a burst of 16 concurrent requests on a busy host gave timeouts whose
/// timers fired 11–13 ms late — inside that tolerance (11 ms for 45 ms), so they counted
/// as the model's; short benches opened the breaker on a healthy model in 7 runs of 12
/// with that rule, 3 of 12 with this one (docs/history/2026-12-bench.md).
pub const BUSY_MS: u64 = 5;

/// What the breaker learns from attempt `a`, made under `admission`. `hedge_won_after`: the
/// attempt's answer came from its hedge, sent that many ms after the first request.
pub(super) fn record(
    engine: &mut Engine<'_>,
    a: &Attempt,
    admission: Admission,
    hedge_won_after: Option<u64>,
) {
    let latency = a.latency_ms();
    let class = a.result.err().map(FailureReason::class);
    if let Some(c) = class {
        c.count(&mut engine.counters);
    }
    let heard_meanwhile = engine.verdicts.heard_since(a.started);
    if a.result == Err(FailureReason::MlTimeout) {
        engine.last_timeout = Some(engine.last_timeout.map_or(a.ended, |t| t.max(a.ended)));
    }
    if a.result
        .map_or_else(FailureReason::model_answered, |()| true)
    {
        let acquitted = engine.verdicts.model_answered(a.ended, &mut engine.breaker);
        engine.counters.unrecorded += u64::from(acquitted.acquitted);
    }
    let swept = engine.verdicts.sweep(a.ended, &mut engine.breaker);
    engine.counters.timeouts_convicted += u64::from(swept.convicted);
    let cold = match engine.warm_since {
        None => {
            engine.warm_since = Some(a.ended);
            true
        }
        Some(warm) => a.started < warm,
    };
    if admission == Admission::Reject {
        return;
    }
    // An isolate that knows it is busy — its timers fire more than [`BUSY_MS`] late —
    // cannot tell the model's latency from its own queue ([`busy`]).
    let queue_delay = engine.lag.recent(a.ended);
    // A cold isolate's timeout is its own slowness (instantiation, connection set-up), not
    // the model's; what the model said on a cold isolate is its own like any other answer.
    let cold_timeout = cold && a.result == Err(FailureReason::MlTimeout);
    if cold_timeout || class.is_some_and(|c| c.breaker() == BreakerRecord::Unrecorded) {
        engine.counters.unrecorded += 1;
        engine.breaker.release(admission);
        return;
    }
    // A timeout on a busy isolate: the model's only if it stays silent ([`super::verdict`]).
    if a.result == Err(FailureReason::MlTimeout) && busy(engine, a.ended, a.started, a.timeout_ms) {
        let waiting = !heard_meanwhile
            && engine.verdicts.timeout_in_silence(
                a.started,
                a.ended,
                a.timeout_ms,
                admission,
                latency,
            );
        if !waiting {
            engine.counters.unrecorded += 1;
            engine.breaker.release(admission);
        }
        return;
    }
    // What the answer spent waiting in the isolate's own queue is the edge's, not the
    // model's: the slow-call judgement sees the latency without it. A busy isolate (its
    // timers run late at all) cannot see how long answers waited for it, so its successes
    // count as successes — the failure ratio must not lean towards failures — but are never
    // judged slow.
    //
    // And a success came before its attempt's timer fired: by the runtime's own clock it took
    // at most the timeout. What the engine's clock adds on top is the request's start — the
    // turn that armed the timer, which workerd counts from its end — and is the edge's too.
    //
    // A cold isolate's answers paid for its instantiation and connection set-up: like a busy
    // isolate's, its successes count as successes but are never judged slow, and they do not
    // set the hedge's delay.
    let mut model_latency = latency.saturating_sub(queue_delay).min(a.timeout_ms);
    if queue_delay > CALM_MS || cold {
        model_latency = model_latency.min(engine.slow_call_ms());
    }
    if a.result.is_ok() && !cold {
        // The hedge's delay follows the origin's own answer times: an answer the hedge won
        // took what it took from when the hedge went out. Counted from the first request's
        // start, every won hedge would push the p95 — and the next hedge — later, until the
        // hedges came too late to win (the bench's long-tail case settled at 0.97 live).
        let own =
            hedge_won_after.map_or(model_latency, |after| model_latency.saturating_sub(after));
        engine.hedger.answered(a.ended, own);
    }
    let outcome = match a.result {
        Ok(()) => BreakerOutcome::success(model_latency),
        Err(r) => match r.class().breaker() {
            BreakerRecord::Nothing | BreakerRecord::Unrecorded => {
                engine.breaker.release(admission);
                return;
            }
            BreakerRecord::Failure => match r {
                FailureReason::MlTimeout => {
                    engine.counters.timeouts_counted += 1;
                    BreakerOutcome::timeout(latency)
                }
                _ => BreakerOutcome::failure(latency),
            },
        },
    };
    let shunned = engine.breaker.mode(a.ended) != Mode::Healthy;
    engine.breaker.record(a.ended, admission, outcome);
    if shunned && engine.breaker.mode(a.ended) == Mode::Healthy {
        // The breaker closed: the whole load turns to the model at once, on connections
        // the open breaker let go cold. That wave is judged as a fresh isolate's first is.
        engine.warm_since = None;
    }
}

/// Whether an attempt of `timeout_ms` started at `started` and timing out at `now` did so on
/// a busy isolate — one that knows it is saturated, or whose timer fired more than
/// [`BUSY_MS`] late — where the model's answer may be sitting in the isolate's own queue.
pub(super) fn busy(engine: &Engine<'_>, now: Millis, started: Millis, timeout_ms: u64) -> bool {
    engine.lag.recent(now) > BUSY_MS || now.since(started) > timeout_ms.saturating_add(BUSY_MS)
}

/// Fetch `io` of `input` ended at `now`: true when the isolate was listening to it after its
/// timeout ([`super::verdict::Verdicts::listen`]). A good answer then acquits the timeouts
/// awaiting the model's word ([`super::verdict::Verdicts::late`]); nothing else is learnt
/// from it (the request fell back at its deadline).
pub(super) fn listened(engine: &mut Engine<'_>, now: Millis, input: &Input) -> bool {
    let Input::Done(io, Done::Fetched(observed)) = input else {
        return false;
    };
    let good = matches!(
        observed,
        Observed::Response {
            status: 200..=299,
            ..
        }
    );
    let Some(late) = engine.verdicts.late(now, *io, good, &mut engine.breaker) else {
        return false;
    };
    engine.counters.late_answers += u64::from(late.heard);
    engine.counters.timeouts_convicted += u64::from(late.swept.convicted);
    engine.counters.unrecorded += u64::from(late.swept.acquitted);
    true
}

/// The model's last call timed out and it has answered no call since: a request that calls
/// it now will likely need its tiers at the deadline (speculative reads, [`super::reads`]).
pub(super) fn model_silent(engine: &Engine<'_>) -> bool {
    engine
        .last_timeout
        .is_some_and(|t| engine.verdicts.heard().is_none_or(|h| h < t))
}
