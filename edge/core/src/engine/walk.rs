//! [E-CASCADE] The cascade of one request, driven: the [`Walker`] says which tier to try
//! next; this performs its read — from the isolate's cache, by joining a read in flight, or
//! by starting one — waits at most the tier's timeout (the engine's timer, not the
//! driver's), and hands the result back to the walker.

use crate::cascade::{KvRead, TierStep, Walker};
use crate::classify::{Failure, FailureReason, Observed};
use crate::disclosure::Answer;
use crate::io::{Done, IoId, Op};

use super::command::Command;
use super::flight::{Flight, Req, TierWait};
use super::outbound;
use super::reads::{Plan, POLL_MS};
use super::steps::Step;
use super::timers::Timer;

impl<'p> Step<'_, 'p> {
    /// The origin failed with `failure` (or was never called): walk the cascade from its
    /// first tier. `Some` when the request is answered.
    pub(super) fn walk(&mut self, req: &mut Req<'p>, failure: Failure) -> Option<Answer> {
        req.walker = Some(Walker::new(failure));
        self.advance(req)
    }

    /// Tries tiers until one needs I/O (then waits) or the walk ends (the answer).
    fn advance(&mut self, req: &mut Req<'p>) -> Option<Answer> {
        let now = self.now;
        let (engine, f) = (&mut *self.engine, &mut *self.flight);
        loop {
            let open = req.open.len() as u32;
            let max_body = engine.policy().origin.max_body_bytes;
            let walker = req.walker.as_mut()?;
            let next = walker.next(&req.ctx, now, open, |tier, url| {
                let secret = f.tier_secrets.get(tier).cloned().flatten();
                outbound::tier(url, &f.common(), secret.as_deref(), max_body)
            });
            match next {
                TierStep::Answer(fb) => return Some(Answer::Fallback(fb)),
                TierStep::Exhausted => {
                    let timed_out = walker.failure.reason == FailureReason::MlTimeout
                        || req.ctx.deadline.expired(now);
                    return Some(Answer::Unavailable {
                        failure: walker.failure.clone(),
                        timed_out,
                    });
                }
                TierStep::Read { timeout_ms, op, .. } => {
                    let due = now.plus(timeout_ms);
                    match op {
                        Op::ReadKv { binding, key } => {
                            f.prefetched.retain(|(b, k)| !(*b == binding && *k == key));
                            let plan =
                                engine
                                    .reads
                                    .plan(now, (binding, &key), due, &mut engine.ios);
                            let (io, shared) = match plan {
                                // Read lately by this isolate: answered from memory, no I/O.
                                Plan::Cached(read) => {
                                    if let Some(fb) = walker.on_done(&req.ctx, now, Done::Kv(read))
                                    {
                                        return Some(Answer::Fallback(fb));
                                    }
                                    continue;
                                }
                                // Its result reaches the engine through the request that
                                // started it; this one looks for it when its timer fires.
                                Plan::Join(io) => (io, Some((binding, key))),
                                Plan::Start(io) => {
                                    self.cmds.push(Command::Start {
                                        io,
                                        op: Op::ReadKv { binding, key },
                                    });
                                    req.open.push(io);
                                    (io, None)
                                }
                            };
                            match shared {
                                Some(_) => {
                                    f.timers.set(Timer::TierPoll, now.plus(POLL_MS).min(due))
                                }
                                None => f.timers.stop(Timer::TierPoll),
                            }
                            f.timers.set(Timer::TierEnd, due);
                            req.tier = Some(TierWait {
                                io,
                                due,
                                http: false,
                                shared,
                            });
                            return None;
                        }
                        Op::Fetch(request) => {
                            let io = engine.ios.next();
                            self.cmds.push(Command::Start {
                                io,
                                op: Op::Fetch(request),
                            });
                            req.open.push(io);
                            f.timers.stop(Timer::TierPoll);
                            f.timers.set(Timer::TierEnd, due);
                            req.tier = Some(TierWait {
                                io,
                                due,
                                http: true,
                                shared: None,
                            });
                            return None;
                        }
                        // A tier never asks for the rate limiter.
                        Op::Limit { .. } => continue,
                    }
                }
            }
        }
    }

    /// A tier's KV read `io` ended with `read` (the isolate's cache already has it). `Some`
    /// when the request is answered.
    pub(super) fn tier_kv(&mut self, req: &mut Req<'p>, io: IoId, read: KvRead) -> Option<Answer> {
        if !req.tier.as_ref().is_some_and(|t| t.io == io && !t.http) {
            return None; // a read this request no longer waits for (or a speculative one)
        }
        disarm(self.flight, req);
        let walker = req.walker.as_mut()?;
        if let Some(fb) = walker.on_done(&req.ctx, self.now, Done::Kv(read)) {
            return Some(Answer::Fallback(fb));
        }
        self.advance(req)
    }

    /// A tier's fetch `io` ended with `observed`. `Some` when the request is answered.
    pub(super) fn tier_http(
        &mut self,
        req: &mut Req<'p>,
        io: IoId,
        observed: Observed,
    ) -> Option<Answer> {
        if !req.tier.as_ref().is_some_and(|t| t.io == io && t.http) {
            return None;
        }
        disarm(self.flight, req);
        let walker = req.walker.as_mut()?;
        if let Some(fb) = walker.on_done(&req.ctx, self.now, Done::Fetched(observed)) {
            return Some(Answer::Fallback(fb));
        }
        self.advance(req)
    }

    /// The cascade's `timer` fired: time to look again whether a read the request joined
    /// has ended (the engine keeps what the starting request reported), or the tier read in
    /// flight is out of time. `Some` when the request is answered.
    pub(super) fn tier_timer(&mut self, req: &mut Req<'p>, timer: Timer) -> Option<Answer> {
        let now = self.now;
        let t = req.tier.as_ref()?;
        if timer == Timer::TierPoll {
            let (binding, key) = t.shared.as_ref()?;
            if let Some(read) = self.engine.reads.cached(binding, key, now) {
                let io = t.io;
                return self.tier_kv(req, io, read);
            }
            // Look again, while the tier's timeout has not fired (it is handled next if it
            // has).
            let timers = &mut self.flight.timers;
            if timers.get(Timer::TierEnd).is_some() {
                timers.set(Timer::TierPoll, now.plus(POLL_MS).min(t.due));
            }
            return None;
        }
        let (io, http) = (t.io, t.http);
        if http {
            self.cmds.push(Command::Abort { io });
            req.open.retain(|o| *o != io);
            return self.tier_http(req, io, Observed::TimedOut);
        }
        // A KV read cannot be aborted: it keeps its connection until it ends.
        self.tier_kv(req, io, KvRead::TimedOut)
    }
}

/// The tier read no longer waited for: its timers no longer fire.
fn disarm(f: &mut Flight<'_>, req: &mut Req<'_>) {
    req.tier = None;
    f.timers.stop(Timer::TierPoll);
    f.timers.stop(Timer::TierEnd);
}
