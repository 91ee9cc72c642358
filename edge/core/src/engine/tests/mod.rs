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

fn miss() -> KvRead {
    KvRead::Value {
        value: None,
        metadata: None,
    }
}

/// The fetches `out` starts: handle and request.
fn fetches<'o>(out: &'o Output<'_>) -> Vec<(IoId, &'o Outbound)> {
    out.starts()
        .filter_map(|(io, op)| match op {
            Op::Fetch(r) => Some((io, r)),
            _ => None,
        })
        .collect()
}

/// The one fetch `out` starts.
fn fetch(out: &Output<'_>) -> IoId {
    match fetches(out).as_slice() {
        [(io, _)] => *io,
        other => panic!("one fetch expected, got {other:?} in {out:?}"),
    }
}

/// The KV read `out` starts for the cascade (the last one: speculative reads start
/// alongside a fetch).
fn kv_read(out: &Output<'_>) -> Option<IoId> {
    out.commands.iter().rev().find_map(|c| match c {
        Command::Start {
            io,
            op: Op::ReadKv { .. },
        } => Some(*io),
        _ => None,
    })
}

/// The KV keys `out` starts reading.
fn kv_keys(out: &Output<'_>) -> Vec<String> {
    out.starts()
        .filter_map(|(_, op)| match op {
            Op::ReadKv { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect()
}

fn reply(out: Output<'_>) -> Reply {
    out.reply()
        .cloned()
        .unwrap_or_else(|| panic!("an answer expected, got {out:?}"))
}

/// The origin answers `out`'s fetch, if it started one (an open breaker starts none), at `t`.
fn answer_ok<'p>(e: &mut Engine<'p>, f: &mut Flight<'p>, out: &Output<'p>, t: u64) {
    if let Some((io, _)) = fetches(out).first() {
        let _ = e.step(f, at(t), fetched(*io, ok()));
    }
}

fn fetched(io: IoId, o: Observed) -> Input {
    Input::Done(io, Done::Fetched(o))
}

fn kv_done(io: IoId, r: KvRead) -> Input {
    Input::Done(io, Done::Kv(r))
}

/// Drives one request from `out`: each fetch answers `origin` 5 ms after it starts (never,
/// for `Observed::TimedOut`: a hung model), each KV read misses 1 ms after, and the timer
/// fires when it is due, whichever comes first.
fn finish<'p>(
    e: &mut Engine<'p>,
    f: &mut Flight<'p>,
    t0: u64,
    mut out: Output<'p>,
    origin: &Observed,
) -> Reply {
    let mut t = t0;
    for _ in 0..100 {
        if let Some(r) = out.reply() {
            return r.clone();
        }
        let next = if let Some((io, _)) = fetches(&out).first() {
            (*origin != Observed::TimedOut).then(|| (t + 5, fetched(*io, origin.clone())))
        } else {
            kv_read(&out).map(|io| (t + 1, kv_done(io, miss())))
        };
        let timer = out.wake_at.map(|w| w.since(Millis(NOW)));
        out = match (next, timer) {
            (Some((tn, input)), Some(tw)) if tn < tw => {
                t = tn;
                e.step(f, at(t), input)
            }
            (_, Some(tw)) => {
                t = tw;
                e.step(f, at(t), Input::Timer)
            }
            (Some((tn, input)), None) => {
                t = tn;
                e.step(f, at(t), input)
            }
            (None, None) => panic!("a request with nothing to wait for: {out:?}"),
        };
    }
    panic!("no answer after 100 steps");
}

/// Drives one request from `out` against a hung model: every KV read it starts misses 1 ms
/// later, its timer fires when due, in time order. The answer and the keys it read.
fn hung<'p>(
    e: &mut Engine<'p>,
    f: &mut Flight<'p>,
    t0: u64,
    mut out: Output<'p>,
) -> (Reply, Vec<String>) {
    let mut keys = Vec::new();
    let mut pending: Vec<(u64, IoId)> = Vec::new();
    let mut t = t0;
    for _ in 0..100 {
        keys.extend(kv_keys(&out));
        if let Some(r) = out.reply() {
            return (r.clone(), keys);
        }
        for (io, op) in out.starts() {
            if let Op::ReadKv { .. } = op {
                pending.push((t + 1, io));
            }
        }
        pending.sort();
        let timer = out.wake_at.map(|w| w.since(Millis(NOW)));
        out = match (pending.first().copied(), timer) {
            (Some((tk, io)), tw) if tw.is_none_or(|tw| tk <= tw) => {
                pending.remove(0);
                t = tk;
                e.step(f, at(t), kv_done(io, miss()))
            }
            (_, Some(tw)) => {
                t = tw;
                e.step(f, at(t), Input::Timer)
            }
            (_, None) => panic!("a request with nothing to wait for: {out:?}"),
        };
    }
    panic!("no answer after 100 steps");
}

/// Runs one request: the origin answers `origin` 5 ms after each call, KV misses.
fn run(engine: &mut Engine<'_>, t0: u64, path: &str, origin: Observed) -> Reply {
    let (path, headers) = get(path, &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, out) = engine.start(at(t0), &req, &env(), t0 + 1);
    finish(engine, &mut f, t0, out, &origin)
}

