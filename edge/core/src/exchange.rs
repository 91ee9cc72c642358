//! The race and the cascade of one request, as a state machine: `step(now, event) ->
//! Action`. The request engine ([`crate::engine`]) drives it between its own phases
//! (parameters, storm limit, breaker admission before; rendering, write-through, counting
//! after); the drivers perform the actions (a fetch, a KV read, a wait) and feed back what
//! happened with the time it happened. Nothing here waits, reads a clock or touches the
//! network, so `understudy simulate` and the tests replay it in virtual time.
//!
//! [`Gate`] is the breaker's verdict before the race (`BREAKER_OPEN` skips the origin) and
//! [`RetryPolicy`] whether and after how long to try the origin again. Raw observations are
//! classified here ([`crate::classify`]); [`Exchange::attempts`] records every origin attempt
//! for the breaker to learn from.

use crate::cascade::{Ctx, Fallback, KvRead, Note, TierStep, Walker};
use crate::classify::{classify, timeout_failure, Class, Failure, FailureReason, Items, Observed};
use crate::policy::ClientErrors;
use crate::time::Millis;

/// The breaker's verdict for this request, decided before the race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Race the origin.
    Allow,
    /// The breaker is open: go straight to the cascade with `BREAKER_OPEN`.
    Open,
}

/// Whether to try the origin again after a failed attempt.
pub trait RetryPolicy {
    /// `attempt` is the number of attempts made so far (1 after the first); `origin_left_ms`
    /// what is left of the race. `Some(wait_ms)` retries after `wait_ms`; the exchange still
    /// refuses a retry that would start after the race deadline.
    fn after_failure(
        &mut self,
        attempt: u32,
        failure: &Failure,
        origin_left_ms: u64,
    ) -> Option<u64>;
}

/// One attempt, no retry (until the retry issue lands).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

impl RetryPolicy for NoRetry {
    fn after_failure(&mut self, _: u32, _: &Failure, _: u64) -> Option<u64> {
        None
    }
}

/// What the adapter observed.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The request was validated; the breaker gave its verdict.
    Start(Gate),
    /// The origin attempt ended (the adapter has aborted it unless it succeeded).
    Origin(Observed),
    /// A [`Action::Wait`] elapsed.
    Woke,
    /// The pending KV read ended.
    Kv(KvRead),
    /// The pending HTTP tier ended (the adapter has aborted it unless it succeeded).
    Http(Observed),
}

/// What the adapter must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<'p> {
    /// Race the origin for at most `timeout_ms` (headers and body), then abort the loser.
    FetchOrigin { attempt: u32, timeout_ms: u64 },
    /// Wait `ms`, then send [`Event::Woke`].
    Wait { ms: u64 },
    /// Read `key` from KV namespace `binding`, waiting at most `timeout_ms`.
    ReadKv {
        tier: usize,
        binding: &'p str,
        key: String,
        timeout_ms: u64,
    },
    /// Fetch an HTTP tier (its own credential, never the origin's), verify `result_path`.
    FetchHttp {
        tier: usize,
        url: &'p str,
        timeout_ms: u64,
        credential_secret: Option<&'p str>,
        result_path: &'p [String],
    },
    /// Done: answer the client.
    Respond(Answer),
}

/// The request's answer, before it is rendered by [`crate::disclosure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Live {
        items: Items,
        personalized: bool,
    },
    Fallback(Fallback),
    /// No tier answered: 504 when the time ran out, 503 otherwise. Never a made-up success.
    Unavailable {
        failure: Failure,
        timed_out: bool,
    },
    /// The origin refused the caller's request ([`Class::Caller`]) and the policy passes
    /// that through: the origin's status with the error envelope, `retryable: false`.
    Rejected {
        failure: Failure,
    },
}

/// An origin attempt, for the breaker and the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub started: Millis,
    pub ended: Millis,
    /// The attempt's timeout (what "late" is measured against).
    pub timeout_ms: u64,
    pub result: Result<(), FailureReason>,
}

