//! The engine driven end to end in virtual time, as the Worker and `simulate` drive it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::cascade::KvRead;
use crate::classify::Observed;
use crate::policy::{Breaker as BreakerCfg, ClientErrors, Storm};
use crate::testing::{seed_catalog, seed_policy, HOUR, NOW};

fn bake(p: crate::policy::Policy) -> Bake {
    Bake {
        release_id: "r-test".into(),
        policy_hash: "p".into(),
        catalog_hash: "c".into(),
        validated_at_ms: NOW - HOUR,
        compiler_version: "0".into(),
        policy: p,
        catalog: Some(seed_catalog()),
    }
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("MODEL_API_KEY".to_string(), "model-secret".to_string()),
        ("ADMIN".to_string(), "admin-secret".to_string()),
    ])
}

fn get(path: &str, headers: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
    (
        path.to_string(),
        headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn at(ms: u64) -> Millis {
    Millis(NOW + ms)
}

fn status(code: u16) -> Observed {
    Observed::Response {
        status: code,
        retry_after: None,
        body: Vec::new(),
    }
}

fn ok() -> Observed {
    Observed::Response {
        status: 200,
        retry_after: None,
        body: br#"{"items":[{"sku":"M1"}]}"#.to_vec(),
    }
}

/// Runs one request: the origin answers `origin` at `t0 + 5 ms`, KV misses.
fn run(engine: &mut Engine<'_>, t0: u64, path: &str, origin: Observed) -> Reply {
    let (path, headers) = get(path, &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, mut a) = engine.start(at(t0), &req, &env(), t0 + 1);
    let mut t = t0;
    loop {
        a = match a {
            Action::FetchOrigin { .. } => {
                t += 5;
                engine.step(&mut f, at(t), Event::Origin(origin.clone()))
            }
            Action::ReadKv { timeout_ms, .. } => {
                t += timeout_ms.min(1);
                engine.step(
                    &mut f,
                    at(t),
                    Event::Kv(KvRead::Value {
                        value: None,
                        metadata: None,
                    }),
                )
            }
            Action::Respond(r) => return *r,
            other => panic!("unexpected {other:?}"),
        };
    }
}

/// One healthy request, so the isolate is no longer cold: the breaker learns from what
/// starts after it.
fn warm(engine: &mut Engine<'_>) {
    assert_eq!(run(engine, 0, "/recommendations/warm", ok()).status, 200);
}

fn body(r: &Reply) -> Value {
    serde_json::from_str(&r.body).unwrap()
}

fn log(r: &Reply) -> Value {
    serde_json::from_str(&r.log).unwrap()
}

#[test]
fn a_live_answer_carries_trace_and_credential_to_the_origin_and_writes_through() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get(
        "/recommendations/alice",
        &[(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )],
    );
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "category=audio",
        headers: &headers,
    };
    let (mut f, a) = e.start(at(0), &req, &env(), 9);
    let Action::FetchOrigin {
        request,
        timeout_ms,
        ..
    } = a
    else {
        panic!("{a:?}")
    };
    assert_eq!(timeout_ms, 45);
    assert_eq!(request.header("authorization"), Some("Bearer model-secret"));
    assert!(request
        .header("traceparent")
        .unwrap()
        .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    assert_eq!(request.header("x-correlation-id"), Some(f.correlation_id()));
    assert!(request.url.contains("user_id=alice") && request.url.contains("category=audio"));
    let Action::Respond(r) = e.step(&mut f, at(20), Event::Origin(ok())) else {
        panic!()
    };
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Degraded"), Some("false"));
    assert_eq!(body(&r)["is_personalized"], true);
    assert_eq!(r.writes.len(), 1, "the user tier is written through");
    let l = log(&r);
    assert_eq!(l["outcome"], "live");
    assert_eq!(l["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(l["latency_ms"], 20);
    assert!(!r.log.contains("alice"), "no raw user ID in the log");
    assert!(!r.log.contains("model-secret"), "no secret in the log");
    assert!(f.is_done());
    assert_eq!(e.counters().live, 1);
}

#[test]
fn bad_input_is_refused_before_any_io() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get("/recommendations/al%0Aice", &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (_, a) = e.start(at(0), &req, &env(), 1);
    let Action::Respond(r) = a else {
        panic!("{a:?}")
    };
    assert_eq!(r.status, 400);
    assert_eq!(body(&r)["retryable"], false);
    assert_eq!(log(&r)["outcome"], "bad_request");
}

#[test]
fn fifty_origin_404s_leave_the_breaker_closed_and_pass_through() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 3,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    for i in 0..50 {
        let r = run(&mut e, i * 10, "/recommendations/nobody", status(404));
        assert_eq!(r.status, 404, "request {i}");
        let v = body(&r);
        assert_eq!(v["code"], "ORIGIN_REJECTED_REQUEST");
        assert_eq!(v["retryable"], false);
        assert_eq!(r.header("X-Breaker-Mode"), Some("CLOSED"));
        assert_eq!(log(&r)["class"], "caller");
    }
    assert_eq!(e.breaker_mode(at(1_000)), "CLOSED");
    assert_eq!(e.counters().origin_rejected, 50);
    // A healthy answer after them is live.
    assert_eq!(
        run(&mut e, 2_000, "/recommendations/alice", ok()).status,
        200
    );
}

#[test]
fn with_a_fallback_policy_a_404_is_a_disclosed_fallback_with_its_own_reason() {
    let mut p = seed_policy();
    p.origin.client_errors = ClientErrors::Fallback;
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    for i in 0..5 {
        let r = run(&mut e, i * 10, "/recommendations/nobody", status(404));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-Degraded"), Some("true"));
        assert_eq!(r.header("X-Degraded-Reason"), Some("ML_4XX"));
        assert_eq!(r.header("X-Breaker-Mode"), Some("CLOSED"));
    }
}

#[test]
fn a_run_of_401s_opens_the_breaker_with_its_own_reason_and_counter() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 3,
        cooldown_ms: 4_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for i in 1..4 {
        let r = run(&mut e, i * 10, "/recommendations/alice", status(401));
        assert_eq!(r.header("X-Degraded-Reason"), Some("ML_AUTH"));
        assert_eq!(log(&r)["class"], "credential");
    }
    assert_eq!(e.counters().credential_refused, 3);
    let r = run(&mut e, 100, "/recommendations/alice", ok());
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(r.header("X-Breaker-Mode"), Some("OPEN"));
}

#[test]
fn a_probe_that_ends_in_a_caller_4xx_frees_the_trial_for_the_next_request() {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Consecutive {
        failures: 1,
        cooldown_ms: 1_000,
    };
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    run(&mut e, 10, "/recommendations/alice", status(503));
    assert_eq!(e.breaker_mode(at(20)), "OPEN");
    // The half-open trial is refused by the origin for the caller's own reasons...
    assert_eq!(
        run(&mut e, 1_100, "/recommendations/x", status(404)).status,
        404
    );
    // ...so the next request is the trial, and its success closes the breaker.
    let r = run(&mut e, 1_120, "/recommendations/alice", ok());
    assert_eq!(r.header("X-Degraded"), Some("false"));
    assert_eq!(r.header("X-Breaker-Mode"), Some("CLOSED"));
}

#[test]
fn a_shared_tier_answer_to_a_credentialed_request_is_private() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get("/recommendations/alice", &[("cookie", "session=1")]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, mut a) = e.start(at(0), &req, &env(), 3);
    let mut t = 0;
    let r = loop {
        a = match a {
            Action::FetchOrigin { .. } => e.step(&mut f, at(45), Event::Origin(Observed::TimedOut)),
            Action::ReadKv { .. } => {
                t += 1;
                e.step(&mut f, at(45 + t), Event::Kv(KvRead::TimedOut))
            }
            Action::Respond(r) => break r,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(r.header("X-Fallback-Tier"), Some("stubs"));
    assert_eq!(r.header("Cache-Control"), Some("private, max-age=30"));
}

#[test]
fn the_storm_limiter_answers_429_and_an_unreachable_one_lets_the_request_through() {
    let mut p = seed_policy();
    p.storm = Some(Storm {
        binding: "STORM".into(),
        max_retries: 2,
        window_ms: 10_000,
    });
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get("/recommendations/alice", &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, a) = e.start(at(0), &req, &env(), 4);
    assert!(matches!(
        a,
        Action::Limit {
            binding: "STORM",
            ..
        }
    ));
    let Action::Respond(r) = e.step(&mut f, at(1), Event::Limited(Ok(false))) else {
        panic!()
    };
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), Some("10"));
    assert_eq!(body(&r)["code"], "ERR_RETRY_STORM_DETECTED");

    let (mut f, _) = e.start(at(5), &req, &env(), 5);
    let a = e.step(
        &mut f,
        at(6),
        Event::Limited(Err("binding not bound\n    at stack".into())),
    );
    assert!(matches!(a, Action::FetchOrigin { .. }));
    let Action::Respond(r) = e.step(&mut f, at(20), Event::Origin(ok())) else {
        panic!()
    };
    let notes = log(&r)["notes"].to_string();
    assert!(notes.contains("STORM_LIMITER_UNAVAILABLE"), "{notes}");
    assert!(
        !notes.contains("at stack"),
        "no JavaScript stack in notes: {notes}"
    );
}

