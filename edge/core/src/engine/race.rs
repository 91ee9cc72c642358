//! [E-RACE] The origin race of one request: each attempt, its timeout, its hedge, and each
//! retry — every one of them decided here, from the driver's reports and the instants it
//! reports them at (docs/adr/010-the-engine-owns-time.md).
//!
//! An attempt asks the breaker first — the first one and every retry (resilience4j's
//! semantics: a retry is a call, and a call the breaker refuses is not made). It takes a
//! bulkhead slot, sends the request (and maybe a hedge later), and ends at whichever comes
//! first: the attempt's answer, or its timer. A failure the policy retries waits a
//! full-jitter backoff inside the race deadline, unless the breaker has opened meanwhile;
//! any other outcome is the answer or goes to the cascade.

use crate::breaker::{Admission, Mode};
use crate::cascade::KvRead;
use crate::classify::{classify, timeout_failure, CallerGets, Failure, FailureReason, Observed};
use crate::disclosure::Answer;
use crate::io::{IoId, Op};
use crate::policy::ClientErrors;

use super::calls::End;
use super::command::Command;
use super::flight::{Attempt, Calling, Flight, Req};
use super::hedge::{Pair, Plan, Settled};
use super::outbound;
use super::reads::Plan as ReadPlan;
use super::steps::Step;
use super::timers::Timer;
use super::verdict::Listening;

/// Most speculative tier reads per attempt: with the origin call and a hedge a request stays
/// well inside [`crate::cascade::MAX_CONNECTIONS`].
const PREFETCH_MAX: usize = 2;