impl Attempt {
    pub fn latency_ms(&self) -> u64 {
        self.ended.since(self.started)
    }
}

#[derive(Debug, Clone)]
enum State {
    Idle,
    Racing { started: Millis, timeout_ms: u64 },
    Waiting,
    Cascading(Walker),
    Done,
}

/// One request's state.
pub struct Exchange<'p, R: RetryPolicy = NoRetry> {
    ctx: Ctx<'p>,
    retry: R,
    state: State,
    attempts: Vec<Attempt>,
    /// Connections this request still holds (see [`crate::cascade::MAX_CONNECTIONS`]).
    open: u32,
    notes: Vec<Note>,
    /// Whether the isolate's bulkhead lets another origin attempt start (set by the engine
    /// before each step).
    origin_open: bool,
    /// When the model last answered any call of this isolate (see [`Self::set_model_heard`]).
    model_heard: Option<Millis>,
}

impl<'p> Exchange<'p, NoRetry> {
    pub fn new(ctx: Ctx<'p>) -> Self {
        Exchange::with_retry(ctx, NoRetry)
    }
}

impl<'p, R: RetryPolicy> Exchange<'p, R> {
    pub fn with_retry(ctx: Ctx<'p>, retry: R) -> Self {
        Exchange {
            ctx,
            retry,
            state: State::Idle,
            attempts: Vec::new(),
            open: 0,
            notes: Vec::new(),
            origin_open: true,
            model_heard: None,
        }
    }

    /// The bulkhead's verdict for the next origin attempt: `false` sends the request to the
    /// cascade with `BULKHEAD_FULL` instead of calling the origin.
    pub fn set_origin_open(&mut self, open: bool) {
        self.origin_open = open;
    }

