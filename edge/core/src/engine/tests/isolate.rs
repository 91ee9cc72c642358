//! The engine under its isolate's own load, in virtual time: a cold isolate's first wave,
//! late timers, queueing and saturation, the bulkhead, the isolate's KV cache (speculative
//! tier reads: [`super::prefetch`]).

use super::*;

#[test]
fn the_first_wave_of_a_cold_isolate_does_not_open_the_breaker() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 3,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    // Five requests start together on a fresh isolate; all time out (instantiation and
    // connection set-up, not the model).
    let mut wave: Vec<_> = (0..5).map(|i| begin(&mut e, 0, i + 1).0).collect();
    for f in &mut wave {
        let _ = e.step(f, at(45), Input::Timer);
    }
    assert_eq!(e.breaker_mode(at(50)), "CLOSED");
    assert_eq!(e.counters().unrecorded, 5);
    // Attempts started once the isolate is warm count as usual.
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(400)), "OPEN");
}

/// Eight concurrent callers at 100 ms against seed 004's orders API whose model answers 503
/// to every call after 5 ms: how many origin calls the isolate had made when its breaker
/// opened, and in all.
fn storm_of_503s(e: &mut Engine<'_>) -> (Option<u64>, u64) {
    use super::retry::{arrival, Failing};
    use crate::engine::virtual_io::Virtual;
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
    let mut opened_after = None;
    while let Some(s) = v.step(e, &env(), &mut world) {
        if opened_after.is_none() && e.breaker_mode(s.at) == "OPEN" {
            opened_after = Some(world.calls);
        }
    }
    assert_eq!(world.replies.len(), 8);
    assert!(world.replies.iter().all(|r| r.status == 503));
    (opened_after, world.calls)
}

#[test]
fn a_cold_isolate_counts_the_models_statuses_and_opens_as_soon_as_a_warm_one() {
    // A fresh isolate's first wave pays for instantiation and connection set-up, so its
    // timeouts are no verdict; but a 503 is the model's own answer, cold or warm. Eight
    // callers against a model answering 503: the first wave's failures open the breaker,
    // and no retry is made. (Counted `unrecorded`, the first wave's 503s left the verdict to
    // the retries: open after 13 calls, 15 in all.)
    let b = bake(super::retry::orders_api());
    let mut warm_e = Engine::new(&b).unwrap();
    warm(&mut warm_e);
    let (warm_opened, warm_calls) = storm_of_503s(&mut warm_e);
    assert_eq!((warm_opened, warm_calls), (Some(8), 8));

    let mut cold = Engine::new(&b).unwrap();
    let (cold_opened, cold_calls) = storm_of_503s(&mut cold);
    assert_eq!(
        cold_opened, warm_opened,
        "origin calls made when the breaker opened"
    );
    assert_eq!(cold_calls, warm_calls, "no retry once it is open");
    assert_eq!(cold.counters().unrecorded, 0, "every 503 was the model's");
}

#[test]
fn a_cold_isolates_successes_count_but_never_as_slow_calls() {
    // Its first wave's answers took the isolate's set-up as well as the model's time: each
    // is a success (left out, a wave of mixed answers would lean to its failures), none is
    // judged slow.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(quick_rate());
    p.budget.deadline_ms = 100;
    p.budget.total_ms = 150;
    p.origin.attempt_timeout_ms = 100;
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let wave: Vec<_> = (0..10).map(|i| begin(&mut e, 0, i + 1)).collect();
    for (mut f, out) in wave {
        answer_ok(&mut e, &mut f, &out, 60);
    }
    assert_eq!(e.breaker_mode(at(100)), "PRIMARY_HEALTHY");
    assert_eq!(e.counters().unrecorded, 0, "each answer counted");
    // Once warm, answers that slow are slow calls.
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i + 10);
        answer_ok(&mut e, &mut f, &out, i * 100 + 60);
    }
    assert_eq!(e.breaker_mode(at(1_100)), "DEGRADED_FALLBACK");
}

#[test]
fn a_late_timer_is_the_edges_overload_while_the_model_answers_other_calls() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, _) = begin(&mut e, 100, 9);
    // Meanwhile the model answers another call…
    assert_eq!(run(&mut e, 110, "/recommendations/bob", ok()).status, 200);
    // …and this one's 45 ms timer runs 30 ms late: the isolate was busy.
    let out = e.step(&mut f, at(175), Input::Timer);
    assert!(kv_read(&out).is_none(), "no time was left for a KV read");
    let r = reply(out);
    assert_eq!(r.header("X-Degraded-Reason"), Some("EDGE_OVERLOADED"));
    assert_eq!(log(&r)["class"], "edge");
    assert_eq!(e.breaker_mode(at(180)), "CLOSED", "the model is not blamed");
}

