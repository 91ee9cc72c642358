//! The bench document from made-up measurements: named figures, targets, the human text.

use super::*;
use crate::drill::observe::Disclosed;

fn ok(ms: f64, tier: Option<&str>) -> Observed {
    Observed {
        status: 200,
        latency_ms: ms,
        headers: Disclosed {
            tier: tier.map(String::from),
            source: Some(if tier.is_some() { "fallback" } else { "origin" }.into()),
            ..Disclosed::default()
        },
        ..Observed::default()
    }
}

fn refused_405(ms: f64) -> Observed {
    Observed {
        status: 405,
        latency_ms: ms,
        ..Observed::default()
    }
}

fn slice(rps: f64, live: bool) -> Slice {
    let answers = (rps * 2.0) as u64;
    Slice {
        secs: 2.0,
        answers,
        live: if live { answers } else { 0 },
        latencies: vec![10.0, 20.0],
        latency: Latency::of([10.0, 20.0]),
        cpu_us_per_request: Some(500.0),
        ..Slice::default()
    }
}

#[test]
fn the_origins_answer_times_read_from_its_histogram() {
    let mut h = vec![0u64; 1024];
    h[25] = 90;
    h[40] = 9;
    h[1023] = 1;
    let v = served(&h);
    assert_eq!(v["answers"], 100);
    assert_eq!(v["p50_ms"], 25);
    assert_eq!(v["p95_ms"], 40);
    assert_eq!(v["p99_ms"], 40);
    h[1023] = 5;
    assert_eq!(served(&h)["p99_ms"], Value::Null, "past the last bin");
    assert_eq!(served(&[0; 4])["p50_ms"], Value::Null);
}

fn measured() -> Measured {
    Measured {
        cold_edge: vec![ok(40.0, None); 10],
        cold_peer: vec![ok(50.0, None); 10],
        cold_bare: vec![ok(45.0, None); 10],
        cold_bare_obliged: vec![ok(52.0, None); 10],
        seq_edge: vec![ok(30.0, None); 10],
        seq_bare: vec![ok(29.0, None); 10],
        healthy_c: vec![
            slice(600.0, true),
            slice(400.0, true),
            slice(700.0, true),
            slice(600.0, true),
        ],
        healthy_hi: vec![slice(600.0, true), slice(400.0, true), slice(3000.0, true)],
        breaker_openings: Some(Vec::new()),
        origin_served_hi: vec![0; 1024],
        emb_hung: vec![ok(46.0, Some("curated")); 10],
        emb_hung_b: Vec::new(),
        refused_hung: vec![refused_405(0.8); 10],
        timer_floor: vec![ok(46.5, None); 10],
        race_floor: vec![ok(47.25, None); 10],
        off_hung: vec![ok(53.0, Some("user")), ok(56.0, Some("curated"))],
        speculative_off: Some((1, 0)),
        speculative_hi: None,
        hung_hi: vec![
            slice(1500.0, false),
            slice(500.0, false),
            slice(3000.0, true),
            slice(2500.0, true),
        ],
        hung_paced: vec![slice(500.0, false), slice(500.0, false)],
        steps_phase: [440.0, 640.0, 530.0, 307.0, 500.0]
            .map(|cpu| Slice {
                cpu_us_per_request: Some(cpu),
                ..slice(600.0, true)
            })
            .to_vec(),
        bare_hung: Observed::default(),
        origin_calls: 100,
        tail: Tail {
            plain: vec![ok(20.0, None); 19]
                .into_iter()
                .chain([ok(50.0, Some("user"))])
                .collect(),
            hedged: vec![ok(20.0, None); 20],
            calls_plain: 20,
            calls_hedged: 21,
            fast_ms: 15,
            slow_ms: 200,
            slow_per_mille: 50,
        },
    }
}

fn setup() -> Setup<'static> {
    Setup {
        policy: "p",
        breaker: true,
        origin_latency_ms: 25,
        deadline_ms: 45.0,
        budget_ms: 60.0,
        concurrency: 16,
        rounds: 10,
        module_bytes: 1,
        module_gzip_bytes: 1,
        bare_module_gzip_bytes: 1,
        peer_bytes: 1,
        startup_ms: 700.0,
    }
}

