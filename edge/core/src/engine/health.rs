//! The origin's health as this isolate sees it ([`OriginHealth`], docs/adr/010, "The
//! engine's components"): the breaker, the timeouts awaiting the model's word
//! ([`super::verdict`]), how late the isolate's timers fire ([`super::lag`]), when the
//! isolate warmed and when the model last timed out.
//!
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

use crate::breaker::{member::Member, Admission, Breaker, Mode, Outcome as BreakerOutcome};
use crate::classify::{BreakerRecord, FailureReason, Observed};
use crate::io::Done;
use crate::metrics::Counters;
use crate::time::Millis;

use super::command::Input;
use super::flight::Attempt;
use super::lag::Lag;
use super::verdict::{Listening, Verdicts};

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

/// The origin's health as this isolate sees it: the breaker and what it waits to learn.
#[derive(Debug)]
pub(super) struct OriginHealth {
    breaker: Breaker,
    /// When the model was last heard from, and the timeouts waiting for it ([`super::verdict`]).
    verdicts: Verdicts,
    /// How late the isolate's timers fire ([`super::lag`]).
    lag: Lag,
    /// When the isolate's first origin attempt ended: attempts started before it ran on a
    /// cold isolate, and their timeouts and latencies are not the model's to answer for.
    warm_since: Option<Millis>,
    /// When an origin attempt last ended in `ML_TIMEOUT`: with no answer from the model
    /// since, new attempts start their tier reads alongside ([`OriginHealth::model_silent`]).
    last_timeout: Option<Millis>,
    /// The latency at or under which the breaker judges no success slow
    /// ([`super::Engine::new`]).
    slow_call_ms: u64,
}

impl OriginHealth {
    /// `breaker`, judging no success slow at or under `slow_call_ms`.
    pub(super) fn new(breaker: Breaker, slow_call_ms: u64) -> OriginHealth {
        OriginHealth {
            breaker,
            verdicts: Verdicts::default(),
            lag: Lag::default(),
            warm_since: None,
            last_timeout: None,
            slow_call_ms,
        }
    }

    /// [F-SCOPE] The breaker's fleet member, when it is fleet-scoped.
    pub(super) fn member(&mut self) -> Option<&mut Member> {
        self.breaker.member()
    }

    /// The status endpoint's account of the breaker as of `now` ([`crate::admin::breaker_status`]).
    pub(super) fn status(&mut self, now: Millis) -> serde_json::Value {
        crate::admin::breaker_status(&mut self.breaker, now)
    }

    /// The breaker's mode as of `now`.
    pub(super) fn mode(&mut self, now: Millis) -> Mode {
        self.breaker.mode(now)
    }