#[test]
fn a_timer_a_few_ms_late_while_the_model_answers_others_blames_nobody() {
    // A burst on a busy host: the answer to this call sat in the isolate's queue while its
    // timer fired 9 ms late — inside the disclosure's tolerance (an `ML_TIMEOUT` answer),
    // but past what an on-time timer shows: the breaker gets no verdict.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, _) = begin(&mut e, 100, 9);
    assert_eq!(run(&mut e, 110, "/recommendations/bob", ok()).status, 200);
    let out = e.step(&mut f, at(154), Input::Timer);
    let r = finish(&mut e, &mut f, 154, out, &Observed::TimedOut);
    assert_eq!(r.header("X-Degraded-Reason"), Some("ML_TIMEOUT"));
    assert_eq!(e.breaker_mode(at(160)), "CLOSED", "the model is not blamed");
    assert_eq!(e.counters().unrecorded, 1, "this timeout");

    // The same with the timer on time (2 ms over, the arming turn): the model's timeout.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, _) = begin(&mut e, 100, 9);
    assert_eq!(run(&mut e, 110, "/recommendations/bob", ok()).status, 200);
    let _ = e.step(&mut f, at(147), Input::Timer);
    assert_eq!(e.breaker_mode(at(150)), "OPEN");
}

#[test]
fn a_late_timer_on_a_model_that_answered_nobody_is_the_models_timeout() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, _) = begin(&mut e, 100, 9);
    // The timer runs 30 ms late, and the model answered no call since this one began.
    let r = reply(e.step(&mut f, at(175), Input::Timer));
    assert_eq!(r.header("X-Degraded-Reason"), Some("ML_TIMEOUT"));
    assert_eq!(log(&r)["class"], "dependency");
    // The verdict waits one more timeout-length for the model to answer anyone.
    assert_eq!(e.breaker_mode(at(180)), "CLOSED");
    let r = run(&mut e, 300, "/recommendations/bob", ok());
    assert_eq!(
        r.header("X-Degraded-Reason"),
        Some("BREAKER_OPEN"),
        "a hung model is shed"
    );
    assert_eq!(
        e.counters().unrecorded,
        0,
        "the model's answers all counted"
    );
}

#[test]
fn a_stalled_isolate_whose_queued_answers_come_after_its_timers_blames_nobody() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Two calls start; the isolate stalls 60 ms; when it runs again, the first call's timer
    // is taken before the answer that arrived for the second during the stall.
    let (mut f1, _) = begin(&mut e, 100, 9);
    let (mut f2, out2) = begin(&mut e, 102, 10);
    let r = reply(e.step(&mut f1, at(205), Input::Timer));
    assert_eq!(r.header("X-Degraded-Reason"), Some("ML_TIMEOUT"));
    let _ = e.step(&mut f2, at(206), fetched(fetch(&out2), ok()));
    // The model was alive: no verdict, and a later request calls it.
    let r = run(&mut e, 400, "/recommendations/bob", ok());
    assert_eq!(r.status, 200);
    assert_eq!(e.breaker_mode(at(500)), "CLOSED");
    assert_eq!(e.counters().unrecorded, 1, "the acquitted timeout");
}

#[test]
fn a_saturated_isolate_does_not_hide_a_hung_model_from_its_breaker() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 3,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // The isolate's timers run 40 ms late (64 hung requests end in bursts).
    e.lag_sample(at(100), 40);
    // On-time and late timeouts alike, the model answering no one: each is the model's.
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", Observed::TimedOut);
    }
    // Convicted one timeout-length later, when the model has still answered no one.
    let r = run(&mut e, 400, "/recommendations/alice", ok());
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(e.counters().unrecorded, 0, "every call counted");

    // The same isolate and a healthy model that answers other calls meanwhile: its
    // timeouts there are the queue's, and no verdict.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.lag_sample(at(100), 40);
    for t in [100, 200, 300] {
        let (mut f, _) = begin(&mut e, t, t + 1);
        assert_eq!(
            run(&mut e, t + 10, "/recommendations/bob", ok()).status,
            200
        );
        let _ = e.step(&mut f, at(t + 45), Input::Timer);
    }
    assert_eq!(e.breaker_mode(at(400)), "CLOSED");
    // The three timeouts (the successes count, never as slow calls).
    assert_eq!(e.counters().unrecorded, 3);
    // What the model says is its own however busy the isolate: three 503s open it.
    for t in [500, 600, 700] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(800)), "OPEN");
}

