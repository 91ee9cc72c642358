//! The bench's figures as one JSON document (what `--out` writes) and its human summary.
//! The document's top-level keys are the figures issue 13 names; `targets` says which of the
//! goals each run met. Pure functions of the measurements, tested on synthetic ones.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::load::{Answer, Slice};
use super::ratio;
use crate::drill::check::Latency;
use crate::drill::observe::Observed;

/// What a run measured, before any figure is computed.
pub struct Measured {
    pub cold_edge: Vec<Observed>,
    pub cold_peer: Vec<Observed>,
    /// The bare pass-through Worker's cold first wave: what any Rust Worker pays.
    pub cold_bare: Vec<Observed>,
    /// The same, keeping the edge's promises the direct way (empty without a token rule).
    pub cold_bare_obliged: Vec<Observed>,
    pub seq_edge: Vec<Observed>,
    pub seq_bare: Vec<Observed>,
    /// Healthy closed loop at `concurrency`: edge, peer, bare, edge-off (and edge-b).
    pub healthy_c: Vec<Slice>,
    /// Healthy closed loop at 64: edge, peer.
    pub healthy_hi: Vec<Slice>,
    /// Breaker openings on `edge` during the healthy closed loops, as the status endpoint
    /// lists them with their evidence (None: no status read).
    pub breaker_openings: Option<Vec<Value>>,
    /// The origin's own answer times during the healthy closed loop at 64 (every side's
    /// calls): `[i]` answers of `i` ms, the last bin slower.
    pub origin_served_hi: Vec<u64>,
    /// Model hung, sequential, embedded tiers only (breaker off).
    pub emb_hung: Vec<Observed>,
    /// `--compare-edge`: the other build's embedded-only edge, interleaved with `emb_hung`
    /// (empty without it).
    pub emb_hung_b: Vec<Observed>,
    /// Interleaved with `emb_hung` on the same connection: requests the edge refuses before
    /// any I/O (the transport's and the runtime's own latency).
    pub refused_hung: Vec<Observed>,
    /// Interleaved with `emb_hung`: the no-op Worker answering after a `setTimeout` of the
    /// deadline (the runtime's timer alone).
    pub timer_floor: Vec<Observed>,
    /// The no-op Worker's timer racing a hung model call (`?race=1`).
    pub race_floor: Vec<Observed>,
    /// Model hung, sequential, every tier (breaker off).
    pub off_hung: Vec<Observed>,
    /// Speculative tier reads (asked for, unused) during `off_hung` and during the edge's
    /// share of `hung_hi` (None when the status endpoint could not be read).
    pub speculative_off: Option<(u64, u64)>,
    pub speculative_hi: Option<(u64, u64)>,
    /// Model hung, closed loop at 64: edge (breaker as shipped), peer.
    pub hung_hi: Vec<Slice>,
    /// The model hung, 64 connections, edge and peer each paced to the peer's rate in
    /// `hung_hi` (empty when the peer answered nothing there).
    pub hung_paced: Vec<Slice>,
    /// Healthy, the bench's connections: the bare Worker, the bare Worker obliged (token,
    /// log line, headers) and the edge, alternating (empty for a policy without a token).
    pub steps_phase: Vec<Slice>,
    pub bare_hung: Observed,
    pub origin_calls: u64,
    pub tail: Tail,
}

/// The hedging case: a model with a long tail, the edge with and without hedging.
pub struct Tail {
    pub plain: Vec<Observed>,
    pub hedged: Vec<Observed>,
    pub calls_plain: u64,
    pub calls_hedged: u64,
    pub fast_ms: u64,
    pub slow_ms: u64,
    pub slow_per_mille: u64,
}

fn spec_json(counts: Option<(u64, u64)>, requests: u64) -> Value {
    match counts {
        Some((asked, unused)) => {
            json!({"requests": requests, "prefetched": asked, "unused": unused})
        }
        None => Value::Null,
    }
}