#[test]
fn every_request_header_the_engine_reads_is_in_its_list() {
    // The Worker reads only `request_headers()` from the runtime (one by one, cheaper than
    // copying every header). A header the engine reads but does not list would silently
    // never arrive: record every name asked for across each kind of request, and check.
    let mut p = seed_policy();
    p.origin.idempotency_key_header = Some("Idempotency-Key".into());
    p.params[2].source = crate::policy::ParamSource::Header;
    p.params[2].from = "X-Limit".into();
    p.admin = Some(crate::policy::Admin {
        path: "/__status".into(),
        secret: "ADMIN".into(),
    });
    p.events = Some(crate::events::testing::events_policy());
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    HEADERS_ASKED.with(|h| h.borrow_mut().clear());
    warm(&mut e);
    run(&mut e, 10, "/recommendations/alice", ok());
    run(&mut e, 20, "/recommendations/alice", status(503));
    for (method, path) in [
        ("GET", "/__status"),
        ("POST", "/v1/events"),
        ("DELETE", "/recommendations/alice"),
        ("GET", "/nowhere"),
    ] {
        let headers = vec![("Authorization".to_string(), "Bearer x.y.z".to_string())];
        let req = Incoming {
            method,
            path,
            query: "",
            headers: &headers,
        };
        let _ = e.start(at(30), &req, &env(), 7);
    }
    let asked = HEADERS_ASKED.with(|h| h.borrow().clone());
    let listed = e.request_headers();
    for name in &asked {
        assert!(
            listed.contains(name),
            "`{name}` is read but not in {listed:?}"
        );
    }
    for own in ["idempotency-key", "x-limit"] {
        assert!(listed.iter().any(|h| h == own), "{own} in {listed:?}");
    }
    // The recorder saw the requests: the correlation ID, the token, the events' body headers.
    for h in ["x-correlation-id", "authorization", "content-type"] {
        assert!(asked.contains(h), "{h} not asked for: {asked:?}");
    }
    let mut unique = listed.to_vec();
    unique.dedup();
    assert_eq!(unique.len(), listed.len(), "each name once: {listed:?}");
}