#[test]
fn the_bulkhead_caps_origin_calls_in_flight_and_frees_slots_of_dropped_flights() {
    let mut p = seed_policy();
    p.origin.max_in_flight = Some(2);
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let (f1, a1) = begin(&mut e, 0, 1);
    let (mut f2, a2) = begin(&mut e, 0, 2);
    let _ = fetch(&a1);
    let io2 = fetch(&a2);
    assert_eq!(e.origin_in_flight(), 2);
    // The third goes straight to the cascade, disclosed.
    let (_, a3) = begin(&mut e, 1, 3);
    assert!(fetches(&a3).is_empty() && kv_read(&a3).is_some(), "{a3:?}");
    // A flight whose client went away (dropped by the driver) gives its slot back…
    drop(f1);
    assert_eq!(e.origin_in_flight(), 1);
    // …and one that ends gives its slot back too.
    let _ = e.step(&mut f2, at(20), fetched(io2, ok()));
    assert_eq!(e.origin_in_flight(), 0);
    let (mut f4, a4) = begin(&mut e, 30, 4);
    let _ = e.step(&mut f4, at(40), fetched(fetch(&a4), ok()));
    // A request refused by the bulkhead says so.
    let (mut g1, b1) = begin(&mut e, 100, 5);
    let (_g2, _) = begin(&mut e, 100, 6);
    let (mut g3, out) = begin(&mut e, 100, 7);
    let r = finish(&mut e, &mut g3, 100, out, &Observed::TimedOut);
    assert_eq!(r.header("X-Degraded-Reason"), Some("BULKHEAD_FULL"));
    assert_eq!(log(&r)["class"], "shed");
    let _ = e.step(&mut g1, at(120), fetched(fetch(&b1), ok()));
}

/// A rate breaker on a short window: 45 ms slow-call bar, 40 ms probe bar.
fn quick_rate() -> crate::policy::RateBreaker {
    crate::policy::RateBreaker {
        window_ms: 10_000,
        failure_ratio: 0.5,
        min_calls: 5,
        slow_call_p95_ms: 45,
        hold_down_ms: 1_000,
        probe_fraction: 0.5,
        probe_min_calls: 2,
        probe_success_ratio: 0.99,
        probe_p95_ms: 40,
        failed_probe_hold_ms: 1_000,
        scope: Default::default(),
    }
}

#[test]
fn the_isolates_own_queueing_is_not_counted_as_the_models_latency() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(quick_rate());
    p.budget.deadline_ms = 100;
    p.budget.total_ms = 150;
    p.origin.attempt_timeout_ms = 100;
    let b = bake(p);
    // Answers measured at 60 ms of which 20 ms were the isolate's own queue: the model took
    // 40 ms, under the 45 ms bar.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.lag_sample(at(100), 20);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 60);
    }
    assert_eq!(e.breaker_mode(at(1_100)), "PRIMARY_HEALTHY");
    assert_eq!(e.counters().unrecorded, 0, "every answer counted");
    // Without the measurement, the same answers are slow calls and trip the breaker.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 60);
    }
    assert_eq!(e.breaker_mode(at(1_100)), "DEGRADED_FALLBACK");
    // An isolate that knows it is saturated (its timers late beyond the tolerance) counts
    // its successes as successes, and never as slow calls.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.lag_sample(at(100), 40);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 95);
    }
    assert_eq!(e.breaker_mode(at(1_100)), "PRIMARY_HEALTHY");
    assert_eq!(e.counters().unrecorded, 0, "every answer counted");
}

#[test]
fn a_busy_isolate_counts_its_successes_so_the_failure_ratio_does_not_lean_to_failures() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(quick_rate());
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Saturated: ten slow-looking successes and three 503s. Were the successes left out, the
    // three 503s would be 3 of 3 and open the breaker on a model answering 10 of 13.
    e.lag_sample(at(100), 40);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 70);
    }
    for t in [1_100, 1_200, 1_300] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(1_400)), "PRIMARY_HEALTHY");
    // On a calm isolate, answers slower than the slow-call bar (30 ms here) trip it.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(crate::policy::RateBreaker {
        slow_call_p95_ms: 30,
        ..quick_rate()
    });
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 40);
    }
    assert_eq!(e.breaker_mode(at(1_100)), "DEGRADED_FALLBACK");
}