    /// The breaker's mode as of `now`, in the policy's vocabulary.
    pub(super) fn mode_name(&mut self, now: Millis) -> &'static str {
        self.breaker.mode_name(now)
    }

    /// The timeouts whose wait for the model's word is over at `now` are judged (counted in
    /// `counters`): before an attempt asks to start.
    pub(super) fn judge_waiting(&mut self, now: Millis, counters: &mut Counters) {
        let swept = self.verdicts.sweep(now, &mut self.breaker);
        counters.convicted(swept.convicted);
    }

    /// May an attempt start at `now`?
    pub(super) fn admit(&mut self, now: Millis) -> Admission {
        self.breaker.admit(now)
    }

    /// An admission whose attempt was not made, or whose end is no evidence.
    pub(super) fn release(&mut self, admission: Admission) {
        self.breaker.release(admission);
    }

    /// A timer (or the driver's probe) fired `late_ms` after it was due, at `now`.
    pub(super) fn lag_sample(&mut self, now: Millis, late_ms: u64) {
        self.lag.sample(now, late_ms);
    }

    /// Whether the model answered any call started at or after `at`.
    pub(super) fn heard_since(&self, at: Millis) -> bool {
        self.verdicts.heard_since(at)
    }

    /// The isolate listens to timed-out attempt `l` (its requests) until `l.until`: false
    /// when it cannot ([`Verdicts::listen`]).
    pub(super) fn listen(&mut self, l: Listening, now: Millis) -> bool {
        self.verdicts.listen(l, now)
    }

    /// What the breaker learns from attempt `a`, made under `admission` (counted in
    /// `counters`). `hedge_won_after`: the attempt's answer came from its hedge, sent that
    /// many ms after the first request. Returns the origin's own answer time for the hedge's
    /// window, when the attempt tells one.
    pub(super) fn record(
        &mut self,
        a: &Attempt,
        admission: Admission,
        hedge_won_after: Option<u64>,
        counters: &mut Counters,
    ) -> Option<u64> {
        let latency = a.latency_ms();
        let class = a.result.err().map(FailureReason::class);
        if let Some(c) = class {
            c.count(counters);
        }
        let heard_meanwhile = self.verdicts.heard_since(a.started);
        if a.result == Err(FailureReason::MlTimeout) {
            self.last_timeout = Some(self.last_timeout.map_or(a.ended, |t| t.max(a.ended)));
        }
        if a.result
            .map_or_else(FailureReason::model_answered, |()| true)
        {
            let acquitted = self.verdicts.model_answered(a.ended, &mut self.breaker);
            counters.not_recorded(acquitted.acquitted);
        }
        let swept = self.verdicts.sweep(a.ended, &mut self.breaker);
        counters.convicted(swept.convicted);
        let cold = match self.warm_since {
            None => {
                self.warm_since = Some(a.ended);
                true
            }
            Some(warm) => a.started < warm,
        };
        if admission == Admission::Reject {
            return None;
        }
        // An isolate that knows it is busy — its timers fire more than [`BUSY_MS`] late —
        // cannot tell the model's latency from its own queue ([`Self::busy`]).
        let queue_delay = self.lag.recent(a.ended);
        // A cold isolate's timeout is its own slowness (instantiation, connection set-up), not
        // the model's; what the model said on a cold isolate is its own like any other answer.
        let cold_timeout = cold && a.result == Err(FailureReason::MlTimeout);
        if cold_timeout || class.is_some_and(|c| c.breaker() == BreakerRecord::Unrecorded) {
            counters.not_recorded(1);
            self.breaker.release(admission);
            return None;
        }
        // A timeout on a busy isolate: the model's only if it stays silent ([`super::verdict`]).
        if a.result == Err(FailureReason::MlTimeout) && self.busy(a.ended, a.started, a.timeout_ms)
        {
            let waiting = !heard_meanwhile
                && self.verdicts.timeout_in_silence(
                    a.started,
                    a.ended,
                    a.timeout_ms,
                    admission,
                    latency,
                );
            if !waiting {
                counters.not_recorded(1);
                self.breaker.release(admission);
            }
            return None;
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
            model_latency = model_latency.min(self.slow_call_ms);
        }
        // The hedge's delay follows the origin's own answer times: an answer the hedge won
        // took what it took from when the hedge went out. Counted from the first request's
        // start, every won hedge would push the p95 — and the next hedge — later, until the
        // hedges came too late to win (the bench's long-tail case settled at 0.97 live).
        let hedge_latency = (a.result.is_ok() && !cold).then(|| {
            hedge_won_after.map_or(model_latency, |after| model_latency.saturating_sub(after))
        });
        let outcome = match a.result {
            Ok(()) => BreakerOutcome::success(model_latency),
            Err(r) => match r.class().breaker() {
                BreakerRecord::Nothing | BreakerRecord::Unrecorded => {
                    self.breaker.release(admission);
                    return None;
                }
                BreakerRecord::Failure => match r {
                    FailureReason::MlTimeout => {
                        counters.timeout_counted();
                        BreakerOutcome::timeout(latency)
                    }
                    _ => BreakerOutcome::failure(latency),
                },
            },
        };
        let shunned = self.breaker.mode(a.ended) != Mode::Healthy;
        self.breaker.record(a.ended, admission, outcome);
        if shunned && self.breaker.mode(a.ended) == Mode::Healthy {
            // The breaker closed: the whole load turns to the model at once, on connections
            // the open breaker let go cold. That wave is judged as a fresh isolate's first is.
            self.warm_since = None;
        }
        hedge_latency
    }

    /// Whether an attempt of `timeout_ms` started at `started` and timing out at `now` did
    /// so on a busy isolate — one that knows it is saturated, or whose timer fired more than
    /// [`BUSY_MS`] late — where the model's answer may be sitting in the isolate's own queue.
    pub(super) fn busy(&self, now: Millis, started: Millis, timeout_ms: u64) -> bool {
        self.lag.recent(now) > BUSY_MS || now.since(started) > timeout_ms.saturating_add(BUSY_MS)
    }

    /// Until when the isolate listens for the requests of an attempt of `timeout_ms` started
    /// at `started`, due at `due`, timed out at `now`: on a busy isolate ([`Self::busy`]) as
    /// long as its queue may take to hand over an answer that came by the deadline — how
    /// late its timers run (the largest of the last second, or this one's, whichever is
    /// larger) plus [`BUSY_MS`], at most one more timeout. Longer would hear a slow model's
    /// answers too, and let them acquit its timeouts. `None` on a calm isolate: the timeout
    /// is the model's, the requests are aborted at once.
    pub(super) fn listening_until(
        &self,
        now: Millis,
        started: Millis,
        timeout_ms: u64,
        due: Millis,
    ) -> Option<Millis> {
        if !self.busy(now, started, timeout_ms) {
            return None;
        }
        let lag = self.lag.recent(now).max(now.since(due));
        Some(now.plus(lag.saturating_add(BUSY_MS).min(timeout_ms)))
    }

    /// Fetch `io` of `input` ended at `now`: true when the isolate was listening to it after
    /// its timeout ([`Verdicts::listen`]). A good answer then acquits the timeouts awaiting
    /// the model's word ([`Verdicts::late`]); nothing else is learnt from it (the request fell
    /// back at its deadline). Counted in `counters`.
    pub(super) fn listened(&mut self, now: Millis, input: &Input, counters: &mut Counters) -> bool {
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
        let Some(late) = self.verdicts.late(now, *io, good, &mut self.breaker) else {
            return false;
        };
        counters.late_answer(late.heard);
        counters.convicted(late.swept.convicted);
        counters.not_recorded(late.swept.acquitted);
        true
    }

    /// The model's last call timed out and it has answered no call since: a request that
    /// calls it now will likely need its tiers at the deadline (speculative reads,
    /// [`super::reads`]).
    pub(super) fn model_silent(&self) -> bool {
        self.last_timeout
            .is_some_and(|t| self.verdicts.heard().is_none_or(|h| h < t))
    }
}
