//! Retries in virtual time, through the same driver `simulate` uses: each retry is a call
//! the breaker is asked about first (issue 23: retries in flight ignored the breaker).

use super::*;
use crate::engine::virtual_io::{Arrival, Virtual, World};

/// A model that answers every call with `status` after `latency_ms`; KV misses after 1 ms.
pub(super) struct Failing {
    pub(super) status: u16,
    pub(super) latency_ms: u64,
    pub(super) calls: u64,
    pub(super) replies: Vec<Reply>,
}

impl<'p> World<'p> for Failing {
    fn perform(&mut self, _: u64, _: Millis, op: &Op<'p>) -> Option<(u64, Done)> {
        match op {
            Op::Fetch(_) => {
                self.calls += 1;
                Some((self.latency_ms, Done::Fetched(status(self.status))))
            }
            Op::ReadKv { .. } => Some((1, Done::Kv(miss()))),
            Op::Limit { .. } => Some((0, Done::Limited(Ok(true)))),
        }
    }

    fn answered(&mut self, _: u64, _: Millis, reply: Reply) {
        self.replies.push(reply);
    }
}

/// Seed 004's orders API in short: 3 attempts, a 100 ms backoff base, retries on 5xx, a
/// consecutive breaker of 5, and no tier (503 when the model fails).
pub(super) fn orders_api() -> crate::policy::Policy {
    let mut p = seed_policy();
    p.budget.total_ms = 10_000;
    p.budget.deadline_ms = 9_000;
    p.origin.attempt_timeout_ms = 5_000;
    p.origin.attempts = 3;
    p.origin.backoff_base_ms = 100;
    p.origin.backoff_max_ms = 1_000;
    p.origin.retry_on.status_5xx = true;
    p.breaker = BreakerCfg::Consecutive {
        failures: 5,
        cooldown_ms: 30_000,
    };
    p.cascade.tiers.clear();
    p.cascade.promise = crate::policy::Promise::BestEffort;
    p
}

pub(super) fn arrival(seed: u64) -> Arrival {
    Arrival {
        method: "GET".into(),
        path: format!("/recommendations/user{seed}"),
        query: String::new(),
        headers: Vec::new(),
        seed,
    }
}

#[test]
fn once_the_breaker_opens_no_request_retries_an_origin_it_has_judged_down() {
    let b = bake(orders_api());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Eight concurrent requests against a model answering 503: the first five failures open
    // the breaker. Every request had 3 attempts to spend; none is spent on a breaker that is
    // open — neither a retry decided after the breaker opened nor one whose wait ended after.
    let mut world = Failing {
        status: 503,
        latency_ms: 5,
        calls: 0,
        replies: Vec::new(),
    };
    let mut v = Virtual::new();
    for i in 0..8 {
        v.arrive((NOW + 100) * 1000, i, arrival(i + 1));
    }
    v.run(&mut e, &env(), &mut world);
    assert_eq!(world.replies.len(), 8);
    assert_eq!(
        world.calls, 8,
        "one call each: no retry once the breaker is open"
    );
    for r in &world.replies {
        assert_eq!(r.status, 503);
        let l = log(r);
        assert_eq!(l["attempts"], 1, "{l}");
        assert_eq!(l["breaker_mode"], "OPEN");
        assert!(l["notes"].to_string().contains("RETRY_REFUSED"), "{l}");
        assert_eq!(r.header("X-Degraded-Reason"), Some("ML_5XX"));
    }
}

#[test]
fn while_the_breaker_stays_closed_a_failed_call_is_retried_inside_the_budget() {
    let b = bake(orders_api());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // One request at a time: two failures never reach the breaker's five.
    let mut world = Failing {
        status: 503,
        latency_ms: 5,
        calls: 0,
        replies: Vec::new(),
    };
    let mut v = Virtual::new();
    v.arrive((NOW + 100) * 1000, 0, arrival(1));
    v.run(&mut e, &env(), &mut world);
    assert_eq!(world.calls, 3, "all three attempts");
    let l = log(&world.replies[0]);
    assert_eq!(l["attempts"], 3);
    assert_eq!(l["breaker_mode"], "CLOSED");
    assert!(!l["notes"].to_string().contains("RETRY_REFUSED"));
}

/// A model answering each call after `latency_ms` (never: `None`), on an isolate whose
/// timers fire `late_ms` late.
struct Late {
    latency_ms: Option<u64>,
    late_ms: u64,
    replies: Vec<Reply>,
}

impl<'p> World<'p> for Late {
    fn perform(&mut self, _: u64, _: Millis, op: &Op<'p>) -> Option<(u64, Done)> {
        match op {
            Op::Fetch(_) => self.latency_ms.map(|ms| (ms, Done::Fetched(ok()))),
            Op::ReadKv { .. } => Some((1, Done::Kv(miss()))),
            Op::Limit { .. } => Some((0, Done::Limited(Ok(true)))),
        }
    }

    fn timer_late(&mut self, _: u64, _: Millis) -> u64 {
        self.late_ms
    }

    fn answered(&mut self, _: u64, _: Millis, reply: Reply) {
        self.replies.push(reply);
    }
}

#[test]
fn in_virtual_time_a_listened_call_is_heard_until_its_end_and_then_aborted() {
    // The 45 ms timers fire 10 ms late (at 55); the isolate listens until 70. A model that
    // answers at 58 is heard and acquitted; a hung one is aborted at 70 and convicted.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut modes = Vec::new();
    for latency_ms in [Some(58), None] {
        let mut e = Engine::new(&b).unwrap();
        warm(&mut e);
        let mut world = Late {
            latency_ms,
            late_ms: 10,
            replies: Vec::new(),
        };
        let mut v = Virtual::new();
        v.arrive((NOW + 100) * 1000, 0, arrival(1));
        v.run(&mut e, &env(), &mut world);
        assert_eq!(world.replies.len(), 1);
        assert_eq!(
            world.replies[0].header("X-Degraded-Reason"),
            Some("ML_TIMEOUT")
        );
        assert_eq!(e.origin_in_flight(), 0, "the slot came back at the end");
        // A later request sweeps the verdict due at 100 + 55 + 45.
        let mut world = Late {
            latency_ms: Some(1),
            late_ms: 0,
            replies: Vec::new(),
        };
        v.arrive((NOW + 400) * 1000, 1, arrival(2));
        v.run(&mut e, &env(), &mut world);
        modes.push((
            e.counters().late_answers,
            world.replies[0]
                .header("X-Degraded-Reason")
                .map(str::to_string),
        ));
    }
    assert_eq!(
        modes,
        [(1, None), (0, Some("BREAKER_OPEN".to_string()))],
        "heard and acquitted; aborted at its end and convicted"
    );
}