#[test]
fn a_success_takes_at_most_its_timeout_whatever_the_engines_clock_says() {
    // A success came before its 45 ms timer fired; workerd counts the timer from the end of
    // the turn that armed it, so the engine's clock (from the request's start) can read
    // more. That surplus is the edge's start, never the model's slowness.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(quick_rate());
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for i in 1..=10 {
        let (mut f, out) = begin(&mut e, i * 100, i);
        answer_ok(&mut e, &mut f, &out, i * 100 + 70);
    }
    assert_eq!(
        e.breaker_mode(at(1_100)),
        "PRIMARY_HEALTHY",
        "p95 at the 45 ms timeout is not over the 45 ms bar"
    );
}

#[test]
fn a_busy_isolates_probes_are_not_failed_for_its_own_queue() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(crate::policy::RateBreaker {
        min_calls: 3,
        probe_fraction: 1.0,
        probe_min_calls: 3,
        failed_probe_hold_ms: 60_000,
        ..quick_rate()
    });
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(400)), "DEGRADED_FALLBACK");
    // After the hold-down the model is back, but the isolate is busy: its probes' answers
    // take 44 ms by its clock (over the 40 ms probe bar, under the 45 ms slow-call bar).
    e.lag_sample(at(1_500), 3);
    for i in 0..3u64 {
        let t = 1_500 + i * 100;
        let (mut f, out) = begin(&mut e, t, 50 + i);
        answer_ok(&mut e, &mut f, &out, t + 47);
    }
    assert_eq!(e.breaker_mode(at(2_000)), "PRIMARY_HEALTHY");
}
#[test]
fn a_degraded_request_within_the_caches_ttl_reads_no_kv() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    // KV reads a degraded request starts (the model hangs; KV misses).
    let reads = |e: &mut Engine<'_>, t: u64, seed: u64| {
        let (mut f, out) = begin(e, t, seed);
        let (r, keys) = hung(e, &mut f, t, out);
        assert_eq!(r.header("X-Degraded"), Some("true"));
        keys.len()
    };
    assert_eq!(reads(&mut e, 0, 1), 2, "the user and the category tier");
    assert_eq!(
        reads(&mut e, 500, 2),
        0,
        "both answered from the isolate's cache"
    );
    assert_eq!(
        reads(&mut e, 29_000, 3),
        0,
        "still from the cache 29 s after the reads"
    );
    assert_eq!(
        reads(&mut e, 30_100, 4),
        2,
        "past the cache's 30 s, read again"
    );
}

#[test]
fn the_wave_after_the_breaker_closes_is_judged_like_a_fresh_isolates_first() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 3,
        cooldown_ms: 1_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(400)), "OPEN");
    // The half-open trial succeeds: the breaker closes, and the whole load turns back to the
    // model at once. Three calls start before the first of them ends; all three time out.
    assert_eq!(run(&mut e, 1_500, "/recommendations/bob", ok()).status, 200);
    assert_eq!(e.breaker_mode(at(1_510)), "CLOSED");
    let before = e.counters().unrecorded;
    let mut wave: Vec<_> = (0..3).map(|i| begin(&mut e, 1_600, 70 + i).0).collect();
    for f in &mut wave {
        let _ = e.step(f, at(1_645), Input::Timer);
    }
    assert_eq!(
        e.breaker_mode(at(1_650)),
        "CLOSED",
        "the cold wave is not the model's"
    );
    assert_eq!(e.counters().unrecorded, before + 3);
    // Calls started after the wave's first ended are judged as usual.
    for t in [1_700, 1_800, 1_900] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(2_000)), "OPEN");
}

#[test]
fn a_write_through_kv_refused_is_not_served_from_the_isolates_cache() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let live = run(&mut e, 0, "/recommendations/alice", ok());
    assert_eq!(live.status, 200);
    let w = live
        .writes
        .first()
        .expect("the user tier is written through");
    let (binding, key) = (w.binding.clone(), w.key.clone());
    // The model hangs: the first KV read the cascade asks for, or the answer.
    // The model hangs: the key of the first KV read started (speculatively or by the
    // cascade), or the answer's tier when none is.
    let degraded = |e: &mut Engine<'_>, t: u64, seed: u64| {
        let (mut f, out) = begin(e, t, seed);
        let _ = fetch(&out);
        let at_deadline = e.step(&mut f, at(t + 45), Input::Timer);
        let started: Vec<String> = [kv_keys(&out), kv_keys(&at_deadline)].concat();
        match (started.first(), at_deadline.reply()) {
            (Some(key), _) => Err(key.clone()),
            (None, Some(r)) => Ok(r.header("X-Fallback-Tier").map(String::from)),
            (None, None) => panic!("{at_deadline:?}"),
        }
    };
    assert_eq!(
        degraded(&mut e, 1_000, 2),
        Ok(Some("user".into())),
        "the written-through answer, from the isolate's cache"
    );
    let _ = e.write_failed(&binding, &key, "KV refused the put", "c-1");
    assert_eq!(
        degraded(&mut e, 2_000, 3),
        Err(key),
        "after KV refused the write, the user tier is read from KV again"
    );
}