impl<'p> Step<'_, 'p> {
    /// Starts the next attempt — the breaker asked first — or, when none can be made, walks
    /// the cascade. `Some` when the request is answered.
    pub(super) fn attempt(&mut self, req: &mut Req<'p>) -> Option<Answer> {
        let now = self.now;
        let engine = &mut *self.engine;
        engine.health.judge_waiting(now, &mut engine.counters);
        if req.attempts.is_empty() && !req.asking {
            // [F-SCOPE] An isolate in the dark asks the coordinator with its first call.
            if let Some(call) = engine.health.member().and_then(|m| m.ask(now)) {
                self.cmds.push(Command::Ask(call));
                req.asking = true;
            }
        }
        let admission = engine.health.admit(now);
        if admission == Admission::Reject {
            let failure = match req.last_failure.take() {
                // A retry the breaker refuses: the request falls back with what the model
                // did to it, and the log line says why it was not tried again.
                Some(last) => {
                    self.flight.note(
                        "RETRY_REFUSED",
                        format!("the breaker is {}", engine.health.mode_name(now)),
                    );
                    last
                }
                None => Failure::new(FailureReason::BreakerOpen, "circuit breaker open"),
            };
            return self.walk(req, failure);
        }
        let policy = engine.policy();
        let Some(timeout_ms) = req
            .ctx
            .deadline
            .origin_timeout(now, policy.origin.attempt_timeout_ms)
        else {
            engine.health.release(admission);
            let failure = req
                .last_failure
                .take()
                .unwrap_or_else(|| Failure::new(FailureReason::MlTimeout, "race deadline passed"));
            return self.walk(req, failure);
        };
        let Some(lease) = engine.capacity.lease(policy.origin.max_in_flight) else {
            engine.health.release(admission);
            let failure = Failure::new(
                FailureReason::BulkheadFull,
                "the isolate's origin calls in flight are at the cap",
            );
            return self.walk(req, failure);
        };
        let io = engine.ios.next();
        let hedge = policy.origin.hedge.as_ref();
        let hedge_after =
            engine
                .capacity
                .hedge_after(hedge, now, timeout_ms, self.flight.repeatable);
        let request = self.origin_request(req);
        self.cmds.push(Command::Start {
            io,
            op: Op::Fetch(request),
        });
        req.open.push(io);
        let probe = admission == Admission::Probe;
        req.calls.start(io, now, now.plus(timeout_ms), false, probe);
        if self.engine.health.model_silent() || admission == Admission::Probe {
            self.prefetch(req);
        }
        req.last_failure = None;
        let c = Calling {
            started: now,
            timeout_ms,
            due: now.plus(timeout_ms),
            admission,
            _lease: lease,
            pair: Pair::new(io, now, hedge_after),
        };
        self.flight.timers.set(Timer::Attempt, c.due);
        if let Some(at) = c.pair.hedge_due() {
            self.flight.timers.set(Timer::Hedge, at);
        }
        req.calling = Some(c);
        None
    }

    fn origin_request(&self, req: &Req<'_>) -> crate::http::Outbound {
        let f = &*self.flight;
        outbound::origin(
            self.engine.policy(),
            &f.origin_url,
            &req.ctx.params,
            &f.common(),
            f.idempotency_key.as_deref(),
            f.origin_credential.as_ref(),
        )
    }

    /// Fetch `io` ended with `observed`. `Some` when the request is answered.
    pub(super) fn fetched(
        &mut self,
        req: &mut Req<'p>,
        io: IoId,
        observed: Observed,
    ) -> Option<Answer> {
        let c = req.calling.as_mut()?;
        let good = matches!(
            observed,
            Observed::Response {
                status: 200..=299,
                ..
            }
        );
        match c.pair.settle(io, good)? {
            Settled::Wait => {
                // Not good (a 2xx is), so classifying it reads no body.
                let o = &self.engine.policy().origin;
                if let Err(failure) = classify(&observed, &o.result_path, o.max_body_bytes) {
                    req.calls.end(io, self.now, failed(&failure));
                }
                None
            }
            Settled::Answer { won, abort } => {
                if let Some(other) = abort {
                    self.cmds.push(Command::Abort { io: other });
                    req.open.retain(|o| *o != other);
                    req.calls.end(other, self.now, End::Abandoned);
                }
                self.attempt_ended(req, observed, Some(io), won)
            }
        }
    }

    /// The race's `timer` fired: the attempt's end, its hedge, or the end of a retry's wait.
    /// `Some` when the request is answered.
    pub(super) fn race_timer(&mut self, req: &mut Req<'p>, timer: Timer) -> Option<Answer> {
        if timer == Timer::Backoff {
            return self.attempt(req);
        }
        let now = self.now;
        if let Some(c) = req.calling.as_mut() {
            if timer == Timer::Attempt {
                // The timer won: the fallback starts now; the requests still out are aborted
                // — on a busy isolate, only once the isolate has taken what its queue may
                // hold ([`super::health::OriginHealth::listening_until`]). Requests listened
                // to keep their connections and their attempt's bulkhead slot until then.
                let out: Vec<IoId> = c.pair.out().collect();
                let engine = &mut *self.engine;
                let health = &engine.health;
                let until = health.listening_until(now, c.started, c.timeout_ms, c.due);
                let busy = health.busy(now, c.started, c.timeout_ms);
                let heard = until.is_some_and(|until| {
                    let l = Listening {
                        ios: out.clone(),
                        until,
                        _lease: engine.capacity.listen_lease(),
                    };
                    engine.health.listen(l, now)
                });
                for io in out {
                    req.calls.end(io, now, End::Cut { busy });
                    match until {
                        Some(until) if heard => self.cmds.push(Command::Hear { io, until }),
                        _ => {
                            self.cmds.push(Command::Abort { io });
                            req.open.retain(|o| *o != io);
                        }
                    }
                }
                return self.attempt_ended(req, Observed::TimedOut, None, false);
            }
            if timer == Timer::Hedge && c.pair.hedge_due().is_some() {
                let io = self.engine.ios.next();
                if c.pair.send(now, io) {
                    let (probe, due) = (c.admission == Admission::Probe, c.due);
                    self.engine.counters.hedge_sent();
                    let after = now.since(c.started);
                    self.flight.note(
                        "HEDGE_SENT",
                        format!("the first request had not answered in {after} ms"),
                    );
                    let request = self.origin_request(req);
                    self.cmds.push(Command::Start {
                        io,
                        op: Op::Fetch(request),
                    });
                    req.open.push(io);
                    req.calls.start(io, now, due, true, probe);
                }
            }
        }
        None
    }

    /// The attempt in flight ended with `observed` — the answer of its call `io`, or its
    /// timer (`None`) — (`won`: its hedge's good answer).
    fn attempt_ended(
        &mut self,
        req: &mut Req<'p>,
        observed: Observed,
        io: Option<IoId>,
        won: bool,
    ) -> Option<Answer> {
        let now = self.now;
        let c = req.calling.take()?;
        disarm(self.flight);
        let engine = &mut *self.engine;
        let policy = engine.policy();
        let o = &policy.origin;
        let result = match &observed {
            Observed::TimedOut => Err(timeout_failure(
                now.since(c.started),
                c.timeout_ms,
                engine.health.heard_since(c.started),
            )),
            other => classify(other, &o.result_path, o.max_body_bytes),
        };
        if let Some(io) = io {
            let end = match &result {
                Ok(_) => End::Ok,
                Err(failure) => failed(failure),
            };
            req.calls.end(io, now, end);
        }
        if let Plan::Due { .. } = c.pair.hedge {
            // The hedge's token was taken but it never went out.
            engine.capacity.refund(o.hedge.as_ref());
        }
        engine.counters.hedge_won(won);
        if won {
            self.flight.note(
                "HEDGE_WON",
                format!(
                    "the hedge answered first, {} ms after the first request",
                    now.since(c.started)
                ),
            );
        }
        let attempt = Attempt {
            started: c.started,
            ended: now,
            timeout_ms: c.timeout_ms,
            result: result.as_ref().map(|_| ()).map_err(|x| x.reason),
        };
        let answered = engine.health.record(
            &attempt,
            c.admission,
            c.pair.sent_after().filter(|_| won),
            &mut engine.counters,
        );
        if let Some(own) = answered {
            engine.capacity.answered(now, own);
        }
        req.attempts.push(attempt);
        drop(c); // its bulkhead slot is free
        let failure = match result {
            Ok(items) => {
                return Some(Answer::Live {
                    items,
                    personalized: req.ctx.params.is_personalized(),
                })
            }
            Err(failure) => failure,
        };
        let class = failure.reason.class();
        match class.caller_gets() {
            CallerGets::ClientErrors => {
                return match o.client_errors {
                    ClientErrors::PassThrough => Some(Answer::Rejected { failure }),
                    ClientErrors::Fallback => self.walk(req, failure),
                };
            }
            CallerGets::Fallback => {}
        }
        // Only a class worth another attempt is retried (a dependency failure: a refused
        // credential would be refused again, and the edge's own slowness is not the model's).
        let retry = if class.retried() {
            let left = req.ctx.deadline.origin_remaining(now);
            let n = req.attempts.len() as u32;
            req.retry
                .after_failure(n, &failure, left)
                .filter(|ms| *ms < left)
        } else {
            None
        };
        match retry {
            // A retry is a call: once the breaker has opened, none is made.
            Some(_) if engine.health.mode(now) == Mode::Open => {
                self.flight.note(
                    "RETRY_REFUSED",
                    format!("the breaker is {}", engine.health.mode_name(now)),
                );
                self.walk(req, failure)
            }
            Some(ms) => {
                req.last_failure = Some(failure);
                self.flight.timers.set(Timer::Backoff, now.plus(ms));
                None
            }
            None => self.walk(req, failure),
        }
    }

    /// [F-SCOPE] The coordinator answered the report the request asked with (or it failed),
    /// and the isolate heard it: if the fleet opened, the call still out is cut and the
    /// request goes to the cascade at once — the call's end is no evidence (it is abandoned,
    /// not recorded). `Some` when the request is answered.
    pub(super) fn asked(&mut self, req: &mut Req<'p>) -> Option<Answer> {
        let now = self.now;
        req.asking = false;
        let engine = &mut *self.engine;
        if req.calling.is_none() || !engine.health.member().is_some_and(|m| m.fleet_opened(now)) {
            return None;
        }
        let c = req.calling.take()?;
        disarm(self.flight);
        let out: Vec<IoId> = c.pair.out().collect();
        for io in out {
            self.cmds.push(Command::Abort { io });
            req.open.retain(|o| *o != io);
            req.calls.end(io, now, End::Abandoned);
        }
        if let Plan::Due { .. } = c.pair.hedge {
            engine
                .capacity
                .refund(engine.policy().origin.hedge.as_ref());
        }
        engine.health.release(c.admission);
        // An attempt made, and ended by the opening: the log line's, not the breaker's.
        req.attempts.push(Attempt {
            started: c.started,
            ended: now,
            timeout_ms: c.timeout_ms,
            result: Err(FailureReason::BreakerOpen),
        });
        drop(c); // its bulkhead slot is free
        self.flight.note(
            "FLEET_OPENED",
            "the fleet's breaker opened while the call was out: it was cut".into(),
        );
        let failure = Failure::new(FailureReason::BreakerOpen, "circuit breaker open");
        self.walk(req, failure)
    }

    /// [E-CASCADE] Speculative tier reads, asked for when the model has gone silent or the
    /// call is a probe: the request will likely need its tiers at the deadline, and a read
    /// started now is done by then (issue 13: deadline to answer from KV). Each tier's
    /// speculative read ([`crate::tier::Kind::speculative_read`]) up to the first tier that
    /// answers from memory or the first whose key the isolate holds a value of (which will
    /// likely answer), at most [`PREFETCH_MAX`], less the keys read lately, read now, or
    /// already asked for by this request.
    fn prefetch(&mut self, req: &mut Req<'p>) {
        let now = self.now;
        let (engine, f) = (&mut *self.engine, &mut *self.flight);
        let keep_until = now.plus(req.ctx.deadline.remaining(now));
        let policy = req.ctx.policy;
        let mut started = 0;
        for tier in &policy.cascade.tiers {
            // A tier that answers from memory: the request will not need the tiers after it.
            if tier.kind.local() {
                break;
            }
            let Some(kv) = tier.kind.speculative_read() else {
                continue;
            };
            if started >= PREFETCH_MAX {
                break;
            }
            let Some(key) = kv.key.render(|n| req.ctx.params.lookup(n)) else {
                continue;
            };
            let binding = kv.binding;
            match engine.reads.cached(binding, &key, now) {
                Some(KvRead::Value { value: Some(_), .. }) => break,
                Some(_) => continue,
                None => {}
            }
            if engine.reads.in_flight(binding, &key, now)
                || f.prefetched.iter().any(|(b, k)| *b == binding && *k == key)
            {
                continue;
            }
            let plan = engine
                .reads
                .plan(now, (binding, &key), keep_until, &mut engine.ios);
            if let ReadPlan::Start(io) = plan {
                self.cmds.push(Command::Start {
                    io,
                    op: Op::ReadKv {
                        binding,
                        key: key.clone(),
                    },
                });
                req.open.push(io);
                f.prefetched.push((binding, key));
                started += 1;
            }
        }
        engine.counters.prefetched(started);
    }
}

/// The attempt in flight ended (or was cut): its timeout and its hedge no longer fire.
fn disarm(f: &mut Flight<'_>) {
    f.timers.stop(Timer::Attempt);
    f.timers.stop(Timer::Hedge);
}

/// How a call that brought `failure` ended, for the log line.
fn failed(failure: &Failure) -> End {
    End::Failed {
        reason: failure.reason,
        status: failure.status,
        retry_after_s: failure.retry_after_s,
    }
}