#[test]
fn the_document_holds_the_named_figures_and_judges_the_targets() {
    let m = measured();
    let s = setup();
    let d = document(&s, &m);
    assert_eq!(d["degraded_p99_over_deadline_ms"], 1.0);
    assert_eq!(d["refused_before_io_p99_ms"], 0.8);
    assert_eq!(d["deadline_to_answer_p99_ms"]["user"], 8.0);
    assert_eq!(d["hung_c64_rps_vs_js"], 3.0);
    assert_eq!(d["noop_c64_p99_ms"], 20.0);
    assert_eq!(d["noop_log_c64_p99_ms"], 20.0);
    assert_eq!(
        d["cpu_us_healthy_steps"],
        json!({"bare": 440.0, "bare_obliged": 640.0, "edge": 530.0, "bare_js": 307.0, "peer": 500.0,
               "edge_over_peer": 30.0, "rust_shell_over_js": 133.0})
    );
    assert!(human(&d).contains(
        "same phase: JS pass-through 307.00 → JS peer 500.00; the edge over the peer 30.00 µs, the Rust pass-through over the JS one 133.00 µs"
    ));
    assert!(
        human(&d).contains(
            "CPU µs / request in steps: bare 440.00 → bare with the token, log line, headers and write-through 640.00 → edge 530.00"
        ),
        "{}",
        human(&d)
    );
    assert_eq!(
        d["hung_c64_p99_at_peer_rate_ms"],
        json!({"rate": 500.0, "edge": 20.0, "peer": 20.0})
    );
    assert!(
        human(&d).contains("  p99 ms, both at 500.00 req/s"),
        "{}",
        human(&d)
    );
    assert_eq!(
        d["detail"]["hung_closed_loop_64"]["noop_log"]["rps"],
        2500.0
    );
    assert!(
        human(&d).contains("no-op Worker logging the edge's line    2500.00 req/s"),
        "{}",
        human(&d)
    );
    assert_eq!(d["timer_floor_p99_over_deadline_ms"], 1.5);
    assert_eq!(d["timer_floor_with_subrequest_p99_over_deadline_ms"], 2.25);
    assert_eq!(d["detail"]["cold_first_wave"]["bare"]["p99_ms"], 45.0);
    assert_eq!(
        d["detail"]["cold_first_wave"]["bare_obliged"]["p99_ms"],
        52.0
    );
    assert_eq!(d["detail"]["hung_closed_loop_64"]["noop"]["rps"], 3000.0);
    assert_eq!(d["healthy_c16_rps_vs_js"], 1.5);
    assert_eq!(d["breaker_openings_healthy"], 0);
    assert_eq!(d["targets"]["degraded_p99_within_deadline_plus_2ms"], true);
    assert_eq!(d["targets"]["cold_first_wave_within_budget"], true);
    assert_eq!(d["targets"]["healthy_p50_within_5_percent_of_bare"], true);
    assert_eq!(d["cpu_us_per_request"]["healthy"]["js"], 500.0);
    // Issue 23's targets, each against the figure measured beside it.
    let t = &d["targets"];
    assert_eq!(t["cpu_healthy_at_most_js"], true, "500 against 500 µs");
    assert_eq!(
        t["degraded_p99_within_race_floor_plus_1ms"], true,
        "1.0 against 2.25 + 1"
    );
    assert_eq!(
        t["cold_first_wave_within_bare_plus_10ms"], true,
        "40 against 45 + 10"
    );
    assert_eq!(t["healthy_c16_at_least_1_1x_js"], true, "1.5×");
    assert_eq!(
        t["hung_c64_p99_at_most_0_6x_js"], false,
        "20 against 0.6 × 20 ms"
    );
    let mut worse = measured();
    worse.cold_edge = vec![ok(55.5, None); 10];
    worse.emb_hung = vec![ok(48.5, Some("curated")); 10];
    worse.hung_hi[0].latency = Latency::of([5.0, 11.0]);
    let t = document(&s, &worse)["targets"].clone();
    assert_eq!(
        t["cold_first_wave_within_bare_plus_10ms"], false,
        "55.5 against 45 + 10"
    );
    assert_eq!(
        t["degraded_p99_within_race_floor_plus_1ms"], false,
        "3.5 against 2.25 + 1"
    );
    assert_eq!(
        t["hung_c64_p99_at_most_0_6x_js"], true,
        "11 against 0.6 × 20 ms"
    );
    let h = human(&d);
    assert!(
        h.contains("Breaker openings with a healthy origin: 0"),
        "{h}"
    );
    assert!(h.contains("user"), "{h}");
    let sp = &d["speculative_kv_reads"];
    assert_eq!(
        sp["hung_every_tier_breaker_off"],
        json!({"requests": 2, "prefetched": 1, "unused": 0})
    );
    assert!(
        sp["hung_closed_loop_64"].is_null(),
        "no status endpoint, no figure"
    );
    assert!(
        h.contains(
            "speculative tier reads (every tier, breaker off): 1 for 2 requests, 0 of them unused"
        ),
        "{h}"
    );
    assert!(
        !h.contains("speculative tier reads (64 connections)"),
        "{h}"
    );
}