#[test]
fn a_busy_isolate_listens_for_a_timed_out_call_and_its_late_answer_acquits_it() {
    // A fresh isolate's first waves (issue 23): every call timed out on late timers, each
    // fetch was aborted unheard, and the next wave's timeouts were convicted in a silence of
    // the isolate's own making. Now the engine listens for the answer of a call that timed
    // out on a busy isolate for as long as its queue may take to hand it over.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let heard = |late_answer_at: u64, answer: Observed| {
        let mut e = Engine::new(&b).unwrap();
        warm(&mut e);
        let (mut f, out) = begin(&mut e, 100, 9);
        let io = fetch(&out);
        // The 45 ms timer runs 30 ms late; the model answered nobody meanwhile. The isolate
        // listens 30 + 5 ms more, and the attempt keeps its bulkhead slot meanwhile.
        let out = e.step(&mut f, at(175), Input::Timer);
        assert!(
            out.commands.contains(&Command::Hear { io, until: at(210) }),
            "{:?}",
            out.commands
        );
        assert!(!out.commands.contains(&Command::Abort { io }));
        assert_eq!(e.origin_in_flight(), 1, "the origin still has the call");
        assert_eq!(
            reply(out).header("X-Degraded-Reason"),
            Some("ML_TIMEOUT"),
            "the request does not wait for it"
        );
        // Its answer (or the abort at `until`) comes after the response: only the isolate
        // learns from it.
        e.settle(at(late_answer_at), fetched(io, answer));
        assert_eq!(e.origin_in_flight(), 0);
        let r = run(&mut e, 300, "/recommendations/bob", ok());
        (e, r)
    };
    let (e, r) = heard(181, ok());
    assert_eq!(r.status, 200, "{:?}", r.header("X-Degraded-Reason"));
    assert_eq!(e.counters().late_answers, 1);
    assert_eq!(e.counters().timeouts_convicted, 0);
    // Past `until` the driver has aborted it: the timeout is convicted as before.
    let (e, r) = heard(210, Observed::Connect("aborted".into()));
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(e.counters().late_answers, 0);
    assert_eq!(e.counters().timeouts_convicted, 1);
    // A failure status in time is no word that the model is well: the timeout stands.
    let (e, r) = heard(181, status(503));
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(e.counters().timeouts_convicted, 1);

    // A calm isolate's on-time timeout is the model's at once, and its fetch is aborted.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, out) = begin(&mut e, 100, 9);
    let io = fetch(&out);
    let out = e.step(&mut f, at(146), Input::Timer);
    assert!(out.commands.contains(&Command::Abort { io }));
    assert_eq!(e.counters().timeouts_counted, 1);
}

#[test]
fn a_slow_model_on_a_busy_isolate_is_not_acquitted_by_its_own_late_answers() {
    // The review's case: a model that answers every call at 1.5× its timeout. The isolate
    // listens only as long as its queue may hold an answer that came by the deadline, so
    // the slow answers are never heard, and the timeouts are convicted.
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 2,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.lag_sample(at(100), 10);
    for t in [100, 130] {
        let (mut f, out) = begin(&mut e, t, t + 1);
        let io = fetch(&out);
        let out = e.step(&mut f, at(t + 45), Input::Timer);
        let until = out
            .commands
            .iter()
            .find_map(|c| match c {
                Command::Hear { io: x, until } if *x == io => Some(*until),
                _ => None,
            })
            .expect("a busy isolate listens");
        assert_eq!(until, at(t + 45 + 15), "its lag (10 ms) and 5 ms");
        // The answer at 1.5× the timeout: the driver aborted it at `until`.
        e.settle(until, fetched(io, Observed::Connect("aborted".into())));
    }
    let r = run(&mut e, 300, "/recommendations/bob", ok());
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(e.counters().timeouts_convicted, 2);
}
