//! The bench document as a person reads it: the figures, the floors beside them, the targets.

use serde_json::{json, Value};

/// The human summary of a bench document.
pub fn human(d: &Value) -> String {
    let f = |v: &Value| v.as_f64().map_or("?".into(), |x| format!("{x:.2}"));
    let det = &d["detail"];
    let mut s = format!(
        "Bench: {} (origin latency {} ms, deadline {} ms, budget {} ms; edge, bare and the JS peer in one workerd, interleaved)\n\n",
        d["policy"].as_str().unwrap_or("?"), d["origin_latency_ms"], d["deadline_ms"], d["budget_ms"]
    );
    s.push_str(&format!(
        "Cold first wave ({} concurrent, fresh isolates): edge p99 {} ms ({} answered), JS peer p99 {} ms, bare Rust pass-through p99 {} ms, the same keeping the token, log line, headers and write-through the direct way p99 {} ms\n",
        det["cold_first_wave"]["requests"],
        f(&d["cold_first_wave_p99_ms"]),
        det["cold_first_wave"]["edge_answered"],
        f(&det["cold_first_wave"]["peer"]["p99_ms"]),
        f(&det["cold_first_wave"]["bare"]["p99_ms"]),
        f(&det["cold_first_wave"]["bare_obliged"]["p99_ms"])
    ));
    s.push_str(&format!(
        "Healthy, sequential: edge p50 {} / p99 {} ms, bare {} / {} ms → {}× / {}×\n",
        f(&det["healthy_sequential"]["edge"]["p50_ms"]),
        f(&det["healthy_sequential"]["edge"]["p99_ms"]),
        f(&det["healthy_sequential"]["bare"]["p50_ms"]),
        f(&det["healthy_sequential"]["bare"]["p99_ms"]),
        f(&d["healthy_p50_vs_bare"]),
        f(&d["healthy_p99_vs_bare"])
    ));
    s.push_str(&format!(
        "\n{:<38} {:>10} {:>10} {:>10}\n",
        "closed loop", "edge", "JS peer", "bare"
    ));
    let row = |label: &str, block: &Value, key: &str| {
        format!(
            "{:<38} {:>10} {:>10} {:>10}\n",
            label,
            f(&block["edge"][key]),
            f(&block["peer"][key]),
            f(&block["bare"][key])
        )
    };
    let c = &det["healthy_closed_loop"];
    s.push_str(&row(
        &format!("healthy, {} conns: live req/s", c["connections"]),
        c,
        "live_rps",
    ));
    s.push_str(&row("  CPU µs / request", c, "cpu_us_per_request"));
    s.push_str(&format!(
        "{:<38} {:>10} {:>10} {:>10}\n",
        "  p50 / p99 ms",
        format!(
            "{}/{}",
            f(&c["edge"]["latency"]["p50_ms"]),
            f(&c["edge"]["latency"]["p99_ms"])
        ),
        format!(
            "{}/{}",
            f(&c["peer"]["latency"]["p50_ms"]),
            f(&c["peer"]["latency"]["p99_ms"])
        ),
        format!(
            "{}/{}",
            f(&c["bare"]["latency"]["p50_ms"]),
            f(&c["bare"]["latency"]["p99_ms"])
        )
    ));
    if c["origin_ceiling_rps"].is_number() {
        s.push_str(&format!(
            "  at most {} live req/s on {} connections: each waits for the origin's answer (p50 {} ms)\n",
            f(&c["origin_ceiling_rps"]),
            c["connections"],
            det["healthy_closed_loop_64"]["origin_served"]["p50_ms"]
        ));
    }
    let off = &c["edge_breaker_off"];
    s.push_str(&format!(
        "{:<38} {:>10} (CPU µs/request {})\n",
        "  edge with its breaker off: live req/s",
        f(&off["live_rps"]),
        f(&off["cpu_us_per_request"])
    ));
    if c["edge_b"].is_object() {
        s.push_str(&format!(
            "{:<38} {:>10} (CPU µs/request {})\n",
            "  --compare-edge (breaker off): live req/s",
            f(&c["edge_b"]["live_rps"]),
            f(&c["edge_b"]["cpu_us_per_request"])
        ));
    }
    let st = &d["cpu_us_healthy_steps"];
    if st["bare"].is_number() {
        s.push_str(&format!(
            "  CPU µs / request in steps: bare {} → bare with the token, log line, headers and write-through {} → edge {}\n",
            f(&st["bare"]),
            f(&st["bare_obliged"]),
            f(&st["edge"])
        ));
        s.push_str(&format!(
            "  … same phase: JS pass-through {} → JS peer {}; the edge over the peer {} µs, the Rust pass-through over the JS one {} µs\n",
            f(&st["bare_js"]),
            f(&st["peer"]),
            f(&st["edge_over_peer"]),
            f(&st["rust_shell_over_js"])
        ));
    }
    let c = &det["healthy_closed_loop_64"];
    s.push_str(&row("healthy, 64 conns: live req/s", c, "live_rps"));
    let o = &c["origin_served"];
    s.push_str(&format!(
        "  the origin's own answer time, every side: p50 {} / p95 {} / p99 {} ms ({} answers)\n",
        o["p50_ms"], o["p95_ms"], o["p99_ms"], o["answers"]
    ));
    let c = &det["hung_closed_loop_64"];
    s.push_str(&row("model hung, 64 conns: req/s", c, "rps"));
    s.push_str(&row(
        "  p99 ms",
        &json!({"edge": c["edge"]["latency"], "peer": c["peer"]["latency"]}),
        "p99_ms",
    ));
    let r = &d["hung_c64_p99_at_peer_rate_ms"];
    s.push_str(&format!(
        "{:<38} {:>10} {:>10} {:>10}\n",
        format!("  p99 ms, both at {} req/s", f(&r["rate"])),
        f(&r["edge"]),
        f(&r["peer"]),
        "?"
    ));
    let a = &d["hung_c64_p99_after_first_slice_ms"];
    s.push_str(&format!(
        "{:<38} {:>10} {:>10} {:>10}\n",
        "  p99 ms after the first slice",
        f(&a["edge"]),
        f(&a["peer"]),
        "?"
    ));
    s.push_str(&tail_kinds(&c["edge"]["by_kind"]));
    s.push_str(&format!(
        "{:<38} {:>10} req/s, p50 {} ms, p99 {} ms\n",
        "  no-op Worker (the runtime's floor)",
        f(&c["noop"]["rps"]),
        f(&c["noop"]["latency"]["p50_ms"]),
        f(&c["noop"]["latency"]["p99_ms"])
    ));
    if c["noop_log"].is_object() {
        s.push_str(&format!(
            "{:<38} {:>10} req/s, p50 {} ms, p99 {} ms\n",
            "  no-op Worker logging the edge's line",
            f(&c["noop_log"]["rps"]),
            f(&c["noop_log"]["latency"]["p50_ms"]),
            f(&c["noop_log"]["latency"]["p99_ms"])
        ));
    }
    s.push_str(&row("  CPU µs / request", c, "cpu_us_per_request"));
    s.push_str(&format!(
        "\nBreaker openings with a healthy origin: {}\n",
        d["breaker_openings_healthy"]
    ));
    for o in d["breaker_openings_healthy_evidence"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let e = &o["evidence"];
        s.push_str(&format!(
            "  opened on {} calls: {} failures ({} timeouts), p95 {}\n",
            e["calls"],
            e["failures"],
            e["timeouts"],
            e["p95_ms"]
                .as_u64()
                .map_or("among the timeouts".to_string(), |v| format!("{v} ms"))
        ));
    }
    s.push_str(&format!(
        "Model hung, embedded tier only: answer {} ms after the deadline at p99 (interleaved: a request refused before any I/O, p99 {} ms; a no-op Worker's {} ms setTimeout, p99 {} ms late, or {} ms racing a hung model call)\n",
        f(&d["degraded_p99_over_deadline_ms"]),
        f(&d["refused_before_io_p99_ms"]),
        d["deadline_ms"],
        f(&d["timer_floor_p99_over_deadline_ms"]),
        f(&d["timer_floor_with_subrequest_p99_over_deadline_ms"])
    ));
    let b = &det["hung_embedded_only"]["edge_b_ms_after_deadline"];
    if b.is_object() {
        let a = &det["hung_embedded_only"]["ms_after_deadline"];
        s.push_str(&format!(
            "  --compare-edge, interleaved: p50 / p99 after the deadline {} / {} ms (this build {} / {} ms)\n",
            f(&b["p50_ms"]),
            f(&b["p99_ms"]),
            f(&a["p50_ms"]),
            f(&a["p99_ms"])
        ));
    }
    if let Some(t) = det["hung_every_tier_breaker_off"]["ms_after_deadline_by_tier"].as_object() {
        for (tier, l) in t {
            s.push_str(&format!(
                "  {tier:<12} deadline to answer: p50 {} ms, p99 {} ms ({} answers)\n",
                f(&l["p50_ms"]),
                f(&l["p99_ms"]),
                l["n"]
            ));
        }
    }
    let sp = &d["speculative_kv_reads"];
    for (label, key) in [
        ("every tier, breaker off", "hung_every_tier_breaker_off"),
        ("64 connections", "hung_closed_loop_64"),
    ] {
        let x = &sp[key];
        if !x.is_null() {
            s.push_str(&format!(
                "  speculative tier reads ({label}): {} for {} requests, {} of them unused\n",
                x["prefetched"], x["requests"], x["unused"]
            ));
        }
    }
    let h = &d["hedging"];
    s.push_str(&format!(
        "Long-tail model ({} ms, {}‰ of calls {} ms): live share {} → {} with hedging, p99 {} → {} ms, origin calls per request {} → {}\n",
        h["model"]["fast_ms"], h["model"]["slow_per_mille"], h["model"]["slow_ms"],
        f(&h["without"]["live_share"]), f(&h["with"]["live_share"]),
        f(&h["without"]["latency"]["p99_ms"]), f(&h["with"]["latency"]["p99_ms"]),
        f(&h["without"]["origin_calls_per_request"]), f(&h["with"]["origin_calls_per_request"])
    ));
    s.push_str(&format!(
        "Module: {} bytes gzipped (bare {}); start to listening {} ms\n",
        d["module"]["edge_gzip_bytes"],
        d["module"]["bare_gzip_bytes"],
        f(&d["startup_ms"])
    ));
    s.push_str(&format!(
        "\nTargets (reported, not asserted): {}\n",
        d["targets"]
    ));
    s
}

/// One line: the kinds of answer over a loop's p99, most first (`by_kind` of [`slice_json`]).
pub(super) fn tail_kinds(by_kind: &Value) -> String {
    let Some(m) = by_kind.as_object() else {
        return String::new();
    };
    let n = |g: &Value, k: &str| g[k].as_u64().unwrap_or(0);
    let mut v: Vec<(&String, &Value)> = m.iter().collect();
    v.sort_by(|a, b| {
        n(b.1, "over_loop_p99")
            .cmp(&n(a.1, "over_loop_p99"))
            .then(n(b.1, "answers").cmp(&n(a.1, "answers")))
    });
    let parts: Vec<String> = v
        .iter()
        .take(5)
        .map(|(k, g)| {
            format!(
                "{k} {} of {} (p50 {:.1} ms; {} in the first slice, {} at a slice's start)",
                n(g, "over_loop_p99"),
                n(g, "answers"),
                g["latency"]["p50_ms"].as_f64().unwrap_or(0.0),
                n(g, "over_loop_p99_in_first_slice"),
                n(g, "over_loop_p99_at_a_slice_start"),
            )
        })
        .collect();
    format!("  edge, over its p99 by kind: {}\n", parts.join(", "))
}