#[test]
fn the_admin_endpoint_needs_its_token() {
    let mut p = seed_policy();
    p.admin = Some(crate::policy::Admin {
        path: "/__status".into(),
        secret: "ADMIN".into(),
    });
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    for (auth, want) in [
        (None, 401),
        (Some("Bearer nope"), 401),
        (Some("Bearer admin-secret"), 200),
    ] {
        let headers: Vec<(String, String)> = auth
            .map(|a| vec![("Authorization".to_string(), a.to_string())])
            .unwrap_or_default();
        let req = Incoming {
            method: "GET",
            path: "/__status",
            query: "",
            headers: &headers,
        };
        let (_, a) = e.start(at(0), &req, &env(), 6);
        let Action::Respond(r) = a else { panic!() };
        assert_eq!(r.status, want);
        assert_eq!(log(&r)["outcome"], "admin");
        assert!(r.point.is_none());
    }
    assert_eq!(e.counters().requests, 0, "operators are not traffic");
}

#[test]
fn events_after_the_answer_do_not_panic() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get("/recommendations/alice", &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, _) = e.start(at(0), &req, &env(), 7);
    let _ = e.step(&mut f, at(10), Event::Origin(ok()));
    assert!(matches!(
        e.step(&mut f, at(11), Event::Woke),
        Action::Respond(_)
    ));
}