#[test]
fn with_compare_edge_the_other_builds_degraded_answers_are_reported_beside_these() {
    let (mut m, s) = (measured(), setup());
    assert!(document(&s, &m)["detail"]["hung_embedded_only"]["edge_b_ms_after_deadline"].is_null());
    m.emb_hung_b = vec![ok(48.0, Some("curated")); 10];
    let d = document(&s, &m);
    let b = &d["detail"]["hung_embedded_only"]["edge_b_ms_after_deadline"];
    assert_eq!(b["p99_ms"], 3.0);
    assert_eq!(
        d["degraded_p99_over_deadline_ms"], 1.0,
        "this build's figure is its own"
    );
    let h = human(&d);
    assert!(
        h.contains("--compare-edge, interleaved: p50 / p99 after the deadline 3.00 / 3.00 ms (this build 1.00 / 1.00 ms)"),
        "{h}"
    );
}

#[test]
fn a_loops_answers_are_broken_down_by_kind_and_the_tail_named() {
    let a = |kind: &str, latency_ms: f64, offset_ms: f64, slice: usize| Answer {
        kind: kind.into(),
        latency_ms,
        offset_ms,
        slice,
    };
    let mut kinds: Vec<Answer> = (0..97)
        .map(|i| a("BREAKER_OPEN/user", 5.0 + f64::from(i) * 0.01, 900.0, 1))
        .collect();
    kinds.extend([
        a("ML_TIMEOUT/curated", 48.0, 0.0, 0),
        a("ML_TIMEOUT/curated", 300.0, 10.0, 0),
        a("live", 250.0, 0.0, 2),
    ]);
    let v = by_kind(&kinds);
    assert_eq!(v["BREAKER_OPEN/user"]["answers"], 97);
    assert_eq!(v["BREAKER_OPEN/user"]["over_loop_p99"], 0);
    assert_eq!(v["ML_TIMEOUT/curated"]["answers"], 2);
    // The loop's p99 is 250 ms: only the 300 ms answer is over it.
    assert_eq!(v["ML_TIMEOUT/curated"]["over_loop_p99"], 1);
    assert_eq!(v["ML_TIMEOUT/curated"]["over_loop_p99_in_first_slice"], 1);
    assert_eq!(v["ML_TIMEOUT/curated"]["over_loop_p99_at_a_slice_start"], 1);
    assert_eq!(v["live"]["over_loop_p99"], 0);
    let line = tail_kinds(&v);
    assert!(
        line.starts_with("  edge, over its p99 by kind: ML_TIMEOUT/curated 1 of 2"),
        "{line}"
    );
    assert_eq!(by_kind(&[]), json!({}));
}

#[test]
fn an_answer_is_live_or_its_reason_and_tier() {
    use super::super::load::kind;
    assert_eq!(kind(&ok(1.0, None)), "live");
    let mut o = ok(1.0, Some("user"));
    o.headers.reason = Some("BREAKER_OPEN".into());
    assert_eq!(kind(&o), "BREAKER_OPEN/user");
    o.headers.reason = None;
    assert_eq!(kind(&o), "-/user");
    assert_eq!(
        kind(&Observed {
            status: 200,
            ..Observed::default()
        }),
        "other"
    );
}

#[test]
fn the_healthy_loops_ceiling_is_its_connections_over_the_origins_answer_time() {
    let (mut m, s) = (measured(), setup());
    assert!(document(&s, &m)["detail"]["healthy_closed_loop"]["origin_ceiling_rps"].is_null());
    m.origin_served_hi[25] = 900;
    m.origin_served_hi[40] = 100;
    let d = document(&s, &m);
    // 16 connections, each waiting 25 ms (the p50): at most 640 answers a second.
    assert_eq!(
        d["detail"]["healthy_closed_loop"]["origin_ceiling_rps"],
        640.0
    );
    assert!(
        human(&d).contains("at most 640.00 live req/s on 16 connections"),
        "{}",
        human(&d)
    );
}

#[test]
fn the_model_hung_p99_after_the_first_slice_leaves_the_breakers_opening_out() {
    let answer = |slice: usize, ms: f64| Answer {
        kind: "BREAKER_OPEN/curated".into(),
        latency_ms: ms,
        offset_ms: 0.0,
        slice,
    };
    let mut edge = slice(1500.0, false);
    // The first slice: the breaker opening (every request waits the deadline).
    edge.kinds = (0..50).map(|_| answer(0, 60.0)).collect();
    edge.kinds
        .extend((0..100u32).map(|i| answer(1 + i as usize % 2, 2.0 + f64::from(i) / 100.0)));
    let mut m = measured();
    m.hung_hi[0] = edge;
    let d = document(&setup(), &m);
    let after = &d["hung_c64_p99_after_first_slice_ms"];
    assert_eq!(after["edge"], 2.98, "{after}");
    assert!(
        after["peer"].is_null(),
        "no answers recorded after its first slice"
    );
    assert!(
        human(&d).contains("  p99 ms after the first slice               2.98          ?"),
        "{}",
        human(&d)
    );
}