fn tail_side(obs: &[Observed], calls: u64) -> Value {
    let n = obs.len().max(1) as f64;
    let live = obs.iter().filter(|o| o.is_live()).count();
    json!({
        "requests": obs.len(),
        "live_share": round(live as f64 / n),
        "latency": lat(obs),
        "origin_calls_per_request": round(calls as f64 / n),
    })
}

pub struct Setup<'a> {
    pub policy: &'a str,
    pub breaker: bool,
    pub origin_latency_ms: u64,
    pub deadline_ms: f64,
    pub budget_ms: f64,
    pub concurrency: usize,
    pub rounds: usize,
    pub module_bytes: u64,
    pub module_gzip_bytes: u64,
    pub bare_module_gzip_bytes: u64,
    pub peer_bytes: u64,
    pub startup_ms: f64,
}

fn lat(obs: &[Observed]) -> Latency {
    Latency::of(obs.iter().filter(|o| o.status == 200).map(|o| o.latency_ms))
}

fn slice_json(s: &Slice) -> Value {
    json!({
        "rps": round(s.rps()), "live_rps": round(s.live_rps()), "answers": s.answers, "live": s.live,
        "failed": s.failed, "latency": s.latency, "cpu_us_per_request": s.cpu_us_per_request.map(round),
        "by_kind": by_kind(&s.kinds),
    })
}

/// The answers of a loop by kind (live, or reason/tier): how many, their latency, and how
/// many of them were slower than the loop's own p99 — what the tail is made of — and of
/// those, how many were sent in the side's first slice, and in the first
/// [`SLICE_START_MS`] of any slice (a side's first slice meets the phase's change, e.g. a
/// breaker that has not yet seen the model hang; every slice opens fresh connections).
fn by_kind(kinds: &[Answer]) -> Value {
    let p99 = Latency::of(kinds.iter().map(|a| a.latency_ms)).p99_ms;
    let mut groups: BTreeMap<&str, Vec<&Answer>> = BTreeMap::new();
    for a in kinds {
        groups.entry(a.kind.as_str()).or_default().push(a);
    }
    Value::Object(
        groups
            .into_iter()
            .map(|(k, answers)| {
                let over: Vec<&&Answer> = answers.iter().filter(|a| a.latency_ms > p99).collect();
                let lat = Latency::of(answers.iter().map(|a| a.latency_ms));
                (
                    k.to_string(),
                    json!({
                        "answers": answers.len(), "latency": lat, "over_loop_p99": over.len(),
                        "over_loop_p99_in_first_slice": over.iter().filter(|a| a.slice == 0).count(),
                        "over_loop_p99_at_a_slice_start": over.iter().filter(|a| a.offset_ms < SLICE_START_MS).count(),
                    }),
                )
            })
            .collect(),
    )
}

/// What counts as the start of a slice in [`by_kind`].
const SLICE_START_MS: f64 = 300.0;

/// The origin's own answer times (a per-millisecond histogram): count and percentiles,
/// `null` past the last bin.
fn served(h: &[u64]) -> Value {
    let n: u64 = h.iter().sum();
    let q = |q: f64| -> Option<usize> {
        if n == 0 {
            return None;
        }
        let need = (q * n as f64).ceil() as u64;
        let mut seen = 0;
        h.iter()
            .position(|c| {
                seen += c;
                seen >= need
            })
            .filter(|&i| i + 1 < h.len())
    };
    json!({"answers": n, "p50_ms": q(0.5), "p95_ms": q(0.95), "p99_ms": q(0.99)})
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Time from the deadline to the answer, per answering tier, ms.
fn after_deadline(obs: &[Observed], deadline_ms: f64) -> BTreeMap<String, Latency> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for o in obs.iter().filter(|o| o.status == 200) {
        by.entry(o.headers.tier.clone().unwrap_or_else(|| "?".into()))
            .or_default()
            .push(o.latency_ms - deadline_ms);
    }
    by.into_iter().map(|(t, v)| (t, Latency::of(v))).collect()
}

/// p99 of a merged closed loop's answers sent after its first slice, ms (None without them).
fn after_first(x: &Slice) -> Option<f64> {
    let later: Vec<f64> = x
        .kinds
        .iter()
        .filter(|a| a.slice > 0)
        .map(|a| a.latency_ms)
        .collect();
    (!later.is_empty()).then(|| round(Latency::of(later).p99_ms))
}