#[test]
fn the_same_seed_gives_the_same_ids() {
    let b = bake(seed_policy());
    let (path, headers) = get("/recommendations/alice", &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let mut e1 = Engine::new(&b).unwrap();
    let mut e2 = Engine::new(&b).unwrap();
    let (f1, _) = e1.start(at(0), &req, &env(), 42);
    let (f2, _) = e2.start(at(0), &req, &env(), 42);
    assert_eq!(f1.correlation_id(), f2.correlation_id());
    assert_eq!(f1.trace_id(), f2.trace_id());
}

#[test]
fn without_a_bake_the_answer_is_503_bake_invalid_with_a_log_line() {
    let headers = vec![];
    let req = Incoming {
        method: "GET",
        path: "/x",
        query: "",
        headers: &headers,
    };
    let r = unbaked(at(0), &req, "no custom section", 1);
    assert_eq!(r.status, 503);
    assert_eq!(body(&r)["code"], "BAKE_INVALID");
    assert_eq!(log(&r)["outcome"], "bake_invalid");
}

/// Starts a request and returns its flight and first action.
fn begin<'p>(e: &mut Engine<'p>, t: u64, seed: u64) -> (Flight<'p>, Action<'p>) {
    let headers = vec![];
    let req = Incoming {
        method: "GET",
        path: "/recommendations/alice",
        query: "",
        headers: &headers,
    };
    e.start(at(t), &req, &env(), seed)
}

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
        let _ = e.step(f, at(45), Event::Origin(Observed::TimedOut));
    }
    assert_eq!(e.breaker_mode(at(50)), "CLOSED");
    assert_eq!(e.counters().unrecorded, 5);
    // Attempts started once the isolate is warm count as usual.
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", status(503));
    }
    assert_eq!(e.breaker_mode(at(400)), "OPEN");
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
    let a = e.step(&mut f, at(175), Event::Origin(Observed::TimedOut));
    let r = match a {
        Action::Respond(r) => r,
        other => panic!("no time was left for a KV read: {other:?}"),
    };
    assert_eq!(r.header("X-Degraded-Reason"), Some("EDGE_OVERLOADED"));
    assert_eq!(log(&r)["class"], "edge");
    assert_eq!(e.breaker_mode(at(180)), "CLOSED", "the model is not blamed");
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
    let r = match e.step(&mut f, at(175), Event::Origin(Observed::TimedOut)) {
        Action::Respond(r) => r,
        other => panic!("no time was left for a KV read: {other:?}"),
    };
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
    assert_eq!(e.counters().unrecorded, 1, "only the cold warm-up");
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
    let (mut f2, _) = begin(&mut e, 102, 10);
    let r = match e.step(&mut f1, at(205), Event::Origin(Observed::TimedOut)) {
        Action::Respond(r) => r,
        other => panic!("no time was left for a KV read: {other:?}"),
    };
    assert_eq!(r.header("X-Degraded-Reason"), Some("ML_TIMEOUT"));
    let _ = e.step(&mut f2, at(206), Event::Origin(ok()));
    // The model was alive: no verdict, and a later request calls it.
    let r = run(&mut e, 400, "/recommendations/bob", ok());
    assert_eq!(r.status, 200);
    assert_eq!(e.breaker_mode(at(500)), "CLOSED");
    assert_eq!(
        e.counters().unrecorded,
        2,
        "the warm-up and the acquitted timeout"
    );
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
    e.set_queue_delay(40);
    // On-time and late timeouts alike, the model answering no one: each is the model's.
    for t in [100, 200, 300] {
        run(&mut e, t, "/recommendations/alice", Observed::TimedOut);
    }
    // Convicted one timeout-length later, when the model has still answered no one.
    let r = run(&mut e, 400, "/recommendations/alice", ok());
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    assert_eq!(e.counters().unrecorded, 1, "only the cold warm-up");

    // The same isolate and a healthy model that answers other calls meanwhile: its
    // timeouts there are the queue's, and no verdict.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.set_queue_delay(40);
    for t in [100, 200, 300] {
        let (mut f, _) = begin(&mut e, t, t + 1);
        assert_eq!(
            run(&mut e, t + 10, "/recommendations/bob", ok()).status,
            200
        );
        let _ = e.step(&mut f, at(t + 45), Event::Origin(Observed::TimedOut));
    }
    assert_eq!(e.breaker_mode(at(400)), "CLOSED");
    // The warm-up and the three timeouts (the successes count, never as slow calls).
    assert_eq!(e.counters().unrecorded, 4);
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
    assert!(matches!(a1, Action::FetchOrigin { .. }));
    assert!(matches!(a2, Action::FetchOrigin { .. }));
    assert_eq!(e.origin_in_flight(), 2);
    // The third goes straight to the cascade, disclosed.
    let (_, a3) = begin(&mut e, 1, 3);
    let Action::ReadKv { .. } = a3 else {
        panic!("{a3:?}")
    };
    // A flight whose client went away (dropped by the driver) gives its slot back…
    drop(f1);
    assert_eq!(e.origin_in_flight(), 1);
    // …and one that ends gives its slot back too.
    let _ = e.step(&mut f2, at(20), Event::Origin(ok()));
    assert_eq!(e.origin_in_flight(), 0);
    let (mut f4, a4) = begin(&mut e, 30, 4);
    assert!(matches!(a4, Action::FetchOrigin { .. }));
    let _ = e.step(&mut f4, at(40), Event::Origin(ok()));
    // A request refused by the bulkhead says so.
    let (mut g1, _) = begin(&mut e, 100, 5);
    let (_g2, _) = begin(&mut e, 100, 6);
    let (mut g3, mut a) = begin(&mut e, 100, 7);
    let r = loop {
        a = match a {
            Action::ReadKv { .. } => e.step(&mut g3, at(101), Event::Kv(KvRead::TimedOut)),
            Action::Respond(r) => break r,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(r.header("X-Degraded-Reason"), Some("BULKHEAD_FULL"));
    assert_eq!(log(&r)["class"], "shed");
    let _ = e.step(&mut g1, at(120), Event::Origin(ok()));
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
    e.set_queue_delay(20);
    for i in 1..=10 {
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 60), Event::Origin(ok()));
    }
    assert_eq!(e.breaker_mode(at(1_100)), "PRIMARY_HEALTHY");
    assert_eq!(e.counters().unrecorded, 1, "only the cold warm-up");
    // Without the measurement, the same answers are slow calls and trip the breaker.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    for i in 1..=10 {
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 60), Event::Origin(ok()));
    }
    assert_eq!(e.breaker_mode(at(1_100)), "DEGRADED_FALLBACK");
    // An isolate that knows it is saturated (its timers late beyond the tolerance) counts
    // its successes as successes, and never as slow calls.
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    e.set_queue_delay(40);
    for i in 1..=10 {
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 95), Event::Origin(ok()));
    }
    assert_eq!(e.breaker_mode(at(1_100)), "PRIMARY_HEALTHY");
    assert_eq!(e.counters().unrecorded, 1, "only the cold warm-up");
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
    e.set_queue_delay(40);
    for i in 1..=10 {
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 70), Event::Origin(ok()));
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
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 40), Event::Origin(ok()));
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
        let (mut f, _) = begin(&mut e, i * 100, i);
        let _ = e.step(&mut f, at(i * 100 + 70), Event::Origin(ok()));
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
    e.set_queue_delay(3);
    for i in 0..3u64 {
        let t = 1_500 + i * 100;
        let (mut f, _) = begin(&mut e, t, 50 + i);
        let _ = e.step(&mut f, at(t + 47), Event::Origin(ok()));
    }
    assert_eq!(e.breaker_mode(at(2_000)), "PRIMARY_HEALTHY");
}
#[test]
fn a_second_degraded_request_within_a_second_reads_no_kv() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let reads = |e: &mut Engine<'_>, t: u64, seed: u64| {
        let (mut f, mut a) = begin(e, t, seed);
        let mut n = 0;
        loop {
            a = match a {
                Action::FetchOrigin { .. } => {
                    e.step(&mut f, at(t + 45), Event::Origin(Observed::TimedOut))
                }
                Action::ReadKv { .. } => {
                    n += 1;
                    e.step(
                        &mut f,
                        at(t + 46),
                        Event::Kv(KvRead::Value {
                            value: None,
                            metadata: None,
                        }),
                    )
                }
                Action::Respond(r) => {
                    assert_eq!(r.header("X-Degraded"), Some("true"));
                    return n;
                }
                other => panic!("{other:?}"),
            }
        }
    };
    assert_eq!(reads(&mut e, 0, 1), 2, "the user and the category tier");
    assert_eq!(
        reads(&mut e, 500, 2),
        0,
        "both answered from the isolate's cache"
    );
    assert_eq!(reads(&mut e, 1_600, 3), 2, "a second later, read again");
}