    /// When the model last answered (with any status) any call of this isolate: a timer that
    /// fires late is the edge's overload only if the model answered someone meanwhile
    /// ([`timeout_failure`]).
    pub fn set_model_heard(&mut self, at: Option<Millis>) {
        self.model_heard = at;
    }

    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// What the request knows: policy, catalog, validated parameters, deadline.
    pub fn ctx(&self) -> &Ctx<'p> {
        &self.ctx
    }

    /// Tiers skipped or missed, with reasons, in order.
    pub fn notes(&self) -> &[Note] {
        match &self.state {
            State::Cascading(w) => &w.notes,
            _ => &self.notes,
        }
    }

    /// The failure that sent the request into the cascade, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.state {
            State::Cascading(w) => Some(&w.failure),
            _ => None,
        }
    }

    /// Feeds what happened at `now`; returns what to do next. An event that does not fit the
    /// state (a bug in the adapter) ends the exchange in the cascade rather than panicking.
    pub fn step(&mut self, now: Millis, event: Event) -> Action<'p> {
        let state = std::mem::replace(&mut self.state, State::Done);
        match (state, event) {
            (State::Idle, Event::Start(Gate::Allow)) | (State::Waiting, Event::Woke) => {
                self.race(now)
            }
            (State::Idle, Event::Start(Gate::Open)) => self.cascade(
                now,
                Walker::new(Failure::new(
                    FailureReason::BreakerOpen,
                    "circuit breaker open",
                )),
            ),
            (
                State::Racing {
                    started,
                    timeout_ms,
                },
                Event::Origin(observed),
            ) => {
                self.open = self.open.saturating_sub(1);
                let o = &self.ctx.policy.origin;
                let result = match observed {
                    Observed::TimedOut => Err(timeout_failure(
                        now.since(started),
                        timeout_ms,
                        self.model_heard.is_some_and(|h| h > started),
                    )),
                    other => classify(&other, &o.result_path, o.max_body_bytes),
                };
                self.attempts.push(Attempt {
                    started,
                    ended: now,
                    timeout_ms,
                    result: result.as_ref().map(|_| ()).map_err(|f| f.reason),
                });
                match result {
                    Ok(items) => self.done(Answer::Live {
                        items,
                        personalized: self.ctx.params.is_personalized(),
                    }),
                    Err(f)
                        if f.reason.class() == Class::Caller
                            && o.client_errors == ClientErrors::PassThrough =>
                    {
                        self.done(Answer::Rejected { failure: f })
                    }
                    Err(f) => {
                        let left = self.ctx.deadline.origin_remaining(now);
                        let n = self.attempts.len() as u32;
                        // Only a dependency failure may be worth another attempt: a refused
                        // credential or request would be refused again.
                        let retry = match f.reason.class() {
                            Class::Dependency => self.retry.after_failure(n, &f, left),
                            _ => None,
                        };
                        match retry {
                            Some(ms) if ms < left => {
                                self.state = State::Waiting;
                                Action::Wait { ms }
                            }
                            _ => self.cascade(now, Walker::new(f)),
                        }
                    }
                }
            }
            (State::Cascading(mut w), Event::Kv(read)) => {
                if read != KvRead::TimedOut {
                    self.open = self.open.saturating_sub(1);
                }
                match w.on_kv(&self.ctx, now, read) {
                    Some(f) => self.finish(w, Answer::Fallback(f)),
                    None => self.cascade(now, w),
                }
            }
            (State::Cascading(mut w), Event::Http(observed)) => {
                self.open = self.open.saturating_sub(1);
                let result = w.pending_http_path(&self.ctx).map_or_else(
                    || {
                        Err(Failure::new(
                            FailureReason::MlBadResponse,
                            "no HTTP tier pending",
                        ))
                    },
                    |path| classify(&observed, path, self.ctx.policy.origin.max_body_bytes),
                );
                match w.on_http(&self.ctx, result) {
                    Some(f) => self.finish(w, Answer::Fallback(f)),
                    None => self.cascade(now, w),
                }
            }
            (State::Cascading(w), _) => self.cascade(now, w),
            (_, _) => self.cascade(
                now,
                Walker::new(Failure::new(
                    FailureReason::MlBadResponse,
                    "unexpected event",
                )),
            ),
        }
    }

    fn race(&mut self, now: Millis) -> Action<'p> {
        let attempt = self.attempts.len() as u32 + 1;
        if !self.origin_open {
            return self.cascade(
                now,
                Walker::new(Failure::new(
                    FailureReason::BulkheadFull,
                    "the isolate's origin calls in flight are at the cap",
                )),
            );
        }
        match self
            .ctx
            .deadline
            .origin_timeout(now, self.ctx.policy.origin.attempt_timeout_ms)
        {
            Some(timeout_ms) => {
                self.open += 1;
                self.state = State::Racing {
                    started: now,
                    timeout_ms,
                };
                Action::FetchOrigin {
                    attempt,
                    timeout_ms,
                }
            }
            None => self.cascade(
                now,
                Walker::new(Failure::new(
                    FailureReason::MlTimeout,
                    "race deadline passed",
                )),
            ),
        }
    }

    fn cascade(&mut self, now: Millis, mut w: Walker) -> Action<'p> {
        match w.next(&self.ctx, now, self.open) {
            TierStep::ReadKv {
                tier,
                binding,
                key,
                timeout_ms,
            } => {
                self.open += 1;
                self.state = State::Cascading(w);
                Action::ReadKv {
                    tier,
                    binding,
                    key,
                    timeout_ms,
                }
            }
            TierStep::FetchHttp {
                tier,
                url,
                timeout_ms,
                credential_secret,
                result_path,
            } => {
                self.open += 1;
                self.state = State::Cascading(w);
                Action::FetchHttp {
                    tier,
                    url,
                    timeout_ms,
                    credential_secret,
                    result_path,
                }
            }
            TierStep::Answer(f) => self.finish(w, Answer::Fallback(f)),
            TierStep::Exhausted => {
                let timed_out =
                    w.failure.reason == FailureReason::MlTimeout || self.ctx.deadline.expired(now);
                let failure = w.failure.clone();
                self.finish(w, Answer::Unavailable { failure, timed_out })
            }
        }
    }

    fn finish(&mut self, w: Walker, answer: Answer) -> Action<'p> {
        self.state = State::Cascading(w);
        Action::Respond(answer)
    }

    fn done(&mut self, answer: Answer) -> Action<'p> {
        self.state = State::Done;
        Action::Respond(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::deadline::Deadline;
    use crate::policy::Policy;
    use crate::request::{ParamValue, Params};
    use crate::testing::{seed_catalog, seed_policy, HOUR, NOW};
    use serde_json::json;

    fn params() -> Params {
        Params {
            values: vec![
                ParamValue {
                    name: "user_id".into(),
                    value: "alice".into(),
                    identity: true,
                },
                ParamValue {
                    name: "category".into(),
                    value: "audio".into(),
                    identity: false,
                },
            ],
        }
    }

    fn ctx<'a>(p: &'a Policy, c: &'a Catalog, q: &'a Params) -> Ctx<'a> {
        Ctx {
            policy: p,
            catalog: Some(c),
            params: q.clone(),
            deadline: Deadline::new(Millis(NOW), p.budget),
        }
    }

    fn at(ms: u64) -> Millis {
        Millis(NOW + ms)
    }

    fn ok(body: &str) -> Observed {
        Observed::Response {
            status: 200,
            retry_after: None,
            body: body.as_bytes().to_vec(),
        }
    }

    fn status(code: u16) -> Observed {
        Observed::Response {
            status: code,
            retry_after: None,
            body: Vec::new(),
        }
    }

    #[test]
    fn healthy_origin_is_a_live_personalised_answer() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        assert_eq!(
            ex.step(at(0), Event::Start(Gate::Allow)),
            Action::FetchOrigin {
                attempt: 1,
                timeout_ms: 45
            }
        );
        let a = ex.step(at(20), Event::Origin(ok(r#"{"items":[1]}"#)));
        assert_eq!(
            a,
            Action::Respond(Answer::Live {
                items: vec!["1".into()],
                personalized: true
            })
        );
        assert_eq!(
            ex.attempts(),
            &[Attempt {
                started: at(0),
                ended: at(20),
                timeout_ms: 45,
                result: Ok(())
            }]
        );
    }

    #[test]
    fn origin_hang_walks_the_cascade_inside_the_budget() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        ex.step(at(0), Event::Start(Gate::Allow));
        let a = ex.step(at(45), Event::Origin(Observed::TimedOut));
        assert!(matches!(a, Action::ReadKv { timeout_ms: 8, .. }));
        let a = ex.step(at(53), Event::Kv(KvRead::TimedOut));
        assert!(matches!(a, Action::ReadKv { timeout_ms: 5, .. }));
        let hit = KvRead::Value {
            value: Some(r#"{"items":[7]}"#.into()),
            metadata: Some(json!({"written_at": NOW - HOUR})),
        };
        let Action::Respond(Answer::Fallback(f)) = ex.step(at(55), Event::Kv(hit)) else {
            panic!()
        };
        assert_eq!(
            (f.tier.as_str(), f.reason),
            ("category", FailureReason::MlTimeout)
        );
        assert_eq!(ex.notes().len(), 1);
        assert_eq!(ex.failure().unwrap().reason, FailureReason::MlTimeout);
    }

    #[test]
    fn breaker_open_skips_the_origin() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        let a = ex.step(at(0), Event::Start(Gate::Open));
        assert!(matches!(a, Action::ReadKv { timeout_ms: 8, .. }));
        assert!(ex.attempts().is_empty());
        assert_eq!(ex.failure().unwrap().reason, FailureReason::BreakerOpen);
    }

    #[test]
    fn no_tier_left_is_504_on_timeout_and_503_otherwise() {
        let (mut p, c, q) = (seed_policy(), seed_catalog(), params());
        p.cascade.tiers.clear();
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        ex.step(at(0), Event::Start(Gate::Allow));
        let a = ex.step(at(45), Event::Origin(Observed::TimedOut));
        assert!(matches!(
            a,
            Action::Respond(Answer::Unavailable {
                timed_out: true,
                ..
            })
        ));
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        ex.step(at(0), Event::Start(Gate::Allow));
        let a = ex.step(at(3), Event::Origin(status(500)));
        assert!(matches!(
            a,
            Action::Respond(Answer::Unavailable {
                timed_out: false,
                ..
            })
        ));
    }

    struct Twice;
    impl RetryPolicy for Twice {
        fn after_failure(&mut self, attempt: u32, _: &Failure, _: u64) -> Option<u64> {
            (attempt < 2).then_some(10)
        }
    }

    #[test]
    fn the_retry_seam_waits_then_races_again_within_the_deadline() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let mut ex = Exchange::with_retry(ctx(&p, &c, &q), Twice);
        ex.step(at(0), Event::Start(Gate::Allow));
        assert_eq!(
            ex.step(at(5), Event::Origin(status(500))),
            Action::Wait { ms: 10 }
        );
        assert_eq!(
            ex.step(at(15), Event::Woke),
            Action::FetchOrigin {
                attempt: 2,
                timeout_ms: 30
            }
        );
        let a = ex.step(at(45), Event::Origin(Observed::TimedOut));
        assert!(matches!(a, Action::ReadKv { .. }));
        assert_eq!(ex.attempts().len(), 2);
        // A retry whose wait would outlast the race is not taken.
        let mut ex = Exchange::with_retry(ctx(&p, &c, &q), Twice);
        ex.step(at(0), Event::Start(Gate::Allow));
        let a = ex.step(at(40), Event::Origin(status(500)));
        assert!(matches!(a, Action::ReadKv { .. }));
    }

    #[test]
    fn a_kv_read_abandoned_on_timeout_keeps_its_connection() {
        let (mut p, c, q) = (seed_policy(), seed_catalog(), params());
        p.budget.total_ms = 10_000;
        let user = p.cascade.tiers[0].clone();
        p.cascade.tiers = std::iter::repeat_n(user, 8).collect();
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        ex.step(at(0), Event::Start(Gate::Open));
        let mut reads = 1;
        let mut t = 0;
        loop {
            t += 8;
            match ex.step(at(t), Event::Kv(KvRead::TimedOut)) {
                Action::ReadKv { .. } => reads += 1,
                Action::Respond(Answer::Unavailable { .. }) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(reads, crate::cascade::MAX_CONNECTIONS);
        assert_eq!(
            ex.notes()
                .iter()
                .filter(|n| n.code == "CONNECTION_LIMIT")
                .count(),
            2
        );
    }

    #[test]
    fn a_caller_4xx_passes_through_or_falls_back_as_the_policy_says_and_is_never_retried() {
        let (mut p, c, q) = (seed_policy(), seed_catalog(), params());
        p.origin.attempts = 3;
        p.origin.retry_on = crate::policy::RetryOn {
            timeout: true,
            connect: true,
            status_408: true,
            status_429: true,
            status_5xx: true,
        };
        let mut ex = Exchange::with_retry(ctx(&p, &c, &q), Twice);
        ex.step(at(0), Event::Start(Gate::Allow));
        let Action::Respond(Answer::Rejected { failure }) =
            ex.step(at(3), Event::Origin(status(404)))
        else {
            panic!("pass-through")
        };
        assert_eq!(
            (failure.reason, failure.status),
            (FailureReason::Ml4xx, Some(404))
        );
        assert_eq!(ex.attempts().len(), 1, "never retried");

        p.origin.client_errors = ClientErrors::Fallback;
        let mut ex = Exchange::with_retry(ctx(&p, &c, &q), Twice);
        ex.step(at(0), Event::Start(Gate::Allow));
        assert!(matches!(
            ex.step(at(3), Event::Origin(status(404))),
            Action::ReadKv { .. }
        ));
        assert_eq!(ex.failure().unwrap().reason, FailureReason::Ml4xx);
        assert_eq!(ex.attempts().len(), 1);
    }

    #[test]
    fn an_out_of_place_event_does_not_panic() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let mut ex = Exchange::new(ctx(&p, &c, &q));
        let a = ex.step(at(0), Event::Woke);
        assert!(matches!(a, Action::ReadKv { .. }));
    }
}