pub fn document(s: &Setup<'_>, m: &Measured) -> Value {
    let cold = lat(&m.cold_edge);
    let cold_peer = lat(&m.cold_peer);
    let (seq_e, seq_b) = (lat(&m.seq_edge), lat(&m.seq_bare));
    let over = |obs: &[Observed]| {
        Latency::of(
            obs.iter()
                .filter(|o| o.status == 200)
                .map(|o| o.latency_ms - s.deadline_ms),
        )
    };
    let emb_over = over(&m.emb_hung);
    let refused = Latency::of(
        m.refused_hung
            .iter()
            .filter(|o| o.status != 0)
            .map(|o| o.latency_ms),
    );
    let timer_floor = over(&m.timer_floor);
    let race_floor = over(&m.race_floor);
    let tiers = after_deadline(&m.off_hung, s.deadline_ms);
    let (hc_edge, hc_peer, hc_bare) = (&m.healthy_c[0], &m.healthy_c[1], &m.healthy_c[2]);
    let (hh_edge, hh_peer) = (&m.healthy_hi[0], &m.healthy_hi[1]);
    let (hung_edge, hung_peer) = (&m.hung_hi[0], &m.hung_hi[1]);
    let noop_p99 = |v: &[Slice]| v.get(2).map(|n| round(n.latency.p99_ms));
    let cold_bare = lat(&m.cold_bare);
    let cold_all_answered =
        m.cold_edge.len() == m.cold_edge.iter().filter(|o| o.status == 200).count();
    let cold_within = cold_all_answered && m.cold_edge.iter().all(|o| o.latency_ms <= s.budget_ms);
    let cpu = |x: &Slice| x.cpu_us_per_request.map(round);
    let healthy_c16_rps_vs_js = ratio(hc_edge.live_rps(), hc_peer.live_rps());
    // What the healthy loop's connections can carry at all: each waits for the origin's
    // answer (its p50 by the origin's own clock, measured in the 64-connection loop), so no
    // side can pass more live answers a second than this.
    let origin_ceiling = served(&m.origin_served_hi)["p50_ms"]
        .as_f64()
        .filter(|&ms| ms > 0.0)
        .map(|ms| round(s.concurrency as f64 * 1000.0 / ms));
    let hung_c64_rps_vs_js = ratio(hung_edge.rps(), hung_peer.rps());
    let p50_vs_bare = ratio(seq_e.p50_ms, seq_b.p50_ms);
    let p99_vs_bare = ratio(seq_e.p99_ms, seq_b.p99_ms);
    let mut bare_json = slice_json(hc_bare);
    bare_json["live_rps"] = json!(round(hc_bare.rps()));
    let tier_p99: BTreeMap<&String, f64> =
        tiers.iter().map(|(t, l)| (t, round(l.p99_ms))).collect();
    let detail = json!({
        "cold_first_wave": {"edge": cold, "peer": cold_peer, "bare": cold_bare, "bare_obliged": (!m.cold_bare_obliged.is_empty()).then(|| lat(&m.cold_bare_obliged)), "requests": m.cold_edge.len(),
                            "edge_answered": m.cold_edge.iter().filter(|o| o.status == 200).count()},
        "healthy_sequential": {"rounds": s.rounds, "edge": seq_e, "bare": seq_b},
        // The bare Worker passes the origin through without saying so: its answers are live.
        "healthy_closed_loop": {"connections": s.concurrency, "edge": slice_json(hc_edge), "peer": slice_json(hc_peer),
                                "origin_ceiling_rps": origin_ceiling,
                                "bare": bare_json, "edge_breaker_off": slice_json(&m.healthy_c[3]),
                                "edge_b": m.healthy_c.get(4).map(slice_json)},
        "healthy_closed_loop_64": {"edge": slice_json(hh_edge), "peer": slice_json(hh_peer),
                                   "noop": m.healthy_hi.get(2).map(slice_json),
                                   "origin_served": served(&m.origin_served_hi)},
        "hung_embedded_only": {"answers": m.emb_hung.iter().filter(|o| o.status == 200).count(),
                               "latency": lat(&m.emb_hung), "ms_after_deadline": emb_over,
                               "refused_before_io": refused, "timer_floor_after_deadline": timer_floor,
                               "timer_floor_with_subrequest_after_deadline": race_floor,
                               "edge_b_ms_after_deadline": (!m.emb_hung_b.is_empty()).then(|| over(&m.emb_hung_b))},
        "hung_every_tier_breaker_off": {"answers": m.off_hung.iter().filter(|o| o.status == 200).count(),
                                        "latency": lat(&m.off_hung), "ms_after_deadline_by_tier": tiers},
        "hung_closed_loop_64": {"edge": slice_json(hung_edge), "peer": slice_json(hung_peer),
                                "noop": m.hung_hi.get(2).map(slice_json),
                                "noop_log": m.hung_hi.get(3).map(slice_json)},
        "hung_paced_64_at_peer_rate": {"edge": m.hung_paced.first().map(slice_json),
                                       "peer": m.hung_paced.get(1).map(slice_json)},
        "bare_with_the_model_hung": if m.bare_hung.status == 0 { json!(format!("no answer within 1000 ms ({})", m.bare_hung.error.clone().unwrap_or_default())) } else { json!(m.bare_hung.status) },
        "origin_calls": m.origin_calls,
    });
    let targets = json!({
    "cpu_healthy_at_most_js": matches!((cpu(hc_edge), cpu(hc_peer)), (Some(e), Some(j)) if e <= j),
    "degraded_p99_within_race_floor_plus_1ms": emb_over.p99_ms <= race_floor.p99_ms + 1.0,
    "cold_first_wave_within_bare_plus_10ms": cold_all_answered && cold.p99_ms <= cold_bare.p99_ms + 10.0,
    "healthy_c16_at_least_1_1x_js": healthy_c16_rps_vs_js >= 1.1,
    "hung_c64_p99_at_most_0_6x_js": hung_edge.latency.p99_ms <= 0.6 * hung_peer.latency.p99_ms,
    "degraded_p99_within_deadline_plus_2ms": emb_over.p99_ms <= 2.0,
    "hung_c64_at_least_1_5x_js_with_p99_in_budget": hung_c64_rps_vs_js >= 1.5 && hung_edge.latency.p99_ms <= s.budget_ms,
    "cold_first_wave_within_budget": cold_within,
    "healthy_p50_within_5_percent_of_bare": p50_vs_bare <= 1.05,
    "healthy_p99_within_10_percent_of_bare": p99_vs_bare <= 1.10,
    "healthy_c16_at_least_1_2x_js": healthy_c16_rps_vs_js >= 1.2,
    "no_breaker_opening_with_a_healthy_origin": m.breaker_openings.as_ref().is_some_and(Vec::is_empty),
    });
    let step = |i: usize| m.steps_phase.get(i).and_then(cpu);
    let gap = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| round(a - b));
    let steps_phase = json!({
        "bare": step(0), "bare_obliged": step(1), "edge": step(2), "bare_js": step(3), "peer": step(4),
        // The edge's lead over the JS peer, and the Rust pass-through's over the JS one, in
        // the same phase: the second is the shell's price before any of the edge's work.
        "edge_over_peer": gap(step(2), step(4)),
        "rust_shell_over_js": gap(step(0), step(3)),
    });
    let at_peer_rate = json!({
        "rate": m.hung_paced.first().map(|_| round(hung_peer.rps())),
        "edge": m.hung_paced.first().map(|x| round(x.latency.p99_ms)),
        "peer": m.hung_paced.get(1).map(|x| round(x.latency.p99_ms)),
    });
    let after_first_slice = json!({
        "edge": after_first(hung_edge), "peer": after_first(hung_peer),
        "noop": m.hung_hi.get(2).and_then(after_first),
        "noop_log": m.hung_hi.get(3).and_then(after_first),
    });
    json!({
        "policy": s.policy,
        "breaker_as_shipped": s.breaker,
        "origin_latency_ms": s.origin_latency_ms,
        "deadline_ms": s.deadline_ms,
        "budget_ms": s.budget_ms,
        "workerd_processes": 1,
        "module": {"edge_bytes": s.module_bytes, "edge_gzip_bytes": s.module_gzip_bytes,
                   "bare_gzip_bytes": s.bare_module_gzip_bytes, "peer_js_bytes": s.peer_bytes},
        "startup_ms": round(s.startup_ms),

        "degraded_p99_over_deadline_ms": round(emb_over.p99_ms),
        "refused_before_io_p99_ms": round(refused.p99_ms),
        // A Worker that only waits a `setTimeout` of the deadline: how late the runtime's own
        // timer answers, the floor under degraded_p99_over_deadline_ms.
        "timer_floor_p99_over_deadline_ms": round(timer_floor.p99_ms),
        "timer_floor_with_subrequest_p99_over_deadline_ms": round(race_floor.p99_ms),
        "deadline_to_answer_p99_ms": tier_p99,
        "hung_c64_rps_vs_js": hung_c64_rps_vs_js,
        "hung_c64_p99_ms": round(hung_edge.latency.p99_ms),
        // The same loop without each side's first slice: the edge's breaker opens in its
        // first slice (until it has seen `min_calls` timeouts every request waits the
        // deadline, and its isolate reads the users' KV entries cold); what is left is the
        // steady degraded path.
        // Both sides at one rate (the peer's closed-loop rate), latency from when each
        // request was due: the figure without the closed loop's saturation.
        "hung_c64_p99_at_peer_rate_ms": at_peer_rate,
        // CPU µs per healthy request in one phase: what a pass-through costs, what keeping
        // the edge's promises adds to it (token, log line, headers, write-through), and the edge.
        "cpu_us_healthy_steps": steps_phase,
        "hung_c64_p99_after_first_slice_ms": after_first_slice,
        // The same 64-connection closed loop on a Worker that answers `ok` with no I/O: the
        // runtime's own p99 under that load, the floor under hung_c64_p99_ms.
        "noop_c64_p99_ms": noop_p99(&m.hung_hi),
        // The same no-op writing a log line the size of the edge's each request: the floor
        // with the edge's output (workerd writes it into a pipe its host process reads).
        "noop_log_c64_p99_ms": m.hung_hi.get(3).map(|n| round(n.latency.p99_ms)),
        "cold_first_wave_p99_ms": round(cold.p99_ms),
        "cpu_us_per_request": {
            "healthy": {"edge": cpu(hc_edge), "bare": cpu(hc_bare), "js": cpu(hc_peer)},
            "degraded": {"edge": cpu(hung_edge), "js": cpu(hung_peer)},
        },
        "healthy_c16_rps_vs_js": healthy_c16_rps_vs_js,
        "breaker_openings_healthy": m.breaker_openings.as_ref().map(Vec::len),
        "breaker_openings_healthy_evidence": m.breaker_openings,
        "healthy_p50_vs_bare": p50_vs_bare,
        "healthy_p99_vs_bare": p99_vs_bare,
        // [E-CASCADE] What starting the tiers' KV reads with the origin call (once the model
        // has gone silent) cost in reads: asked for, and those never read by their request.
        "speculative_kv_reads": {
            "hung_every_tier_breaker_off": spec_json(m.speculative_off, m.off_hung.len() as u64),
            "hung_closed_loop_64": spec_json(m.speculative_hi, hung_edge.answers),
        },
        "hedging": {
            "model": {"fast_ms": m.tail.fast_ms, "slow_ms": m.tail.slow_ms, "slow_per_mille": m.tail.slow_per_mille},
            "without": tail_side(&m.tail.plain, m.tail.calls_plain),
            "with": tail_side(&m.tail.hedged, m.tail.calls_hedged),
        },

        "detail": detail,
        // Issue 23's targets: each against a figure measured beside it in the same run.
        "targets": targets,
    })
}
mod human;
pub use human::human;
#[cfg(test)]
use human::tail_kinds;

#[cfg(test)]
mod tests;