#[test]
fn hedges_follow_the_p95_within_a_token_bucket_and_only_for_repeatable_requests() {
    let mut p = seed_policy();
    p.origin.hedge = Some(crate::policy::Hedge {
        after_ms: None,
        max_share: 0.1,
        burst: 2,
        min_calls: 5,
    });
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    fn fetch<'p>(e: &mut Engine<'p>, t: u64, seed: u64) -> (Flight<'p>, Option<u64>) {
        let (f, a) = begin(e, t, seed);
        match a {
            Action::FetchOrigin { hedge_after_ms, .. } => (f, hedge_after_ms),
            other => panic!("{other:?}"),
        }
    }
    // Until five calls were seen there is no p95 to hedge after.
    for i in 1..=5 {
        let (mut f, h) = fetch(&mut e, i * 100, i);
        assert_eq!(h, None, "call {i}");
        let _ = e.step(&mut f, at(i * 100 + 20), Event::Origin(ok()));
    }
    // Then the hedge comes after the observed p95 (20 ms), while tokens last (a burst of 2).
    let (mut f1, h1) = fetch(&mut e, 1_000, 11);
    assert_eq!(h1, Some(20));
    let _ = e.step(
        &mut f1,
        at(1_020),
        Event::OriginHedged {
            observed: ok(),
            sent: true,
            won: true,
        },
    );
    let (mut f2, h2) = fetch(&mut e, 1_100, 12);
    assert_eq!(h2, Some(20));
    // Not sent (the first answer came in time): the token is refunded.
    let _ = e.step(
        &mut f2,
        at(1_115),
        Event::OriginHedged {
            observed: ok(),
            sent: false,
            won: false,
        },
    );
    let (mut f3, h3) = fetch(&mut e, 1_200, 13);
    assert_eq!(h3, Some(20), "the refunded token");
    let _ = e.step(
        &mut f3,
        at(1_220),
        Event::OriginHedged {
            observed: ok(),
            sent: true,
            won: false,
        },
    );
    let (mut f4, h4) = fetch(&mut e, 1_300, 14);
    assert_eq!(h4, None, "the bucket is empty");
    let _ = e.step(&mut f4, at(1_320), Event::Origin(ok()));
    assert_eq!((e.counters().hedges_sent, e.counters().hedges_won), (2, 1));

    // A POST that is not idempotent, without the client's key, is never hedged.
    p.origin.method = crate::policy::Method::Post;
    p.origin.idempotent = false;
    p.origin.hedge.as_mut().unwrap().after_ms = Some(10);
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let (_, h) = fetch(&mut e, 0, 1);
    assert_eq!(h, None);
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
        let _ = e.step(f, at(1_645), Event::Origin(Observed::TimedOut));
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