/// One healthy request, so the isolate is no longer cold: what starts after it is judged as
/// on a warm isolate (its timeouts and latencies too).
fn warm(engine: &mut Engine<'_>) {
    assert_eq!(run(engine, 0, "/recommendations/warm", ok()).status, 200);
}

/// Starts a request and returns its flight and first output.
fn begin<'p>(e: &mut Engine<'p>, t: u64, seed: u64) -> (Flight<'p>, Output<'p>) {
    let headers = vec![];
    let req = Incoming {
        method: "GET",
        path: "/recommendations/alice",
        query: "",
        headers: &headers,
    };
    e.start(at(t), &req, &env(), seed)
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
    let (mut f, out) = e.start(at(0), &req, &env(), 9);
    let (io, request) = fetches(&out)[0];
    assert_eq!(out.wake_at, Some(at(45)), "the race's end");
    assert_eq!(request.header("authorization"), Some("Bearer model-secret"));
    assert!(request
        .header("traceparent")
        .unwrap()
        .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    assert_eq!(request.header("x-correlation-id"), Some(f.correlation_id()));
    assert!(request.url.contains("user_id=alice") && request.url.contains("category=audio"));
    let out = e.step(&mut f, at(20), fetched(io, ok()));
    assert_eq!(out.wake_at, None, "answered: no timer left");
    let r = reply(out);
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
    let (_, out) = e.start(at(0), &req, &env(), 1);
    assert!(out.starts().next().is_none(), "no I/O");
    let r = reply(out);
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
    let (mut f, out) = e.start(at(0), &req, &env(), 3);
    // The model hangs: its timer fires; KV misses.
    let r = finish(&mut e, &mut f, 0, out, &Observed::TimedOut);
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
    let (mut f, out) = e.start(at(0), &req, &env(), 4);
    let Some((
        io,
        Op::Limit {
            binding: "STORM", ..
        },
    )) = out.starts().next()
    else {
        panic!("{out:?}")
    };
    let r = reply(e.step(&mut f, at(1), Input::Done(io, Done::Limited(Ok(false)))));
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), Some("10"));
    assert_eq!(body(&r)["code"], "ERR_RETRY_STORM_DETECTED");

    let (mut f, out) = e.start(at(5), &req, &env(), 5);
    let (io, _) = out.starts().next().unwrap();
    let out = e.step(
        &mut f,
        at(6),
        Input::Done(
            io,
            Done::Limited(Err("binding not bound\n    at stack".into())),
        ),
    );
    let r = reply(e.step(&mut f, at(20), fetched(fetch(&out), ok())));
    let notes = log(&r)["notes"].to_string();
    assert!(notes.contains("STORM_LIMITER_UNAVAILABLE"), "{notes}");
    assert!(
        !notes.contains("at stack"),
        "no JavaScript stack in notes: {notes}"
    );
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
        let (_, out) = e.start(at(0), &req, &env(), 6);
        let r = reply(out);
        assert_eq!(r.status, want);
        assert_eq!(log(&r)["outcome"], "admin");
        assert!(r.point.is_none());
    }
    assert_eq!(e.counters().requests, 0, "operators are not traffic");
}

#[test]
fn reports_after_the_answer_answer_nothing_again() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let (path, headers) = get("/recommendations/alice", &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, out) = e.start(at(0), &req, &env(), 7);
    let io = fetch(&out);
    assert!(e.step(&mut f, at(10), fetched(io, ok())).reply().is_some());
    for input in [Input::Timer, fetched(io, ok()), kv_done(IoId(99), miss())] {
        let out = e.step(&mut f, at(11), input);
        assert_eq!(out, Output::default(), "the response is already out");
    }
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

mod fleet;
mod headers;
mod hedge;
mod isolate;
mod prefetch;
mod retry;

/// [E-OBSERVE] A replay rebuilds the incident from the log line: when the request arrived,
/// each call with how it ended (a hung model's: cut at the deadline, censored), each tier
/// consulted with what it found, and the isolate that served it.
#[test]
fn the_log_line_says_when_each_call_and_tier_read_ended_and_how() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, out) = begin(&mut e, 1_000, 7);
    let (r, _) = hung(&mut e, &mut f, 1_000, out);
    let l = log(&r);
    assert_eq!(l["at_ms"], NOW + 1_000);
    assert_eq!(
        l["calls"],
        serde_json::json!([{"start_ms": 0, "end_ms": 45, "due_ms": 45, "end": "cut", "status": null,
            "retry_after_s": null, "probe": false, "hedge": false}])
    );
    let tiers: Vec<(String, String)> = l["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tier"].as_str().unwrap().to_string(),
                t["read"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        [("user", "miss"), ("category", "miss"), ("stubs", "hit")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // The embedded tier answered from memory at once; the catalog's age is the hit's.
    let stubs = &l["tiers"][2];
    assert_eq!(stubs["start_ms"], stubs["end_ms"]);
    assert!(stubs["age_ms"].as_u64().is_some_and(|a| a > 0), "{stubs}");
    // The same isolate's lines carry the same name.
    let (mut f2, out) = begin(&mut e, 2_000, 8);
    let (r2, _) = hung(&mut e, &mut f2, 2_000, out);
    assert_eq!(log(&r2)["isolate"], l["isolate"]);
    assert_eq!(l["isolate"].as_str().map(str::len), Some(16));
}
